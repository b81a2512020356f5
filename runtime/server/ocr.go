package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	stdimage "image"
	"net/http"
	"strings"
	"sync"
	"time"

	"tfc/runtime/chattemplate"
	"tfc/runtime/engine"
	"tfc/runtime/image"
	"tfc/runtime/pdf"
)

// DefaultMaxPages is the most pages a document sent to /v1/ocr may have (tfc serve --max-pages).
const DefaultMaxPages = 1000

// OCRRequest is a POST /v1/ocr body, in the shape of Mistral's OCR API.
type OCRRequest struct {
	Model              string       `json:"model"`
	Document           *OCRDocument `json:"document"`
	Pages              []int        `json:"pages,omitempty"`                // 0-based page indices; every page when absent
	IncludeImageBase64 bool         `json:"include_image_base64,omitempty"` // adds each page's image_base64 (pictures are not cut out)
	// Task (tfc) picks one of the family's labelled prompts (GLM-OCR: text, table, formula);
	// Prompt (tfc) is the text sent with each page instead. Neither: the family's first prompt.
	Task   string  `json:"task,omitempty"`
	Prompt *string `json:"prompt,omitempty"`
	// Mistral's fields this server does not compute: refused by name when set
	ImageLimit               *int            `json:"image_limit,omitempty"`
	ImageMinSize             *int            `json:"image_min_size,omitempty"`
	BboxAnnotationFormat     json.RawMessage `json:"bbox_annotation_format,omitempty"`
	DocumentAnnotationFormat json.RawMessage `json:"document_annotation_format,omitempty"`
}

// OCRDocument is a PDF or an image: {"type": "document_url", "document_url": URL} or
// {"type": "image_url", "image_url": URL or {"url": URL}}; URL is a data URL, or http(s) when the
// server fetches URLs.
type OCRDocument struct {
	Type         string          `json:"type"`
	DocumentURL  json.RawMessage `json:"document_url,omitempty"`
	ImageURL     json.RawMessage `json:"image_url,omitempty"`
	DocumentName string          `json:"document_name,omitempty"`
}

// OCRResponse is /v1/ocr's reply.
type OCRResponse struct {
	Pages     []OCRPage    `json:"pages"`
	Model     string       `json:"model"`
	UsageInfo OCRUsageInfo `json:"usage_info"`
}

// OCRPage is one page's text.
type OCRPage struct {
	Index      int            `json:"index"`
	Markdown   string         `json:"markdown"`
	Images     []any          `json:"images"` // always empty: the pictures of a page are not cut out
	Dimensions OCRDimensions  `json:"dimensions"`
	Finish     string         `json:"finish_reason"`         // stop, or length when the context ran out
	Usage      map[string]any `json:"usage,omitempty"`       // the page's prompt and output tokens
	StopReason string         `json:"stop_reason,omitempty"` // repetition when a loop was stopped
	// ModelDimensions (tfc) is the image the model read, after its processor's resize: the
	// coordinates of the boxes a layout prompt's answer gives.
	ModelDimensions OCRSize `json:"model_dimensions"`
	// ImageBase64 (tfc) is the page's image as a data URL, when include_image_base64 is set.
	ImageBase64 string `json:"image_base64,omitempty"`
}

// OCRSize is an image's size in pixels.
type OCRSize struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// OCRDimensions is the image a page was read from: a PDF page's rendering at DPI, or an image as
// sent (DPI 0: an image's resolution is not known).
type OCRDimensions struct {
	DPI    int `json:"dpi"`
	Height int `json:"height"`
	Width  int `json:"width"`
}

// OCRUsageInfo counts what the request read.
type OCRUsageInfo struct {
	PagesProcessed int `json:"pages_processed"`
	DocSizeBytes   int `json:"doc_size_bytes"`
	DocPages       int `json:"doc_pages"` // tfc: the pages the document has (1 for an image)
}

// page is one page to read: its index and how its image is made.
type page struct {
	index int
	image func() (pageImage, OCRDimensions, *apiError)
}

