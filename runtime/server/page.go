package server

import (
	_ "embed"
	"net/http"
)

// pageHTML is the page at GET /: a document dropped on it is read page by page through /v1/ocr.
//
//go:embed page.html
var pageHTML []byte

// page serves the page; it is static, so it needs no API key (its requests to /v1/ocr do).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(pageHTML)
}
