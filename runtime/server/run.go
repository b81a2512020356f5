package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/engine"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// DefaultContext is a request's tokens when --context is not given: a 200 DPI letter page (about
// 4,800 image tokens) and its text, or the checkpoint's max_position_embeddings when smaller.
const DefaultContext = 8192

// Options are tfc serve's settings.
type Options struct {
	Dir              string
	Host             string
	Port             int
	Name             string // served model name; the checkpoint folder's name when empty
	Parallel         int
	Context          int // tokens a request, prompt and output; 0: DefaultContext, or max_position_embeddings when smaller
	MaxTokens        int // max_tokens of a chat request that sets none
	APIKey           string
	NoDrafts         bool
	NoCache          bool
	Queue            int   // requests that may wait for a lane; 4×Parallel when 0
	Budget           int64 // bytes the plan may use; the machine's available memory when 0
	CacheBytes       int64 // bytes of KV pages the prompt cache may keep idle; what the lanes leave free when 0
	VisionCache      int64 // bytes of vision-tower rows kept by image, so a page sent again skips the tower; 0: none
	Grace            time.Duration
	Backend          func() (device.Backend, error)
	Log              *slog.Logger
	OnListening      func(addr string) // called once the port is bound
	FetchImages      bool              // accept http(s) image URLs and fetch them
	MaxPages         int               // most pages of a document sent to /v1/ocr; DefaultMaxPages when 0
	NoRepetitionStop bool              // requests that leave repetition_stop out run into loops to max_tokens
	RoundRows        int               // most rows a forward round takes, prompt pieces and decode rows; DefaultRoundRows when 0
	// Progress, when set, sees the weight bytes loaded so far and the total; otherwise a log
	// line reports progress every 5 seconds.
	Progress func(done, total int64)
}

// DefaultRoundRows is the most rows a forward round takes unless Options.RoundRows says otherwise:
// a prompt longer than what decoding rows leave is filled over several rounds.
const DefaultRoundRows = 512

const (
	pageSize      = 16
	visionPatches = 16384
	draftTokens   = 4
)

// Run serves a checkpoint until ctx ends: it validates the checkpoint and the memory plan before
// loading, answers /health with 503 while loading, and on ctx's end stops taking requests, lets
// those in flight finish for the grace period and then cancels them.
func Run(ctx context.Context, o Options) error {
	su, err := prepare(&o)
	if err != nil {
		return err
	}
	log := o.Log
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return fmt.Errorf("cannot listen on %s:%d: %w; pick another --port or --host", o.Host, o.Port, err)
	}
	hs := &http.Server{Handler: su.srv, ReadHeaderTimeout: 30 * time.Second}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "model", o.Name, "family", su.fam.Name)
	if o.OnListening != nil {
		o.OnListening(ln.Addr().String())
	}
	sched, closeModel, err := su.load()
	if err != nil {
		hs.Close()
		return err
	}
	defer closeModel()

	select {
	case <-ctx.Done():
	case err := <-served:
		sched.Close()
		return err
	}
	log.Info("stopping: finishing requests in flight", "grace", o.Grace)
	sctx, cancel := context.WithTimeout(context.Background(), o.Grace)
	defer cancel()
	go func() {
		<-sctx.Done()
		sched.Close() // cancels what is still running; handlers then return
	}()
	err = hs.Shutdown(context.Background())
	sched.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("stopped")
	return err
}

// Open loads a checkpoint as Run does and returns its server without listening anywhere, for a
// caller that hands it requests itself (tfc ocr --model); close frees the lanes and the model.
func Open(o Options) (srv *Server, close func(), err error) {
	su, err := prepare(&o)
	if err != nil {
		return nil, nil, err
	}
	sched, closeModel, err := su.load()
	if err != nil {
		return nil, nil, err
	}
	return su.srv, func() { sched.Close(); closeModel() }, nil
}

// setup is a server whose checkpoint is checked and whose model is not loaded yet.
type setup struct {
	o      *Options
	srv    *Server
	fe     *engine.Frontend
	fam    *model.Family
	bound  model.Bound
	limits model.Limits
}