// pageImage is a page's image: the document's own file, or a rendered page's pixels (read
// without a PNG round trip: the same pixels a chat request carrying its PNG gives).
type pageImage struct {
	file []byte
	pic  *image.RGB
	png  func() ([]byte, error) // the rendered page as a PNG, for include_image_base64
}

// ocr answers POST /v1/ocr: each page of the document is a chat request with the family's OCR
// prompt on the shared lanes, at most --parallel of a document at once.
func (s *Server) ocr(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError {
	var req OCRRequest
	if e := decode(body, &req); e != nil {
		return e
	}
	resp, e := s.readDocument(r.Context(), ld, &req)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

// readDocument reads the pages of a document asked for.
func (s *Server) readDocument(ctx context.Context, ld *loaded, req *OCRRequest) (*OCRResponse, *apiError) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	if s.cfg.OCR == nil {
		return nil, badRequest("", "this model's family names no OCR prompt (ocr_prompt in its graph), so /v1/ocr cannot read pages with it; send chat requests with the prompt of your choice")
	}
	if e := ocrUnsupported(req); e != nil {
		return nil, e
	}
	prompt, e := s.ocrPrompt(req)
	if e != nil {
		return nil, e
	}
	data, e := s.document(req.Document)
	if e != nil {
		return nil, e
	}
	pages, count, closeDoc, e := s.pages(ctx, data, req.Pages)
	if e != nil {
		return nil, e
	}
	defer closeDoc()
	set, e := s.settings(&genFields{})
	if e != nil {
		return nil, e
	}
	content := []map[string]any{{"type": "image"}}
	if prompt != "" { // an empty prompt sends the page alone, as some model cards ask
		content = append(content, map[string]any{"type": "text", "text": prompt})
	}
	conv, err := json.Marshal([]map[string]any{{"role": "user", "content": content}})
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]OCRPage, len(pages))
	var (
		mu    sync.Mutex
		first *apiError
		wg    sync.WaitGroup
	)
	slots := make(chan struct{}, ld.lanes.Config().Parallel) // a document takes at most --parallel lanes
	for i, pg := range pages {
		slots <- struct{}{}
		if ctx.Err() != nil {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			res, e := s.readPage(ctx, ld, conv, set, pg, req.IncludeImageBase64)
			mu.Lock()
			defer mu.Unlock()
			if e != nil {
				if first == nil {
					first = e
					cancel()
				}
				return
			}
			out[i] = res
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, &apiError{status: statusClientClosed, typ: "client_closed", msg: "the client closed the connection before the reply"}
	}
	return &OCRResponse{Pages: out, Model: s.cfg.Name, UsageInfo: OCRUsageInfo{PagesProcessed: len(out), DocSizeBytes: len(data), DocPages: count}}, nil
}

// ocrPrompt is the text a request's pages are sent with: its prompt, its task's, or the family's.
func (s *Server) ocrPrompt(req *OCRRequest) (string, *apiError) {
	switch {
	case req.Prompt != nil && req.Task != "":
		return "", badRequest("prompt", "prompt and task both set; send one: task picks one of the family's prompts, prompt replaces it")
	case req.Prompt != nil:
		return *req.Prompt, nil
	case req.Task == "":
		return s.cfg.OCR.Prompt, nil
	}
	if p, ok := s.cfg.OCR.Task(req.Task); ok {
		return p, nil
	}
	if len(s.cfg.OCR.Tasks) == 0 {
		return "", badRequest("task", "task %q: this model's family names no OCR tasks; leave task out, or send the text with prompt", req.Task)
	}
	names := make([]string, len(s.cfg.OCR.Tasks))
	for i, t := range s.cfg.OCR.Tasks {
		names[i] = t.Name
	}
	return "", badRequest("task", "unknown task %q; this model's family reads pages with: %s", req.Task, strings.Join(names, ", "))
}

