package server

import (
	"encoding/base64"
	"strings"
	"testing"
)

// FuzzReadURL feeds arbitrary URLs to the data-URL reader: a URL is either read or refused with
// a message; a base64 data URL of some bytes reads back exactly those bytes.
func FuzzReadURL(f *testing.F) {
	for _, seed := range []string{
		"data:image/png;base64,iVBORw0KGgo=", "data:;base64,AAAA", "DATA:IMAGE/PNG;BASE64,AA==", "data:image/png,AAAA",
		"data:text/plain;base64,AAAA", "data:image/png;base64,!!!", "data:image/png;base64,-_-_", "http://x/a.png", "file:///etc/passwd", "",
	} {
		f.Add(seed, []byte("\x89PNG"))
	}
	s := &Server{}
	src := source{param: "messages", name: "image 0", kinds: "images", example: "data:image/png;base64,...",
		accepts: func(mt string) bool { return strings.HasPrefix(mt, "image/") }, types: "image/*"}
	f.Fuzz(func(t *testing.T, url string, payload []byte) {
		data, e := s.readURL(src, url)
		if e != nil && (e.status != 400 || e.msg == "" || e.param != "messages") {
			t.Fatalf("%q: status %d, param %q, message %q", url, e.status, e.param, e.msg)
		}
		if e == nil && !strings.HasPrefix(strings.ToLower(url), "data:") {
			t.Fatalf("%q: read %d bytes from a URL that is not a data URL", url, len(data))
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			u := "data:image/png;base64," + enc.EncodeToString(payload)
			got, e := s.readURL(src, u)
			if e != nil || string(got) != string(payload) {
				t.Fatalf("%q read %q (%v), want %q", u, got, e, payload)
			}
		}
	})
}

// FuzzOCR sends arbitrary bodies to /v1/ocr: every answer is a 200 with pages or an OpenAI
// error object, never a 500.
func FuzzOCR(f *testing.F) {
	for _, seed := range []string{
		`{"model":"tiny","document":{"type":"image_url","image_url":"data:image/png;base64,AAAA"}}`,
		`{"model":"tiny","document":{"type":"document_url","document_url":"data:application/pdf;base64,JVBERi0xLjQK"}}`,
		`{"document":{"type":"document_url"}}`, `{"document":{"type":"image_url","image_url":{"url":"x"}},"pages":[-1]}`,
		`{"document":{"type":"image_url","image_url":"data:image/png;base64,AAAA"},"pages":[]}`, `{"document":null}`,
		`{"document":{"type":"file","file_id":"x"},"include_image_base64":true}`, `null`, `[]`, `"x"`, `{`,
	} {
		f.Add(seed)
	}
	s := ocrServer(f, nil)
	f.Fuzz(func(t *testing.T, body string) { answers(t, s, "/v1/ocr", body, "pages") })
}
