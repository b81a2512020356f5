package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tfc/runtime/image"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/pdf"
	"tfc/runtime/pdf/pdftest"
)

var testOCR = &model.OCR{Prompt: "Read all the text in this image.", DPI: 200, Tasks: []model.OCRTask{
	{Name: "text", Prompt: "Read all the text in this image."}, {Name: "table", Prompt: "Table Recognition:"}}}

// ocrServer serves the fake with an OCR prompt, chats defaulting to what the context leaves, as
// a page does.
func ocrServer(t testing.TB, mod func(*Config)) *ts {
	return start(t, func(c *Config, l *lanes.Config) {
		c.OCR, c.MaxTokens = testOCR, l.Context
		if mod != nil {
			mod(c)
		}
	})
}

func pdfURL(data []byte) string {
	return "data:application/pdf;base64," + base64.StdEncoding.EncodeToString(data)
}

func ocrBody(doc map[string]any, extra string) string {
	b, _ := json.Marshal(map[string]any{"model": "tiny", "document": doc})
	if extra != "" {
		return strings.TrimSuffix(string(b), "}") + "," + extra + "}"
	}
	return string(b)
}

// renderedPNG is page i of a PDF as /v1/ocr renders it, encoded as a chat request would carry it.
func renderedPNG(t *testing.T, data []byte, i, dpi int) []byte {
	t.Helper()
	b, err := pdf.PagePNG(context.Background(), data, i, dpi)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// chatText is the reply to a chat of one image and the OCR prompt.
func (s *ts) chatText(t *testing.T, image []byte) string {
	return s.chatPrompt(t, image, testOCR.Prompt)
}

// chatPrompt is the reply to a chat of one image and a prompt.
func (s *ts) chatPrompt(t *testing.T, image []byte, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(image)}},
		map[string]any{"type": "text", "text": prompt}}}}})
	st, _, m := s.post(t, "/v1/chat/completions", string(body))
	if st != 200 {
		t.Fatalf("chat: %d %v", st, m)
	}
	return m["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
}

// TestOCRMatchesChat is issue 19's done-when on the server: each page of a two-page PDF reads as a
// chat request carrying that page, rendered, with the same prompt.
func TestOCRMatchesChat(t *testing.T) {
	s := ocrServer(t, nil)
	doc := pdftest.TwoPages()
	st, _, m := s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "document_url", "document_url": pdfURL(doc)}, ""))
	if st != 200 {
		t.Fatalf("%d %v", st, m)
	}
	var resp OCRResponse
	b, _ := json.Marshal(m)
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatal(err)
	}
	if s.fake.Stats().Mixed == 0 {
		t.Error("no round held rows of both pages; a document's pages should decode together")
	}
	if len(resp.Pages) != 2 || resp.Model != "tiny" || resp.UsageInfo != (OCRUsageInfo{PagesProcessed: 2, DocSizeBytes: len(doc), DocPages: 2}) {
		t.Fatalf("reply %+v", resp)
	}
	cfg := s.fe.Image
	h, w, err := image.SmartResize(300, 400, cfg.Factor(), cfg.MinPixels, cfg.MaxPixels)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range resp.Pages {
		if p.Index != i || p.Dimensions != (OCRDimensions{DPI: 200, Width: 400, Height: 300}) || p.Images == nil || len(p.Images) != 0 || p.ImageBase64 != "" {
			t.Errorf("page %d: %+v", i, p)
		}
		if p.ModelDimensions != (OCRSize{Width: w, Height: h}) {
			t.Errorf("page %d: model_dimensions %+v; the processor resizes 400x300 to %dx%d", i, p.ModelDimensions, w, h)
		}
		if p.Markdown == "" {
			t.Errorf("page %d: no text", i)
		}
		if want := s.chatText(t, renderedPNG(t, doc, i, 200)); p.Markdown != want {
			t.Errorf("page %d reads %q; the chat with its rendering reads %q", i, p.Markdown, want)
		}
	}
	if resp.Pages[0].Markdown == resp.Pages[1].Markdown {
		t.Error("both pages read the same; the fake's text follows the pixels")
	}

	// one page asked for with its image, and an image as the document
	st, _, m = s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "document_url", "document_url": pdfURL(doc)}, `"pages":[1],"include_image_base64":true`))
	if st != 200 {
		t.Fatalf("%d %v", st, m)
	}
	pages := m["pages"].([]any)
	if len(pages) != 1 || pages[0].(map[string]any)["index"] != 1.0 || pages[0].(map[string]any)["markdown"] != resp.Pages[1].Markdown {
		t.Errorf("pages [1]: %v", m)
	}
	rendered, ok := strings.CutPrefix(fmt.Sprint(pages[0].(map[string]any)["image_base64"]), "data:image/png;base64,")
	png, err := base64.StdEncoding.DecodeString(rendered)
	if !ok || err != nil {
		t.Fatalf("page 1's image_base64 is not a PNG data URL: %v", err)
	}
	if got := s.chatText(t, png); got != resp.Pages[1].Markdown {
		t.Errorf("page 1's image_base64 reads %q; the page reads %q", got, resp.Pages[1].Markdown)
	}
	img, err := os.ReadFile(filepath.Join(tinyDir, "oracle/images/a.png"))
	if err != nil {
		t.Fatal(err)
	}
	st, _, m = s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "image_url", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}, `"include_image_base64":true`))
	if st != 200 {
		t.Fatalf("%d %v", st, m)
	}
	p := m["pages"].([]any)[0].(map[string]any)
	if want := s.chatText(t, img); p["markdown"] != want || p["dimensions"].(map[string]any)["dpi"] != 0.0 {
		t.Errorf("image page %v; the chat reads %q", p, want)
	}
	if p["image_base64"] != "data:image/png;base64,"+base64.StdEncoding.EncodeToString(img) {
		t.Error("the image page's image_base64 is not the image sent")
	}
}