// ocrUnsupported refuses Mistral's fields this server does not compute, when set.
func ocrUnsupported(req *OCRRequest) *apiError {
	set := func(raw json.RawMessage) bool { r := string(bytes.TrimSpace(raw)); return r != "" && r != "null" }
	switch {
	case req.ImageLimit != nil:
		return badRequest("image_limit", "image_limit: this server does not cut pictures out of pages; leave image_limit out")
	case req.ImageMinSize != nil:
		return badRequest("image_min_size", "image_min_size: this server does not cut pictures out of pages; leave image_min_size out")
	case set(req.BboxAnnotationFormat):
		return badRequest("bbox_annotation_format", "bbox_annotation_format: annotations are not supported; leave it out")
	case set(req.DocumentAnnotationFormat):
		return badRequest("document_annotation_format", "document_annotation_format: annotations are not supported; leave it out")
	}
	return nil
}

// document reads the document's bytes from its URL.
func (s *Server) document(d *OCRDocument) ([]byte, *apiError) {
	if d == nil {
		return nil, badRequest("document", `document is required: {"type": "document_url", "document_url": "data:application/pdf;base64,..."} or {"type": "image_url", "image_url": "data:image/png;base64,..."}`)
	}
	var raw json.RawMessage
	src := source{param: "document", name: "the document", kinds: "documents"}
	switch d.Type {
	case "document_url":
		raw = d.DocumentURL
		src.example = "data:application/pdf;base64,..."
		src.accepts = func(mt string) bool { return mt == "application/pdf" || strings.HasPrefix(mt, "image/") }
		src.types = "an application/pdf data URL (or an image's)"
	case "image_url":
		raw = d.ImageURL
		src.example = "data:image/png;base64,..."
		src.accepts = func(mt string) bool { return strings.HasPrefix(mt, "image/") }
		src.types = "an image/png, image/jpeg or image/webp data URL"
	default:
		return nil, badRequest("document", "document.type is %q; use document_url (a PDF) or image_url (an image)", d.Type)
	}
	url, ok := urlOf(raw)
	if !ok {
		return nil, badRequest("document", "document.%s is missing: a data URL such as %s", d.Type, src.example)
	}
	data, e := s.readURL(src, url)
	if e != nil {
		return nil, e
	}
	if len(data) == 0 {
		return nil, badRequest("document", "the document is empty")
	}
	return data, nil
}

// isPDF is true for bytes whose first kilobyte holds the PDF header, where PDF readers look for it.
func isPDF(data []byte) bool {
	return bytes.Contains(data[:min(len(data), 1024)], []byte("%PDF-"))
}

// pages checks the document and the pages asked for, before any is run: a PDF is opened and each
// page asked for loaded; an image is one page. It returns the pages asked for, the document's
// page count and a func that lets the document go.
func (s *Server) pages(ctx context.Context, data []byte, want []int) ([]page, int, func(), *apiError) {
	count := 1
	var doc *pdf.Document
	if isPDF(data) {
		var err error
		doc, err = pdf.Open(ctx, data, s.cfg.MaxPages)
		if err != nil {
			if pe := (*pdf.Error)(nil); errors.As(err, &pe) {
				return nil, 0, nil, badRequest("document", "%v", err)
			}
			return nil, 0, nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", msg: err.Error()}
		}
		count = doc.Pages
	} else if image.Sniff(data) == "" {
		return nil, 0, nil, badRequest("document", "the document is neither a PDF nor a PNG, JPEG or WebP image")
	}
	release := func() {
		if doc != nil {
			doc.Close()
		}
	}
	indices := want
	if indices == nil {
		indices = make([]int, count)
		for i := range indices {
			indices[i] = i
		}
	}
	seen := map[int]bool{}
	for k, i := range indices {
		switch {
		case i < 0 || i >= count:
			release()
			return nil, 0, nil, badRequest("pages", "pages[%d] is %d; the document has %d page(s), indexed from 0 to %d", k, i, count, count-1)
		case seen[i]:
			release()
			return nil, 0, nil, badRequest("pages", "pages[%d] asks for page %d a second time", k, i)
		}
		seen[i] = true
		if doc != nil {
			if err := doc.Check(i); err != nil {
				release()
				return nil, 0, nil, badRequest("document", "%v", err)
			}
		}
	}
	if len(indices) == 0 {
		release()
		return nil, 0, nil, badRequest("pages", "pages is empty; leave it out to read every page")
	}
	out := make([]page, len(indices))
	for k, i := range indices {
		out[k] = page{index: i, image: func() (pageImage, OCRDimensions, *apiError) {
			if doc == nil {
				return pageImage{file: data}, imageDimensions(data), nil
			}
			return s.renderPage(doc, i)
		}}
	}
	return out, count, release, nil
}

