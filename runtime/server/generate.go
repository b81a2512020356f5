package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"tfc/runtime/engine"
	"tfc/runtime/image"
	"tfc/runtime/lanes"
	"tfc/runtime/tokenizer"
)

// job is one generation as the endpoints hand it over.
type job struct {
	chat      bool // chat.completion objects, else text_completion
	prompt    engine.Prompt
	imageKeys []string
	set       settings
	defMax    int               // max tokens when the request sets none
	images    engine.ImageTimes // its images' decode and preprocessing
}

// TokenSHA256 is the sha256 (hex) of the ids joined by commas in decimal.
func TokenSHA256(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	sum := sha256.Sum256([]byte(strings.Join(s, ",")))
	return hex.EncodeToString(sum[:])
}

// textOut decodes output ids to text, cuts it at the first stop string, and holds back the
// bytes a stop string may still be forming in.
type textOut struct {
	dec     *tokenizer.StreamDecoder
	stops   []string
	hold    int
	text    string
	sent    int
	stopped bool
}

func newTextOut(tok *tokenizer.Tokenizer, stops []string) *textOut {
	o := &textOut{dec: tok.NewStreamDecoder(true), stops: stops}
	for _, s := range stops {
		o.hold = max(o.hold, len(s)-1)
	}
	return o
}

func (o *textOut) add(ids []int32) {
	if o.stopped {
		return
	}
	o.text += o.dec.Next(ints(ids)...)
	o.cut()
}

func (o *textOut) cut() {
	at := -1
	for _, s := range o.stops {
		if i := strings.Index(o.text[o.sent:], s); i >= 0 && (at < 0 || o.sent+i < at) {
			at = o.sent + i
		}
	}
	if at >= 0 {
		o.text, o.stopped = o.text[:at], true
	}
}

// next returns the text that may be sent now; final sends everything.
func (o *textOut) next(final bool) string {
	end := len(o.text)
	if !final && !o.stopped {
		end -= o.hold
		for end > o.sent && end < len(o.text) && !utf8.RuneStart(o.text[end]) {
			end--
		}
	}
	if end <= o.sent {
		return ""
	}
	s := o.text[o.sent:end]
	o.sent = end
	return s
}

func (o *textOut) finish() string {
	if !o.stopped {
		o.text += o.dec.Flush()
		o.cut()
	}
	return o.next(true)
}

// stopHook ends a sequence on the scheduler once its text holds a stop string.
func stopHook(tok *tokenizer.Tokenizer, stops []string) func([]int32) bool {
	if len(stops) == 0 {
		return nil
	}
	dec := tok.NewStreamDecoder(true)
	var text strings.Builder
	return func(out []int32) bool {
		piece := dec.Next(int(out[len(out)-1]))
		text.WriteString(piece)
		t := text.String()
		for _, s := range stops {
			if strings.Contains(t[max(0, len(t)-len(piece)-len(s)):], s) {
				return true
			}
		}
		return false
	}
}

func ints(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// generate submits a job and writes its response, streamed or whole.
func (s *Server) generate(w http.ResponseWriter, r *http.Request, ld *loaded, j *job) *apiError {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	start := time.Now()
	st, e := s.submit(ctx, ld, j)
	if e != nil {
		return e
	}
	rep := s.newReply(w, ld, j, start)
	defer rep.drain(st, cancel)
	if j.set.stream {
		return rep.stream(st)
	}
	return rep.whole(st)
}

// newReply starts the response of a job submitted at start.
func (s *Server) newReply(w http.ResponseWriter, ld *loaded, j *job, start time.Time) *reply {
	rep := &reply{s: s, w: w, j: j, ld: ld, id: newID("chatcmpl-"), created: time.Now().Unix(), start: start,
		out: newTextOut(ld.fe.Tok, j.set.stop)}
	if !j.chat {
		rep.id = newID("cmpl-")
	}
	return rep
}

// submit sets a job's token budget within the context and hands it to the lanes.
func (s *Server) submit(ctx context.Context, ld *loaded, j *job) (*lanes.Stream, *apiError) {
	n := len(j.prompt.IDs)
	ctxLen := ld.lanes.Config().Context
	param := "messages"
	if !j.chat {
		param = "prompt"
	}
	maxTokens := j.set.maxTokens
	if maxTokens == 0 {
		maxTokens = min(j.defMax, ctxLen-n)
		if maxTokens < 1 {
			return nil, &apiError{status: http.StatusBadRequest, param: param, code: "context_length_exceeded",
				msg: fmt.Sprintf("the prompt has %d tokens and leaves no room in this model's context of %d tokens; shorten it", n, ctxLen)}
		}
	}
	st, err := ld.lanes.Submit(ctx, &lanes.Request{
		Prompt: j.prompt.IDs, Pixels: j.prompt.Pixels, Grids: grids(j.prompt), ImageKeys: j.imageKeys,
		MaxTokens: maxTokens, Sample: j.set.sample, Stop: stopHook(ld.fe.Tok, j.set.stop),
		IgnoreEOS: j.set.ignoreEOS, MinTokens: min(j.set.minTokens, maxTokens), RepetitionStop: j.set.repetition,
		Release: func() { image.Release(j.prompt.Pixels) }, // a request's prompt is its own
	})
	if err == nil {
		return st, nil
	}
	var cl *lanes.ContextLengthError
	var qf *lanes.QueueFullError
	switch {
	case errors.As(err, &cl):
		if j.set.maxTokens > 0 {
			param = "max_tokens"
		}
		return nil, &apiError{status: http.StatusBadRequest, msg: err.Error(), param: param, code: "context_length_exceeded"}
	case errors.As(err, &qf):
		s.metrics.refused.Inc()
		return nil, &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "queue_full", msg: err.Error(), retryAfter: qf.RetryAfter}
	case errors.Is(err, lanes.ErrClosed):
		return nil, &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", msg: err.Error()}
	}
	return nil, badRequest("", "%v", err)
}