// TestOCRTasks checks that a request's task picks the family's labelled prompt and its prompt
// replaces it: each page reads as the chat with that text.
func TestOCRTasks(t *testing.T) {
	s := ocrServer(t, nil)
	img, err := os.ReadFile(filepath.Join(tinyDir, "oracle/images/a.png"))
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]any{"type": "image_url", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}
	seen := map[string]string{}
	for _, c := range []struct{ extra, prompt string }{
		{"", testOCR.Prompt},
		{`"task":"text"`, testOCR.Prompt},
		{`"task":"table"`, "Table Recognition:"},
		{`"prompt":"Formula Recognition:"`, "Formula Recognition:"},
	} {
		st, _, m := s.post(t, "/v1/ocr", ocrBody(doc, c.extra))
		if st != 200 {
			t.Fatalf("%s: %d %v", c.extra, st, m)
		}
		got := m["pages"].([]any)[0].(map[string]any)["markdown"].(string)
		if want := s.chatPrompt(t, img, c.prompt); got != want {
			t.Errorf("%s reads %q; the chat with %q reads %q", c.extra, got, c.prompt, want)
		}
		seen[c.prompt] = got
	}
	if len(seen) != 3 || seen["Table Recognition:"] == seen[testOCR.Prompt] {
		t.Errorf("the prompts read alike (%v); the fake's text follows the prompt", seen)
	}
}

