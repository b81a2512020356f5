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

	"tfc/gen/registry"
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

// TestEveryFamilyOCRPrompts serves each family's tiny checkpoint and reads a picture through
// /v1/ocr with the family's default prompt and with each of its named tasks (GLM-OCR's text, table
// and formula): each page reads as the chat request of that picture and that prompt.
func TestEveryFamilyOCRPrompts(t *testing.T) {
	for _, f := range registry.Families {
		t.Run(f.Name, func(t *testing.T) {
			fam, err := model.Pick(f.Name, nil)
			if err != nil {
				t.Fatal(err)
			}
			if fam.OCR == nil {
				t.Skipf("%s names no OCR prompt", f.Name)
			}
			dir := filepath.Join("../..", f.Fixture)
			img, err := os.ReadFile(filepath.Join(dir, "oracle/images/a.png"))
			if err != nil {
				t.Fatal(err)
			}
			srv, closeServer, err := server.Open(server.Options{Dir: dir, Parallel: 2, Context: 512, MaxTokens: 512,
				Backend: func() (device.Backend, error) { return cpu.New(), nil }, Log: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			defer closeServer()
			hs := httptest.NewServer(srv)
			defer hs.Close()
			asks := []model.OCRTask{{Prompt: fam.OCR.Prompt}}
			asks = append(asks, fam.OCR.Tasks...)
			read := map[string]bool{}
			for _, ask := range asks {
				body, _ := json.Marshal(server.OCRRequest{Task: ask.Name, Document: &server.OCRDocument{Type: "image_url",
					ImageURL: json.RawMessage(fmt.Sprintf("%q", "data:image/png;base64,"+base64.StdEncoding.EncodeToString(img)))}})
				resp, err := http.Post(hs.URL+"/v1/ocr", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				var r server.OCRResponse
				err = json.NewDecoder(resp.Body).Decode(&r)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || len(r.Pages) != 1 {
					t.Fatalf("task %q: %d %v %+v", ask.Name, resp.StatusCode, err, r)
				}
				if want := chatReply(t, hs.URL, img, ask.Prompt); r.Pages[0].Markdown != want {
					t.Errorf("task %q (%q) reads %q; the chat with that prompt reads %q", ask.Name, ask.Prompt, r.Pages[0].Markdown, want)
				}
				read[r.Pages[0].Markdown] = true
			}
			if len(fam.OCR.Tasks) > 1 && len(read) < 2 {
				t.Errorf("the %d prompts all read the same; a task should change the prompt", len(asks))
			}
			t.Logf("%d prompts read as their chats, %d texts", len(asks), len(read))
		})
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
	content := []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}}}
	if text != "" { // an empty OCR prompt sends the page alone
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": content}}})
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
