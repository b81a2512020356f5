package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/model"
	"tfc/runtime/pdf"
	"tfc/runtime/pdf/pdftest"
	"tfc/runtime/server"
)

// TestOCRCommand is issue 19's done-when for tfc ocr on the tiny Qwen2-VL checkpoint: a two-page
// PDF read with --model (in this process) and with --url (a server over HTTP) gives, for each
// page, the text of a chat request carrying that page rendered at the family's DPI with the
// family's OCR prompt.
func TestOCRCommand(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "two.pdf")
	data := pdftest.TwoPages()
	if err := os.WriteFile(doc, data, 0o644); err != nil {
		t.Fatal(err)
	}
	local, err := runTFC(t, "ocr", doc, "--model", tinyQwen2VL, "--url", "", "--out", "", "--context", "1024", "--parallel", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, local)
	}

	srv, closeServer, err := server.Open(server.Options{Dir: tinyQwen2VL, Parallel: 2, Context: 1024, MaxTokens: 1024,
		Backend: func() (device.Backend, error) { return cpu.New(), nil }, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer closeServer()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	out := filepath.Join(dir, "md")
	if msg, err := runTFC(t, "ocr", doc, "--url", hs.URL, "--model", "", "--out", out); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	remote, err := os.ReadFile(filepath.Join(out, "two.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(remote) != local {
		t.Errorf("--url wrote\n%s\n--model printed\n%s", remote, local)
	}

	fam, err := model.Pick("qwen2_vl", nil)
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 2 {
		fmt.Fprintf(&want, "<!-- two.pdf page %d -->\n%s\n\n", i+1, chatReply(t, hs.URL, renderPage(t, data, i, fam.OCR.DPI), fam.OCR.Prompt))
	}
	if local != want.String() {
		t.Errorf("tfc ocr printed\n%q\nchat requests with the rendered pages read\n%q", local, want.String())
	}

	if msg, err := runTFC(t, "ocr", doc, "--url", hs.URL, "--model", "", "--out", "", "--pages", "2"); err == nil || !strings.Contains(err.Error(), "pages[0] is 2; the document has 2 page(s)") {
		t.Errorf("--pages 2: %v\n%s", err, msg)
	}
	if msg, err := runTFC(t, "ocr", doc, "--url", hs.URL, "--model", "", "--out", "", "--pages", "1", "--task", "table"); err == nil || !strings.Contains(err.Error(), `task "table": this model's family names no OCR tasks`) {
		t.Errorf("--task table: %v\n%s", err, msg)
	}
	ocrCmd, _, _ := root.Find([]string{"ocr"})
	t.Cleanup(func() { ocrCmd.Flags().Lookup("prompt").Changed = false })
	got, err := runTFC(t, "ocr", doc, "--url", hs.URL, "--model", "", "--out", "", "--pages", "1", "--task", "", "--prompt", "Describe the page.")
	if err != nil {
		t.Fatalf("--prompt: %v\n%s", err, got)
	}
	if want := fmt.Sprintf("<!-- two.pdf page 2 -->\n%s\n\n", chatReply(t, hs.URL, renderPage(t, data, 1, fam.OCR.DPI), "Describe the page.")); got != want {
		t.Errorf("--prompt printed %q; the chat with that prompt reads %q", got, want)
	}
}

// renderPage is page i rendered as /v1/ocr renders it, as a PNG.
func renderPage(t *testing.T, data []byte, i, dpi int) []byte {
	t.Helper()
	b, err := pdf.PagePNG(context.Background(), data, i, dpi)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chatReply is a server's reply to a chat of one image and a text.
func chatReply(t *testing.T, url string, img []byte, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}},
		map[string]any{"type": "text", "text": text}}}}})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &m); err != nil || len(m.Choices) != 1 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	return m.Choices[0].Message.Content
}