// TestOCRRefusals checks each document and request /v1/ocr refuses, before any page runs.
func TestOCRRefusals(t *testing.T) {
	s := ocrServer(t, nil)
	none := ocrServer(t, func(c *Config) { c.OCR = nil })
	untasked := ocrServer(t, func(c *Config) { c.OCR = &model.OCR{Prompt: "Read.", DPI: 200} })
	two := pdftest.TwoPages()
	many := make([]pdftest.Page, 2000)
	for i := range many {
		many[i] = pdftest.Page{Width: 72, Height: 72}
	}
	img, err := os.ReadFile(filepath.Join(tinyDir, "oracle/images/a.png"))
	if err != nil {
		t.Fatal(err)
	}
	docURL := func(data []byte) map[string]any {
		return map[string]any{"type": "document_url", "document_url": pdfURL(data)}
	}
	for _, c := range []struct {
		name  string
		srv   *ts
		body  string
		param string
		msg   string
	}{
		{"encrypted", s, ocrBody(docURL(pdftest.Write([]pdftest.Page{{Width: 72, Height: 72}}, pdftest.Options{Encrypt: true})), ""), "document", "the PDF is encrypted and needs a password"},
		{"truncated", s, ocrBody(docURL(two[:len(two)/3]), ""), "document", "not a readable PDF (damaged or truncated)"},
		{"no pages", s, ocrBody(docURL(pdftest.Write(nil, pdftest.Options{})), ""), "document", "the PDF has no pages"},
		{"2000 pages", s, ocrBody(docURL(pdftest.Write(many, pdftest.Options{})), ""), "document", "the PDF has 2000 pages, over this server's limit of 1000 pages"},
		{"page out of range", s, ocrBody(docURL(two), `"pages":[0,2]`), "pages", "pages[1] is 2; the document has 2 page(s), indexed from 0 to 1"},
		{"negative page", s, ocrBody(docURL(two), `"pages":[-1]`), "pages", "pages[0] is -1"},
		{"page twice", s, ocrBody(docURL(two), `"pages":[1,1]`), "pages", "pages[1] asks for page 1 a second time"},
		{"no page", s, ocrBody(docURL(two), `"pages":[]`), "pages", "pages is empty"},
		{"image page 1", s, ocrBody(map[string]any{"type": "image_url", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)}, `"pages":[1]`), "pages", "the document has 1 page(s)"},
		{"pages not ints", s, ocrBody(docURL(two), `"pages":"0-1"`), "pages", "pages must be an array"},
		{"no document", s, `{"model":"tiny"}`, "document", "document is required"},
		{"bad type", s, ocrBody(map[string]any{"type": "file", "file": "x"}, ""), "document", `document.type is "file"`},
		{"no URL", s, ocrBody(map[string]any{"type": "document_url"}, ""), "document", "document.document_url is missing"},
		{"http URL", s, ocrBody(map[string]any{"type": "document_url", "document_url": "https://example.com/a.pdf"}, ""), "document", "does not fetch documents (start it with --allow-image-urls)"},
		{"text media type", s, ocrBody(map[string]any{"type": "document_url", "document_url": "data:text/plain;base64,aGk="}, ""), "document", `media type "text/plain"`},
		{"not an image", s, ocrBody(map[string]any{"type": "image_url", "image_url": "data:image/png;base64,aGVsbG8="}, ""), "document", "neither a PDF nor a PNG, JPEG or WebP image"},
		{"broken PNG", s, ocrBody(map[string]any{"type": "image_url", "image_url": "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nbroken"))}, ""), "document", "page 0: the page's image"},
		{"image_limit", s, ocrBody(docURL(two), `"image_limit":3`), "image_limit", "does not cut pictures out"},
		{"annotations", s, ocrBody(docURL(two), `"document_annotation_format":{"type":"json_schema"}`), "document_annotation_format", "not supported"},
		{"unknown task", s, ocrBody(docURL(two), `"task":"formula"`), "task", `unknown task "formula"; this model's family reads pages with: text, table`},
		{"task and prompt", s, ocrBody(docURL(two), `"task":"table","prompt":"Read."`), "prompt", "prompt and task both set"},
		{"no tasks", untasked, ocrBody(docURL(two), `"task":"table"`), "task", "names no OCR tasks"},
		{"task not a string", s, ocrBody(docURL(two), `"task":3`), "task", ""},
		{"no OCR prompt", none, ocrBody(docURL(two), ""), "", "names no OCR prompt"},
	} {
		st, _, m := c.srv.post(t, "/v1/ocr", c.body)
		e, _ := m["error"].(map[string]any)
		param, _ := e["param"].(string)
		if st != 400 || e == nil || param != c.param || !strings.Contains(fmt.Sprint(e["message"]), c.msg) {
			t.Errorf("%s: %d %v; want 400 on %q saying %q", c.name, st, m, c.param, c.msg)
		}
	}
	if st, _, m := s.post(t, "/v1/ocr", `{"model":"other","document":{"type":"document_url","document_url":"x"}}`); st != 404 {
		t.Errorf("another model: %d %v", st, m)
	}
	if got := s.fake.Stats().Rounds; got != 0 {
		t.Errorf("the refusals ran %d rounds", got)
	}
}

// TestOCRPageLimit checks --max-pages.
func TestOCRPageLimit(t *testing.T) {
	s := ocrServer(t, func(c *Config) { c.MaxPages = 1 })
	st, _, m := s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "document_url", "document_url": pdfURL(pdftest.TwoPages())}, ""))
	if st != 400 || !strings.Contains(fmt.Sprint(m), "the PDF has 2 pages, over this server's limit of 1 pages") {
		t.Errorf("%d %v", st, m)
	}
}

// TestOCRFetchesURL reads a PDF named by an http URL when the server fetches URLs.
func TestOCRFetchesURL(t *testing.T) {
	doc := pdftest.TwoPages()
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/two.pdf" {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	defer files.Close()
	s := ocrServer(t, func(c *Config) { c.FetchImages = true })
	st, _, m := s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "document_url", "document_url": files.URL + "/two.pdf"}, `"pages":[1]`))
	if u, _ := m["usage_info"].(map[string]any); st != 200 || len(m["pages"].([]any)) != 1 || u["doc_size_bytes"] != float64(len(doc)) || u["doc_pages"] != 2.0 {
		t.Fatalf("%d %v", st, m)
	}
	st, _, m = s.post(t, "/v1/ocr", ocrBody(map[string]any{"type": "document_url", "document_url": files.URL + "/missing.pdf"}, ""))
	if st != 400 || !strings.Contains(fmt.Sprint(m), "the document could not be fetched") {
		t.Errorf("missing URL: %d %v", st, m)
	}
}
