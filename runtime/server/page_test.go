package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	stdimage "image"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tfc/runtime/image"
	"tfc/runtime/lanes"
	"tfc/runtime/lanes/lanestest"
	"tfc/runtime/model"
	"tfc/runtime/pdf/pdftest"
)

// layoutCell is one element of a dots.ocr layout answer.
type layoutCell struct {
	BBox     [4]int `json:"bbox"`
	Category string `json:"category"`
	Text     string `json:"text"`
}

// layoutModel answers each page with the layout text canned for its image's grid, token by token
// after the prompt, then EOS; it needs rounds without drafts and a prompt cache.
type layoutModel struct {
	info    model.Info
	eos     int32
	answers map[[2]int][]int32 // by the image's grid: height and width in patches

	mu    sync.Mutex
	slots map[int32]*layoutSlot
}

// layoutSlot is a sequence's answer and the cache position of its first output.
type layoutSlot struct {
	answer []int32
	start  int32
}

func (m *layoutModel) Info() model.Info { return m.info }
func (m *layoutModel) Close()           {}

// Vision gives every row of an image its grid's height and width in patches.
func (m *layoutModel) Vision(pixels []float32, grids [][3]int) ([]float32, error) {
	var out []float32
	for _, g := range grids {
		for range g[0] * g[1] * g[2] / (m.info.Merge * m.info.Merge) {
			row := make([]float32, m.info.Hidden)
			row[0], row[1] = float32(g[1]), float32(g[2])
			out = append(out, row...)
		}
	}
	return out, nil
}

func (m *layoutModel) Forward(r *model.Round) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.info.Hidden
	for i, row := range r.ImageAt {
		grid := [2]int{int(r.ImageRows[i*h]), int(r.ImageRows[i*h+1])}
		answer, ok := m.answers[grid]
		if !ok {
			return nil, fmt.Errorf("layout model: no answer for an image of %v patches", grid)
		}
		m.slots[r.Seq[row]] = &layoutSlot{answer: answer, start: -1}
	}
	out := make([]float32, len(r.LogitRows)*m.info.Vocab)
	for i, row := range r.LogitRows {
		sl := m.slots[r.Seq[row]]
		if sl == nil {
			return nil, fmt.Errorf("layout model: sequence %d has no image", r.Seq[row])
		}
		if sl.start < 0 {
			sl.start = r.Pos[row]
		}
		tok := m.eos
		if k := int(r.Pos[row] - sl.start); k < len(sl.answer) {
			tok = sl.answer[k]
		}
		out[i*m.info.Vocab+int(tok)] = 1
	}
	return out, nil
}

// browserPath finds a Chromium or Chrome binary on PATH.
func browserPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// pageView is what the browser shows of a page, in CSS pixels.
type pageView struct {
	Index   int    `json:"index"`
	State   string `json:"state"`
	Status  string `json:"status"`
	Natural [2]int `json:"natural"` // the image's own width and height
	Image   rect   `json:"image"`
	Cells   []struct {
		Category string `json:"category"`
		Text     string `json:"text"`
	} `json:"cells"`
	Boxes []rect `json:"boxes"` // relative to the image's top left corner
}

type rect struct{ X, Y, W, H float64 }

// pageViews reads every page's entry on the page.
const pageViews = `[...document.querySelectorAll('#pages > li')].map(li => {
  const img = li.querySelector('.view img'), status = li.querySelector('.page-status');
  const r = img ? img.getBoundingClientRect() : {left: 0, top: 0, width: 0, height: 0};
  return {
    index: Number(li.dataset.index), state: li.dataset.state, status: status ? status.textContent : '',
    natural: img ? [img.naturalWidth, img.naturalHeight] : [0, 0],
    image: {X: r.left, Y: r.top, W: r.width, H: r.height},
    cells: [...li.querySelectorAll('.cell')].map(c => ({category: c.querySelector('.category').textContent, text: c.querySelector('.cell-text').textContent})),
    boxes: [...li.querySelectorAll('.box')].map(b => { const q = b.getBoundingClientRect(); return {X: q.left - r.left, Y: q.top - r.top, W: q.width, H: q.height}; }),
  };
})`