// drain cancels a request its handler gave up on (the client left) and waits for its end, so
// that its lane is free and its metrics are counted before the handler returns.
func (r *reply) drain(st *lanes.Stream, cancel context.CancelFunc) {
	if r.ended {
		return
	}
	cancel()
	for ev := range st.Events {
		if ev.Done {
			r.done(ev)
		}
	}
}

func grids(p engine.Prompt) [][3]int {
	out := make([][3]int, len(p.Grids))
	for i, g := range p.Grids {
		out[i] = g
	}
	return out
}

// reply builds one response.
type reply struct {
	s       *Server
	w       http.ResponseWriter
	j       *job
	ld      *loaded
	id      string
	created int64
	start   time.Time
	out     *textOut
	ids     []int32
	last    time.Time
	ended   bool // the Done event was seen
}

// observe records a token event's latencies.
func (r *reply) observe(ev lanes.Event) {
	if len(ev.Tokens) == 0 {
		return
	}
	now := time.Now()
	if r.ids == nil {
		r.s.metrics.ttft.Observe(now.Sub(r.start).Seconds())
	} else {
		per := now.Sub(r.last).Seconds() / float64(len(ev.Tokens))
		for range ev.Tokens {
			r.s.metrics.itl.Observe(per)
		}
	}
	r.last = now
	r.ids = append(r.ids, ev.Tokens...)
	r.out.add(ev.Tokens)
}

func (r *reply) done(ev lanes.Event) {
	r.ended = true
	r.s.metrics.e2e.Observe(time.Since(r.start).Seconds())
	r.s.metrics.finished.WithLabelValues(ev.Finish).Inc()
	m, t := r.s.metrics, ev.Times
	m.queue.Observe(t.Queue.Seconds())
	if t.Vision > 0 {
		m.vision.Observe(t.Vision.Seconds())
	}
	if t.Prefill > 0 {
		m.prefill.Observe(t.Prefill.Seconds())
	}
	if t.Decode > 0 {
		m.decode.Observe(t.Decode.Seconds())
	}
}

// timings is where the request's time went, in milliseconds (return_timings).
func (r *reply) timings(ev lanes.Event) map[string]any {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	t := ev.Times
	return map[string]any{"image_decode_ms": ms(r.j.images.Decode), "image_preprocess_ms": ms(r.j.images.Preprocess),
		"queue_ms": ms(t.Queue), "vision_ms": ms(t.Vision), "prefill_ms": ms(t.Prefill), "decode_ms": ms(t.Decode),
		"total_ms": ms(time.Since(r.start) + r.j.images.Decode + r.j.images.Preprocess)}
}

func (r *reply) object() string {
	if r.j.chat {
		return "chat.completion"
	}
	return "text_completion"
}

// chunkObject names a streamed chunk's object.
func (r *reply) chunkObject() string {
	if r.j.chat {
		return "chat.completion.chunk"
	}
	return "text_completion"
}

func (r *reply) usage(u lanes.Usage) map[string]any {
	return map[string]any{
		"prompt_tokens": u.Prompt, "completion_tokens": u.Output, "total_tokens": u.Prompt + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.Cached},
	}
}

// statusClientClosed is the status a request whose client disconnected is logged with (499).
const statusClientClosed = 499

