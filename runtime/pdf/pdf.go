// Package pdf opens PDF documents and renders their pages to images with PDFium compiled to
// WebAssembly and run by wazero (github.com/klippa-app/go-pdfium), so the binary needs no cgo.
// The module is compiled once, on first use, and its instances are shared by every document of
// the process; an instance sees no file system and writes nowhere.
package pdf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/klippa-app/go-pdfium"
	pdferrors "github.com/klippa-app/go-pdfium/errors"
	"github.com/klippa-app/go-pdfium/references"
	"github.com/klippa-app/go-pdfium/requests"
	"github.com/klippa-app/go-pdfium/webassembly"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// Instances is the most PDFium instances open at once: as many documents are read in parallel,
// the others wait for one.
const Instances = 4

// MaxPixels bounds a rendered page: a page that would pass it at the requested DPI is rendered at
// the largest DPI that keeps it within (an A1 sheet at 200 DPI is 31 million pixels).
const MaxPixels = 25_000_000

var shared struct {
	once    sync.Once
	pool    pdfium.Pool
	err     error
	started time.Duration
}

// pool starts PDFium on first use: the WebAssembly module compiled, no instance yet.
func pool() (pdfium.Pool, error) {
	shared.once.Do(func() {
		t0 := time.Now()
		// as go-pdfium's default runtime (its module needs exception handling), calls that a stopped
		// instance interrupts, and the compiled module kept on disk so a later process starts in
		// milliseconds, not seconds
		rc := wazero.NewRuntimeConfig().WithCoreFeatures(api.CoreFeaturesV2 | experimental.CoreFeaturesExceptionHandling).
			WithCloseOnContextDone(true) // so that stopping an instance interrupts a call in progress
		if dir, err := os.UserCacheDir(); err == nil {
			if cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(dir, "tfc", "wazero")); err == nil {
				rc = rc.WithCompilationCache(cache)
			}
		}
		shared.pool, shared.err = webassembly.Init(webassembly.Config{
			MaxTotal: Instances, MaxIdle: 0,
			FSConfig:      wazero.NewFSConfig(), // no directory mounted: documents come as bytes
			RuntimeConfig: rc,
			Stdout:        io.Discard, Stderr: io.Discard,
		})
		shared.started = time.Since(t0)
		if shared.err != nil {
			shared.err = fmt.Errorf("starting PDFium: %w", shared.err)
		}
	})
	return shared.pool, shared.err
}

// StartTime is how long compiling PDFium's module took on first use; 0 before it.
func StartTime() time.Duration {
	if _, err := pool(); err != nil {
		return 0
	}
	return shared.started
}

// Error is a document PDFium cannot read, or one of its pages; Page is -1 for the whole file.
type Error struct {
	Page int
	Msg  string
}

func (e *Error) Error() string {
	if e.Page >= 0 {
		return fmt.Sprintf("page %d: %s", e.Page, e.Msg)
	}
	return e.Msg
}

// Document is an open PDF. Its calls hold mu: a rendering's pixels live in the instance's memory,
// which another call may grow and move, until they are copied out and cleaned up.
type Document struct {
	mu      sync.Mutex
	inst    pdfium.Pdfium
	doc     references.FPDF_DOCUMENT
	ctx     context.Context // Open's: when it ends, a call in progress is stopped
	killed  bool
	Pages   int           // the page count
	Bytes   int           // the file's size
	Timeout time.Duration // how long one call (opening, a page's check or drawing) may take; Timeout when 0
}

// Timeout is how long opening a PDF or drawing one page may take by default: a real document
// takes well under a second.
const Timeout = 60 * time.Second

// Open reads a PDF held in memory, waiting for a free instance under ctx. It refuses an encrypted
// file, a damaged one, one with no pages and one with more than maxPages.
func Open(ctx context.Context, data []byte, maxPages int) (*Document, error) {
	p, err := pool()
	if err != nil {
		return nil, err
	}
	inst, err := p.GetInstanceWithContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("waiting for a PDF renderer: %w", err)
	}
	d := &Document{inst: inst, ctx: ctx, Bytes: len(data)}
	opened := false
	err = d.bounded(-1, func() error { // d's fields are read only once the call has returned
		od, err := inst.OpenDocument(&requests.OpenDocument{File: &data})
		if err != nil {
			return &Error{Page: -1, Msg: openMessage(err)}
		}
		d.doc, opened = od.Document, true
		pc, err := inst.FPDF_GetPageCount(&requests.FPDF_GetPageCount{Document: od.Document})
		if err != nil {
			return &Error{Page: -1, Msg: "the PDF's page count cannot be read: " + err.Error()}
		}
		d.Pages = pc.PageCount
		return nil
	})
	switch {
	case err != nil && d.killed: // the instance went back to the pool when it was stopped
		return nil, err
	case err != nil && !opened:
		inst.Close()
		return nil, err
	case err != nil:
		d.Close()
		return nil, err
	case d.Pages == 0:
		d.Close()
		return nil, &Error{Page: -1, Msg: "the PDF has no pages"}
	case d.Pages > maxPages:
		d.Close()
		return nil, &Error{Page: -1, Msg: fmt.Sprintf("the PDF has %d pages, over this server's limit of %d pages a document; split it", d.Pages, maxPages)}
	}
	return d, nil
}

// openMessage says why PDFium refused a file.
func openMessage(err error) string {
	switch {
	case errors.Is(err, pdferrors.ErrPassword):
		return "the PDF is encrypted and needs a password; send it decrypted"
	case errors.Is(err, pdferrors.ErrSecurity):
		return "the PDF's encryption is not supported; send it decrypted"
	case errors.Is(err, pdferrors.ErrFormat), errors.Is(err, pdferrors.ErrFile):
		return "the file is not a readable PDF (damaged or truncated)"
	}
	return "the PDF cannot be opened: " + err.Error()
}

