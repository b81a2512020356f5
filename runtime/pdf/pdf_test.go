package pdf

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tfc/runtime/pdf/pdftest"
)

// TestRenderTwoPages renders a two-page document at 200 DPI: 2×1.5 inches a page is 400×300
// pixels, white with dark text.
func TestRenderTwoPages(t *testing.T) {
	t0 := time.Now()
	d, err := Open(context.Background(), pdftest.TwoPages(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	t.Logf("first open %v (compiling PDFium: %v)", time.Since(t0).Round(time.Millisecond), StartTime().Round(time.Millisecond))
	if d.Pages != 2 {
		t.Fatalf("%d pages, want 2", d.Pages)
	}
	for i := range d.Pages {
		if err := d.Check(i); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		img, dpi, err := d.Render(i, 200)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("page %d rendered in %v", i, time.Since(t1).Round(time.Microsecond))
		if dpi != 200 || img.Rect.Dx() != 400 || img.Rect.Dy() != 300 {
			t.Fatalf("page %d: %v at %d DPI, want 400×300 at 200", i, img.Rect, dpi)
		}
		white, dark := 0, 0
		for p := 0; p < len(img.Pix); p += 4 {
			switch {
			case img.Pix[p+3] != 255:
				t.Fatalf("page %d: a pixel with alpha %d", i, img.Pix[p+3])
			case img.Pix[p] == 255 && img.Pix[p+1] == 255 && img.Pix[p+2] == 255:
				white++
			case img.Pix[p] < 64:
				dark++
			}
		}
		if white < 400*300*8/10 || dark < 100 {
			t.Errorf("page %d: %d white and %d dark pixels; want a white page with text", i, white, dark)
		}
	}
}

// TestRefusals checks the message of each document PDFium is not given to render.
func TestRefusals(t *testing.T) {
	two := pdftest.TwoPages()
	many := make([]pdftest.Page, 2000)
	for i := range many {
		many[i] = pdftest.Page{Width: 72, Height: 72, Lines: []string{"x"}}
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"encrypted", pdftest.Write([]pdftest.Page{{Width: 72, Height: 72}}, pdftest.Options{Encrypt: true}), "encrypted and needs a password"},
		{"truncated", two[:len(two)/3], "not a readable PDF"},
		{"not a PDF", []byte("hello"), "not a readable PDF"},
		{"no pages", pdftest.Write(nil, pdftest.Options{}), "has no pages"},
		{"2000 pages", pdftest.Write(many, pdftest.Options{}), "has 2000 pages, over this server's limit of 1000"},
	} {
		_, err := Open(context.Background(), c.data, 1000)
		var pe *Error
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an Error saying %q", c.name, err, c.want)
		}
	}
}

// TestLargePageLowersDPI renders a 100×100-inch page within MaxPixels.
func TestLargePageLowersDPI(t *testing.T) {
	d, err := Open(context.Background(), pdftest.Write([]pdftest.Page{{Width: 7200, Height: 7200}}, pdftest.Options{}), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	img, dpi, err := d.Render(0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if px := img.Rect.Dx() * img.Rect.Dy(); dpi != 50 || px > MaxPixels {
		t.Errorf("%v at %d DPI, want 5000×5000 at 50", img.Rect, dpi)
	}
}

// FuzzRasterize opens any bytes as a PDF and renders its first page small: an error is fine, a
// panic or a hang is not. The seeds are under testdata/fuzz/FuzzRasterize.
func FuzzRasterize(f *testing.F) {
	f.Add(pdftest.TwoPages())
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Open(context.Background(), data, 50)
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("an error that is not a document's: %v", err)
			}
			return
		}
		defer d.Close()
		if err := d.Check(0); err != nil {
			return
		}
		if img, _, err := d.Render(0, 20); err == nil && img.Rect.Empty() {
			t.Fatal("an empty image without an error")
		}
	})
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite testdata/fuzz/FuzzRasterize")

// TestWriteSeeds writes FuzzRasterize's seed files when asked (go test -run TestWriteSeeds -write-seeds).
func TestWriteSeeds(t *testing.T) {
	if !*writeSeeds {
		t.Skip("-write-seeds rewrites testdata/fuzz/FuzzRasterize")
	}
	two := pdftest.TwoPages()
	seeds := map[string][]byte{
		"two-pages":  two,
		"truncated":  two[:len(two)/2],
		"encrypted":  pdftest.Write([]pdftest.Page{{Width: 72, Height: 72, Lines: []string{"secret"}}}, pdftest.Options{Encrypt: true}),
		"no-pages":   pdftest.Write(nil, pdftest.Options{}),
		"wide-page":  pdftest.Write([]pdftest.Page{{Width: 14400, Height: 10, Lines: []string{"wide"}}}, pdftest.Options{}),
		"no-xref":    []byte(strings.Split(string(two), "xref\n")[0]),
		"pdf-header": []byte("%PDF-1.7\n"),
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzRasterize")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestConcurrentRenders renders the pages of one document from several goroutines: each image
// equals the page rendered alone.
func TestConcurrentRenders(t *testing.T) {
	d, err := Open(context.Background(), pdftest.TwoPages(), 10)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var alone [2][]byte
	for i := range alone {
		img, _, err := d.Render(i, 100+50*i)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = img.Pix
	}
	var wg sync.WaitGroup
	for k := range 8 {
		wg.Go(func() {
			i := k % 2
			img, _, err := d.Render(i, 100+50*i)
			if err != nil || !bytes.Equal(img.Pix, alone[i]) {
				t.Errorf("render %d of page %d differs from the page alone (%v)", k, i, err)
			}
		})
	}
	wg.Wait()
}

// TestStoppedRender: a page that takes longer than the document's Timeout, or whose context
// ends, is refused with the limit named; the document refuses later pages, closes, and the
// renderers are all still there for the next documents.
func TestStoppedRender(t *testing.T) {
	big := pdftest.Write([]pdftest.Page{{Width: 2000, Height: 2000, Lines: []string{"A large page."}}}, pdftest.Options{})
	for _, how := range []string{"timeout", "cancel"} {
		ctx, cancel := context.WithCancel(context.Background())
		d, err := Open(ctx, big, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := "the PDF is refused"
		if how == "timeout" {
			d.Timeout = time.Microsecond
		} else {
			time.AfterFunc(time.Millisecond, cancel)
			want = context.Canceled.Error()
		}
		_, _, err = d.Render(0, 300)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: a render past its limit gave %v, want an error with %q", how, err, want)
		}
		if _, _, err := d.Render(0, 72); err == nil || !strings.Contains(err.Error(), "stopped by an earlier page") {
			t.Errorf("%s: the stopped document rendered again: %v", how, err)
		}
		d.Close()
		cancel()
	}
	// every renderer is free and works: as many documents as there are renderers, at once
	var docs []*Document
	for range Instances {
		d, err := Open(context.Background(), pdftest.TwoPages(), 10)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, d)
	}
	for _, d := range docs {
		if _, _, err := d.Render(1, 100); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
}