func failure(ev lanes.Event) *apiError {
	if errors.Is(ev.Err, context.Canceled) { // the client went away: logged as nginx logs it, not as a server error
		return &apiError{status: statusClientClosed, typ: "client_closed", msg: "the client closed the connection before the reply"}
	}
	if errors.Is(ev.Err, lanes.ErrClosed) {
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "shutting_down", msg: ev.Err.Error()}
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: fmt.Sprintf("generation failed: %v", ev.Err)}
}

// collect reads a job's events to its end and returns the last one; its text is r.out's.
func (r *reply) collect(st *lanes.Stream) (lanes.Event, *apiError) {
	for ev := range st.Events {
		r.observe(ev)
		if !ev.Done {
			continue
		}
		r.done(ev)
		if ev.Err != nil {
			return ev, failure(ev)
		}
		return ev, nil
	}
	return lanes.Event{}, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: "generation ended without a result"}
}

func (r *reply) whole(st *lanes.Stream) *apiError {
	ev, e := r.collect(st)
	if e != nil {
		return e
	}
	text := r.out.finish()
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": ev.Finish}
	if ev.StopReason != "" {
		choice["stop_reason"] = ev.StopReason
	}
	if r.j.chat {
		choice["message"] = map[string]any{"role": "assistant", "content": text}
	} else {
		choice["text"] = text
	}
	resp := map[string]any{"id": r.id, "object": r.object(), "created": r.created, "model": r.s.cfg.Name,
		"choices": []any{choice}, "usage": r.usage(ev.Usage)}
	if r.j.set.timings {
		resp["timings"] = r.timings(ev)
	}
	if r.j.set.returnIDs {
		choice["token_ids"] = nonNil(r.ids)
		choice["token_sha256"] = TokenSHA256(r.ids)
		resp["prompt_token_ids"] = r.j.prompt.IDs
	}
	writeJSON(r.w, http.StatusOK, resp)
	return nil
}

func nonNil(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// stream writes server-sent events as OpenAI does: chunks, an optional usage chunk, [DONE].
func (r *reply) stream(st *lanes.Stream) *apiError {
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	r.w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := r.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		_, err := fmt.Fprintf(r.w, "data: %s\n\n", b)
		flush()
		return err == nil
	}
	chunk := func(choice map[string]any) map[string]any {
		c := map[string]any{"id": r.id, "object": r.chunkObject(), "created": r.created, "model": r.s.cfg.Name,
			"choices": []any{choice}}
		if r.j.set.includeUsage {
			c["usage"] = nil
		}
		return c
	}
	piece := func(text string, ids []int32, finish any) map[string]any {
		ch := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish}
		if r.j.chat {
			d := map[string]any{}
			if text != "" {
				d["content"] = text
			}
			ch["delta"] = d
		} else {
			ch["text"] = text
		}
		if r.j.set.returnIDs {
			ch["token_ids"] = nonNil(ids)
		}
		return ch
	}
	if r.j.chat {
		first := chunk(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil})
		if r.j.set.returnIDs {
			first["prompt_token_ids"] = r.j.prompt.IDs
		}
		if !send(first) {
			return nil
		}
	}
	sentPrompt := r.j.chat
	for ev := range st.Events {
		r.observe(ev)
		if ev.Done {
			r.done(ev)
			if ev.Err != nil {
				if !errors.Is(ev.Err, context.Canceled) {
					e := failure(ev)
					send(map[string]any{"error": map[string]any{"message": e.msg, "type": e.typ, "param": nil, "code": nilIfEmpty(e.code)}})
					fmt.Fprint(r.w, "data: [DONE]\n\n")
					flush()
				}
				return nil
			}
			last := piece(r.out.finish(), ev.Tokens, ev.Finish)
			if ev.StopReason != "" {
				last["stop_reason"] = ev.StopReason
			}
			if r.j.set.returnIDs {
				last["token_sha256"] = TokenSHA256(r.ids)
			}
			c := chunk(last)
			if r.j.set.timings {
				c["timings"] = r.timings(ev)
			}
			if !sentPrompt && r.j.set.returnIDs {
				c["prompt_token_ids"] = r.j.prompt.IDs
			}
			send(c)
			if r.j.set.includeUsage {
				send(map[string]any{"id": r.id, "object": r.chunkObject(), "created": r.created, "model": r.s.cfg.Name,
					"choices": []any{}, "usage": r.usage(ev.Usage)})
			}
			fmt.Fprint(r.w, "data: [DONE]\n\n")
			flush()
			return nil
		}
		text := r.out.next(false)
		if text == "" && !r.j.set.returnIDs {
			continue
		}
		c := chunk(piece(text, ev.Tokens, nil))
		if !sentPrompt && r.j.set.returnIDs {
			c["prompt_token_ids"] = r.j.prompt.IDs
			sentPrompt = true
		}
		if !send(c) {
			return nil
		}
	}
	return nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