// imageDimensions is an image's size as its header gives it; zero when it has none (the image
// decoder then says why).
func imageDimensions(data []byte) OCRDimensions {
	c, _, err := stdimage.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return OCRDimensions{}
	}
	return OCRDimensions{Width: c.Width, Height: c.Height}
}

// renderPage draws a PDF page at the family's DPI.
func (s *Server) renderPage(doc *pdf.Document, i int) (pageImage, OCRDimensions, *apiError) {
	img, dpi, err := doc.Render(i, s.cfg.OCR.DPI)
	if err != nil {
		return pageImage{}, OCRDimensions{}, badRequest("document", "%v", err)
	}
	dims := OCRDimensions{DPI: dpi, Width: img.Rect.Dx(), Height: img.Rect.Dy()}
	encode := func() ([]byte, error) { return pdf.EncodePNG(img) }
	if pic, err := image.FromRGBA(img); err == nil {
		return pageImage{pic: pic, png: encode}, dims, nil
	}
	data, err := encode() // not opaque: read as its PNG, as a chat request would carry it
	if err != nil {
		return pageImage{}, OCRDimensions{}, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: fmt.Sprintf("page %d: %v", i, err)}
	}
	return pageImage{file: data}, dims, nil
}

// readPage runs one page as a chat request of its image and the OCR prompt; withImage adds the
// image as a data URL.
func (s *Server) readPage(ctx context.Context, ld *loaded, conv []byte, set settings, pg page, withImage bool) (OCRPage, *apiError) {
	onPage := func(e *apiError) *apiError {
		e.msg = fmt.Sprintf("page %d: %s", pg.index, strings.Replace(strings.TrimPrefix(e.msg, "image 1: "), "image 1 ", "the page's image ", 1))
		if e.param == "messages" {
			e.param = "document"
		}
		return e
	}
	pi, dims, e := pg.image()
	if e != nil {
		return OCRPage{}, e
	}
	opts := chattemplate.Options{AddGenerationPrompt: true}
	var p engine.Prompt
	var keys []string
	var times engine.ImageTimes
	if pi.pic != nil {
		p, keys, times, e = s.promptPictures(ld, conv, []*image.RGB{pi.pic}, opts)
	} else {
		p, keys, times, e = s.prompt(ld, conv, [][]byte{pi.file}, opts)
	}
	if e != nil {
		return OCRPage{}, onPage(e)
	}
	j := &job{chat: true, prompt: p, imageKeys: keys, set: set, defMax: ld.lanes.Config().Context, images: times}
	start := time.Now()
	st, e := s.submit(ctx, ld, j)
	if e != nil {
		return OCRPage{}, onPage(e)
	}
	rep := s.newReply(nil, ld, j, start)
	ev, e := rep.collect(st)
	if e != nil {
		return OCRPage{}, onPage(e)
	}
	grid, patch := p.Grids[0], ld.fe.Image.PatchSize
	out := OCRPage{Index: pg.index, Markdown: rep.out.finish(), Images: []any{}, Dimensions: dims,
		Finish: ev.Finish, StopReason: ev.StopReason, Usage: rep.usage(ev.Usage),
		ModelDimensions: OCRSize{Width: grid[2] * patch, Height: grid[1] * patch}}
	if withImage {
		data := pi.file
		if data == nil {
			var err error
			if data, err = pi.png(); err != nil {
				return OCRPage{}, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: fmt.Sprintf("page %d: %v", pg.index, err)}
			}
		}
		out.ImageBase64 = "data:" + mediaType(image.Sniff(data)) + ";base64," + base64.StdEncoding.EncodeToString(data)
	}
	return out, nil
}

// mediaType is an image format's MIME type.
func mediaType(f image.Format) string {
	switch f {
	case image.PNG:
		return "image/png"
	case image.JPEG:
		return "image/jpeg"
	case image.WebP:
		return "image/webp"
	}
	return "application/octet-stream"
}