// Check loads page i and lets it go, so that a damaged page is refused before any is rendered.
func (d *Document) Check(i int) error {
	return d.bounded(i, func() error {
		lp, err := d.inst.FPDF_LoadPage(&requests.FPDF_LoadPage{Document: d.doc, Index: i})
		if err != nil {
			return &Error{Page: i, Msg: "the page cannot be read (the PDF is damaged or truncated)"}
		}
		d.inst.FPDF_ClosePage(&requests.FPDF_ClosePage{Page: lp.Page})
		return nil
	})
}

// Render draws page i on white at dpi, or at the largest DPI within MaxPixels when the page is
// larger than that, and returns the image with the DPI it was drawn at.
func (d *Document) Render(i, dpi int) (*image.RGBA, int, error) {
	var img *image.RGBA
	var drawn int
	err := d.bounded(i, func() error { // img and drawn are read only once the call has returned
		var err error
		img, drawn, err = d.render(i, dpi)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return img, drawn, nil
}

// bounded runs a call into the document's renderer within Timeout and while the context Open
// was given lasts; past either the renderer is stopped (a crafted file can make PDFium loop) and
// the document cannot be used again.
func (d *Document) bounded(i int, call func() error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed {
		return &Error{Page: i, Msg: "the document's renderer was stopped by an earlier page"}
	}
	done := make(chan error, 1)
	go func() {
		defer func() { // a call cut short by kill must not take the process down
			if r := recover(); r != nil {
				done <- &Error{Page: i, Msg: fmt.Sprintf("the renderer failed: %v", r)}
			}
		}()
		done <- call()
	}()
	limit := d.Timeout
	if limit <= 0 {
		limit = Timeout
	}
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		d.kill()
		what := "drawing the page"
		if i < 0 {
			what = "reading the PDF"
		}
		return &Error{Page: i, Msg: fmt.Sprintf("%s took longer than %v; the PDF is refused", what, limit)}
	case <-d.ctx.Done():
		d.kill()
		return context.Cause(d.ctx)
	}
}

// kill stops the renderer in the middle of a call; its instance goes back to the pool anew.
func (d *Document) kill() {
	d.killed = true
	d.inst.Kill()
}

// render is Render under the document's lock.
func (d *Document) render(i, dpi int) (*image.RGBA, int, error) {
	page := requests.Page{ByIndex: &requests.PageByIndex{Document: d.doc, Index: i}}
	size, err := d.inst.GetPageSizeInPixels(&requests.GetPageSizeInPixels{Page: page, DPI: dpi})
	if err != nil {
		return nil, 0, &Error{Page: i, Msg: "the page's size cannot be read: " + err.Error()}
	}
	if px := float64(size.Width) * float64(size.Height); px > MaxPixels {
		dpi = int(float64(dpi) * math.Sqrt(MaxPixels/px))
		if dpi < 1 {
			return nil, 0, &Error{Page: i, Msg: fmt.Sprintf("the page is %d×%d pixels at 1 DPI, over the %d-pixel limit", size.Width, size.Height, MaxPixels)}
		}
	}
	r, err := d.inst.RenderPageInDPI(&requests.RenderPageInDPI{Page: page, DPI: dpi})
	if err != nil {
		return nil, 0, &Error{Page: i, Msg: "the page cannot be rendered: " + err.Error()}
	}
	defer r.Cleanup() // the pixels live in the instance's memory until then
	src := r.Result.Image
	if src == nil || src.Rect.Dx() == 0 || src.Rect.Dy() == 0 {
		return nil, 0, &Error{Page: i, Msg: "the page renders to an empty image"}
	}
	return onWhite(src, r.Result.HasTransparency), dpi, nil
}

// EncodePNG encodes a rendered page with the fastest compression (the bytes go to an image
// decoder or a browser, not to disk).
func EncodePNG(img *image.RGBA) ([]byte, error) {
	var buf bytes.Buffer
	err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img)
	return buf.Bytes(), err
}

// PagePNG opens data, renders page i at dpi as a PNG and closes it: one page as a chat request
// would carry it (its pixels are those /v1/ocr reads).
func PagePNG(ctx context.Context, data []byte, i, dpi int) ([]byte, error) {
	d, err := Open(ctx, data, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	img, _, err := d.Render(i, dpi)
	if err != nil {
		return nil, err
	}
	return EncodePNG(img)
}

// onWhite copies a rendered page out of the instance's memory; a page with transparency, which
// PDFium leaves on a transparent background, is composited over white as a PDF viewer shows it.
func onWhite(src *image.RGBA, transparent bool) *image.RGBA {
	b := src.Rect
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	for y := 0; y < b.Dy(); y++ {
		s := src.Pix[y*src.Stride : y*src.Stride+4*b.Dx()]
		o := out.Pix[y*out.Stride : y*out.Stride+4*b.Dx()]
		if !transparent {
			copy(o, s)
			continue
		}
		for x := 0; x < len(s); x += 4 {
			a := uint32(s[x+3])
			for c := range 3 { // PDFium's bitmaps are not premultiplied
				o[x+c] = uint8((uint32(s[x+c])*a + 255*(255-a) + 127) / 255)
			}
			o[x+3] = 255
		}
	}
	return out
}

// Close frees the document and hands its instance back.
func (d *Document) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.killed { // the instance went back to the pool when it was stopped
		return
	}
	d.inst.FPDF_CloseDocument(&requests.FPDF_CloseDocument{Document: d.doc})
	d.inst.Close()
}