// TestPageInBrowser is issue 19's page in headless Chromium: a two-page PDF (a landscape and a
// portrait page) uploaded through the file input; each page shows its rendering, the text of the
// layout answer canned for it and one box per element where the answer puts it.
func TestPageInBrowser(t *testing.T) {
	browser := browserPath()
	if browser == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH; apt-get install chromium to run the page in a browser")
	}
	fe := frontend(t)
	pages := []pdftest.Page{
		{Width: 144, Height: 108, Lines: []string{"Page one.", "Hello, tfc."}},
		{Width: 108, Height: 144, Lines: []string{"Page two.", "12 + 30 = 42"}},
	}
	doc := pdftest.Write(pages, pdftest.Options{})
	cells := [][]layoutCell{
		{{BBox: [4]int{28, 20, 196, 56}, Category: "Title", Text: "Page one."}, {BBox: [4]int{28, 70, 300, 110}, Category: "Text", Text: "Hello, tfc."}},
		{{BBox: [4]int{20, 28, 200, 64}, Category: "Section-header", Text: "Page two."}, {BBox: [4]int{20, 80, 280, 120}, Category: "Text", Text: "12 + 30 = 42"},
			{BBox: [4]int{140, 330, 170, 360}, Category: "Page-footer", Text: "2"}},
	}
	// each page's size as rendered, and as the model reads it: the boxes' coordinates
	cfg := fe.Image
	rendered, modelSize := make([][2]int, len(pages)), make([][2]int, len(pages))
	answers := map[[2]int][]int32{}
	for i := range pages {
		c, _, err := stdimage.DecodeConfig(bytes.NewReader(renderedPNG(t, doc, i, testOCR.DPI)))
		if err != nil {
			t.Fatal(err)
		}
		h, w, err := image.SmartResize(c.Height, c.Width, cfg.Factor(), cfg.MinPixels, cfg.MaxPixels)
		if err != nil {
			t.Fatal(err)
		}
		rendered[i], modelSize[i] = [2]int{c.Width, c.Height}, [2]int{w, h}
		text, _ := json.Marshal(cells[i])
		answers[[2]int{h / cfg.PatchSize, w / cfg.PatchSize}] = toInt32(fe.Tok.Encode(string(text)))
	}
	if len(answers) != len(pages) {
		t.Fatalf("the pages' grids are not distinct (%v); the model tells the pages apart by them", modelSize)
	}

	// the server, on a model that gives the canned answers
	imageToken, err := fe.Tok.SpecialID("<|image_pad|>")
	if err != nil {
		t.Fatal(err)
	}
	lc := testLanes()
	lc.Drafts, lc.PromptCache = 0, false
	info := lanestest.Info(151936, imageToken)
	l, err := lanes.New(&layoutModel{info: info, eos: lc.EOS[0], answers: answers, slots: map[int32]*layoutSlot{}}, lc)
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Name: "tiny", OCR: testOCR, MaxTokens: lc.Context})
	srv.Ready(l, fe, info)
	var tasksMu sync.Mutex
	var tasks []string // each /v1/ocr request's task
	h := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/ocr" {
			b, _ := io.ReadAll(r.Body)
			var req OCRRequest
			json.Unmarshal(b, &req)
			tasksMu.Lock()
			tasks = append(tasks, req.Task)
			tasksMu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		srv.ServeHTTP(w, r)
	}))
	defer l.Close()
	defer h.Close()

	// the page is served at / and nowhere else
	resp, err := http.Get(h.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || !bytes.Equal(body, pageHTML) {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, err := http.Get(h.URL + "/index.html"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("GET /index.html: %v %v", resp, err)
	}

	file := filepath.Join(t.TempDir(), "two-pages.pdf")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	whole, cancel := context.WithTimeout(context.Background(), time.Minute) // the browser's life
	defer cancel()
	alloc, cancel := chromedp.NewExecAllocator(whole, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 1000))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	step := func(name string, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// the first call starts the browser, bound to the context it is given: ctx, not a step's
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", browser, err)
	}
	step("open the page", 10*time.Second, chromedp.Navigate(h.URL+"/"))
	// the family's named prompts are offered; the pages are read as the one picked
	step("pick a task", 10*time.Second, chromedp.WaitVisible("#task-line"), chromedp.SetValue("#task", "table"))
	offered, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#task option")].map(o => o.value)`))
	if want := []string{"text", "table"}; err != nil || !slices.Equal(offered, want) {
		t.Errorf("the page offers tasks %v (%v), want %v", offered, err, want)
	}
	step("upload the PDF", 10*time.Second, chromedp.SetUploadFiles(chromedp.CSS("#file"), []string{file}))

	// both pages read and their images loaded, or a failure shown
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	_, waitErr := chromedp.Run(wctx, chromedp.Poll[bool](`(() => {
	  const done = [...document.querySelectorAll('#pages > li[data-state="done"] .view img')].filter(img => img.complete && img.naturalWidth > 0);
	  return done.length === 2 || document.querySelector('#pages > li[data-state="failed"], #status.failed') !== null;
	})()`))
	wcancel()
	shot, err := func() ([]byte, error) {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return chromedp.Run(sctx, chromedp.FullScreenshot(100))
	}()
	if err != nil {
		t.Errorf("screenshot: %v", err)
	} else {
		dir := os.Getenv("TFC_SCREENSHOT_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		path := filepath.Join(dir, "tfc-page-two-pages.png")
		if err := os.WriteFile(path, shot, 0o644); err != nil {
			t.Errorf("screenshot: %v", err)
		} else {
			t.Logf("screenshot of the page: %s", path)
		}
	}
	if waitErr != nil {
		t.Fatalf("waiting for both pages: %v", waitErr)
	}

	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	views, err := chromedp.Run(sctx, chromedp.Evaluate[[]pageView](pageViews))
	if err != nil {
		t.Fatal(err)
	}
	// a model's text that is not a whole layout list gets no boxes
	texts, _ := json.Marshal([]string{
		"Page one.",
		`[{"bbox": [1, 2, 3, 4], "category": "Text", "text": "a"}, {"bbox": [5,`,
		`[{"bbox": [1, 2, 3], "category": "Text", "text": "a"}]`,
		`{"bbox": [1, 2, 3, 4], "category": "Text", "text": "a"}`,
		`[]`,
		"```json\n[{\"bbox\": [1, 2, 3, 4], \"category\": \"Text\", \"text\": \"a\"}]\n```",
	})
	counts, err := chromedp.Run(sctx, chromedp.Evaluate[[]int](string(texts)+`.map(text => { const cells = layoutCells(text); return cells ? cells.length : -1; })`))
	if want := []int{-1, -1, -1, -1, -1, 1}; err != nil || !slices.Equal(counts, want) {
		t.Errorf("layout cells of plain, truncated, three-number, single-object, empty and fenced answers: %v %v, want %v", counts, err, want)
	}
	tasksMu.Lock()
	if want := []string{"table", "table"}; !slices.Equal(tasks, want) {
		t.Errorf("the page's /v1/ocr requests named tasks %q, want %q", tasks, want)
	}
	tasksMu.Unlock()
	status, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS("#status")))
	if err != nil {
		t.Fatal(err)
	}
	if want := "two-pages.pdf: 2 pages read."; status != want {
		t.Errorf("the status line says %q, want %q", status, want)
	}
	if len(views) != len(pages) {
		t.Fatalf("%d pages shown, want %d: %+v", len(views), len(pages), views)
	}
	for i, v := range views {
		if v.Index != i || v.State != "done" {
			t.Errorf("page %d: index %d, state %q: %s", i, v.Index, v.State, v.Status)
			continue
		}
		if v.Natural != rendered[i] {
			t.Errorf("page %d shows a %v image; the page renders at %v", i, v.Natural, rendered[i])
		}
		if !strings.Contains(v.Status, fmt.Sprintf("%d layout boxes", len(cells[i]))) {
			t.Errorf("page %d's status line: %q", i, v.Status)
		}
		if len(v.Cells) != len(cells[i]) || len(v.Boxes) != len(cells[i]) {
			t.Errorf("page %d shows %d texts and %d boxes, want %d of each", i, len(v.Cells), len(v.Boxes), len(cells[i]))
			continue
		}
		// a box's place on the image shown is its bbox scaled from the model's image to the shown one
		sx, sy := v.Image.W/float64(modelSize[i][0]), v.Image.H/float64(modelSize[i][1])
		if math.Abs(v.Image.W/v.Image.H-float64(rendered[i][0])/float64(rendered[i][1])) > 0.02 {
			t.Errorf("page %d is shown %gx%g, not in its rendering's proportions %v", i, v.Image.W, v.Image.H, rendered[i])
		}
		// issue 19's done-when: the page shows what a chat request carrying the rendered page reads
		var chat []layoutCell
		if err := json.Unmarshal([]byte((&ts{url: h.URL}).chatText(t, renderedPNG(t, doc, i, testOCR.DPI))), &chat); err != nil || len(chat) != len(v.Cells) {
			t.Errorf("page %d: the chat reply has %d layout cells (%v), the page shows %d", i, len(chat), err, len(v.Cells))
		}
		for k, c := range chat {
			if k < len(v.Cells) && (v.Cells[k].Category != c.Category || v.Cells[k].Text != c.Text) {
				t.Errorf("page %d, element %d: the page shows %q %q, the chat reply reads %q %q", i, k, v.Cells[k].Category, v.Cells[k].Text, c.Category, c.Text)
			}
		}
		for k, c := range cells[i] {
			if v.Cells[k].Category != c.Category || v.Cells[k].Text != c.Text {
				t.Errorf("page %d, element %d: %q %q, want %q %q", i, k, v.Cells[k].Category, v.Cells[k].Text, c.Category, c.Text)
			}
			want := rect{X: sx * float64(c.BBox[0]), Y: sy * float64(c.BBox[1]), W: sx * float64(c.BBox[2]-c.BBox[0]), H: sy * float64(c.BBox[3]-c.BBox[1])}
			got := v.Boxes[k]
			if math.Abs(got.X-want.X) > 1 || math.Abs(got.Y-want.Y) > 1 || math.Abs(got.W-want.W) > 1 || math.Abs(got.H-want.H) > 1 {
				t.Errorf("page %d, box %d is at %+v on the image, want %+v", i, k, got, want)
			}
			if got.X < 0 || got.Y < 0 || got.X+got.W > v.Image.W+0.5 || got.Y+got.H > v.Image.H+0.5 || got.W <= 0 || got.H <= 0 {
				t.Errorf("page %d, box %d (%+v) is not inside the %gx%g image", i, k, got, v.Image.W, v.Image.H)
			}
		}
	}
}