// prepare checks the options, the checkpoint and the memory plan, reads the front end and makes
// the server; nothing is loaded.
func prepare(o *Options) (*setup, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Name == "" {
		o.Name = filepath.Base(filepath.Clean(o.Dir))
	}
	switch {
	case o.Parallel < 1:
		return nil, fmt.Errorf("--parallel is %d; it must be at least 1", o.Parallel)
	case o.Context != 0 && o.Context < pageSize:
		return nil, fmt.Errorf("--context is %d; it must hold at least one KV page of %d tokens", o.Context, pageSize)
	case o.MaxTokens < 0 || o.CacheBytes < 0 || o.Queue < 0 || o.VisionCache < 0 || o.MaxPages < 0:
		return nil, fmt.Errorf("the default max_tokens, the prompt cache's size, the queue and the page limit must not be negative")
	case o.RoundRows < 0:
		return nil, fmt.Errorf("--max-num-batched-tokens is %d; it must be positive", o.RoundRows)
	}
	if o.RoundRows == 0 {
		o.RoundRows = DefaultRoundRows
	}
	if o.Queue == 0 {
		o.Queue = 4 * o.Parallel
	}
	if o.Grace == 0 {
		o.Grace = 10 * time.Second
	}
	ck, fam, bound, err := engine.Validate(o.Dir)
	if err != nil {
		return nil, err
	}
	const maxPos = "text_config.max_position_embeddings|max_position_embeddings"
	n, err := ck.Config.Int(maxPos)
	known := err == nil && ck.Config.Has(maxPos)
	if o.Context == 0 { // the default: a document page and its text, within the checkpoint's positions
		o.Context = DefaultContext
		if known && n < o.Context {
			o.Context = n
		}
	}
	if known && o.Context > n {
		ck.Close()
		return nil, fmt.Errorf("--context %d is above the checkpoint's max_position_embeddings (%d), the longest sequence its positions were trained for; use --context %d or less", o.Context, n, n)
	}
	gen := ck.Generation
	ck.Close()
	limits := model.Limits{Context: o.Context, Parallel: o.Parallel, Rows: max(o.RoundRows, o.Parallel+1), Patches: visionPatches, PageSize: pageSize}
	if err := checkPlan(bound, limits, o.Budget, o.RoundRows); err != nil {
		return nil, err
	}
	fe, err := engine.LoadFrontend(o.Dir)
	if err != nil {
		return nil, err
	}
	def := sample.Params{}
	if gen != nil && gen.DoSample != nil && *gen.DoSample {
		def.Temperature = 1
		if gen.Temperature != nil {
			def.Temperature = *gen.Temperature
		}
		if gen.TopP != nil {
			def.TopP = *gen.TopP
		}
		if gen.TopK != nil {
			def.TopK = *gen.TopK
		}
	}
	srv := New(Config{Name: o.Name, APIKey: o.APIKey, MaxTokens: o.MaxTokens, Sample: def, Log: o.Log, FetchImages: o.FetchImages,
		RepetitionStop: !o.NoRepetitionStop, OCR: fam.OCR, MaxPages: o.MaxPages})
	return &setup{o: o, srv: srv, fe: fe, fam: fam, bound: bound, limits: limits}, nil
}

// load uploads the weights, starts the lanes and makes the server ready; closeModel frees the
// model once the lanes are closed.
func (su *setup) load() (sched *lanes.Scheduler, closeModel func(), err error) {
	o, log, limits := su.o, su.o.Log, su.limits
	b, err := o.Backend()
	if err != nil {
		return nil, nil, err
	}
	log.Info("loading weights", "dir", o.Dir, "backend", b.Name(), "parallel", o.Parallel, "context", o.Context)
	t0 := time.Now()
	var loadedBytes, totalBytes atomic.Int64
	progress := func(done, total int64) {
		loadedBytes.Store(done)
		totalBytes.Store(total)
		if o.Progress != nil {
			o.Progress(done, total)
		}
	}
	loading := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-loading:
				return
			case <-tick.C:
				if o.Progress == nil {
					log.Info("still loading weights", "seconds", time.Since(t0).Round(time.Second).Seconds(),
						"bytes", loadedBytes.Load(), "of", totalBytes.Load())
				}
			}
		}
	}()
	e, err := engine.OpenProgress(o.Dir, b, limits, progress)
	close(loading)
	if err != nil {
		return nil, nil, err
	}
	if err := su.fe.Fits(e.Info); err != nil {
		e.Close()
		return nil, nil, fmt.Errorf("%s: %w", o.Dir, err)
	}
	log.Info("loaded", "seconds", time.Since(t0).Round(time.Millisecond).Seconds())
	var eos []int32
	for id := range e.EOS {
		eos = append(eos, int32(id))
	}
	lc := lanes.Config{Parallel: o.Parallel, Context: o.Context, Rows: limits.Rows, PageSize: pageSize,
		Queue: o.Queue, EOS: eos, PromptCache: !o.NoCache, MaxPatches: limits.Patches, VisionCache: int(o.VisionCache)}
	if o.CacheBytes > 0 {
		pages := int64(o.Parallel * lc.Pages())
		pageBytes := max(1, su.bound.Plan(limits).KVCache/pages)
		lc.CachePages = int(max(1, min(pages, o.CacheBytes/pageBytes)))
	}
	if !o.NoDrafts {
		lc.Drafts = draftTokens
	}
	sched, err = lanes.New(e.Model, lc)
	if err != nil {
		e.Close()
		return nil, nil, err
	}
	su.srv.Ready(sched, su.fe, e.Info)
	log.Info("ready", "drafts", lc.Drafts, "prompt_cache", lc.PromptCache, "cache_pages", lc.CachePages)
	return sched, e.Close, nil
}

// checkPlan refuses limits whose memory plan does not fit the budget, naming the largest
// parallel setting that does (rounds of roundRows rows).
func checkPlan(b model.Bound, l model.Limits, budget int64, roundRows int) error {
	if budget == 0 {
		budget = memAvailable()
	}
	if budget <= 0 {
		return nil
	}
	total := func(l model.Limits) int64 {
		p := b.Plan(l)
		return p.Weights + p.Activations + p.KVCache
	}
	need := total(l)
	if need <= budget {
		return nil
	}
	p := b.Plan(l)
	fits := 0
	for n := l.Parallel - 1; n >= 1; n-- {
		m := l
		m.Parallel, m.Rows = n, max(roundRows, n+1)
		if total(m) <= budget {
			fits = n
			break
		}
	}
	msg := fmt.Sprintf("--parallel %d × --context %d needs %s (weights %s, activations %s, KV cache %s), over the %s available",
		l.Parallel, l.Context, mib(need), mib(p.Weights), mib(p.Activations), mib(p.KVCache), mib(budget))
	if fits > 0 {
		return fmt.Errorf("%s; --parallel %d fits at this context", msg, fits)
	}
	return fmt.Errorf("%s; lower --context", msg)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// memAvailable reads MemAvailable from /proc/meminfo; 0 where it cannot.
func memAvailable() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
