// Package server is tfc's OpenAI-compatible HTTP API over a lane scheduler: chat and text
// completions (streamed or not), documents read page by page (/v1/ocr), tokenize and
// detokenize, the model list, health, Prometheus metrics, and a page at / to read a document in a
// browser. Every bad request gets an OpenAI error object and the server keeps serving.
package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tfc/runtime/engine"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// Config sets what the server answers with and what it accepts.
type Config struct {
	Name      string // the served model name
	APIKey    string // when set, every API request needs "Authorization: Bearer <key>"
	MaxTokens int    // max_tokens of a chat request that sets none (capped by what the context leaves)
	MaxBody   int64  // largest request body in bytes
	MaxImages int    // most images one request may carry
	// RepetitionStop ends a request whose output's tail repeats a period (lanes.Repeats) with
	// finish_reason "stop" and stop_reason "repetition", unless the request sets repetition_stop.
	RepetitionStop bool
	// FetchImages lets image_url parts name http(s) URLs, fetched with FetchTimeout.
	FetchImages  bool
	FetchTimeout time.Duration
	// OCR is the family's prompt and page DPI for /v1/ocr; nil refuses it.
	OCR *model.OCR
	// MaxPages is the most pages a document sent to /v1/ocr may have (DefaultMaxPages when 0).
	MaxPages int
	// Sample is used where a request leaves a sampling setting out (the checkpoint's generation config).
	Sample sample.Params
	Log    *slog.Logger
}

// loaded is what serving needs once the model is up.
type loaded struct {
	lanes *lanes.Scheduler
	fe    *engine.Frontend
	info  model.Info
	eos   map[int32]bool
}

// Server is the HTTP handler.
type Server struct {
	cfg     Config
	ready   atomic.Pointer[loaded]
	mux     *http.ServeMux
	metrics *metrics
	created int64
}

// New returns a server that answers /health with 503 until Ready is called.
func New(cfg Config) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 20
	}
	if cfg.MaxImages <= 0 {
		cfg.MaxImages = 16
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = 1024
	}
	if cfg.MaxPages <= 0 {
		cfg.MaxPages = DefaultMaxPages
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), created: time.Now().Unix()}
	s.metrics = newMetrics(s)
	s.mux.HandleFunc("POST /v1/chat/completions", s.api(s.chat))
	s.mux.HandleFunc("POST /v1/completions", s.api(s.completions))
	s.mux.HandleFunc("POST /v1/ocr", s.api(s.ocr))
	s.mux.HandleFunc("POST /tokenize", s.api(s.tokenize))
	s.mux.HandleFunc("POST /detokenize", s.api(s.detokenize))
	s.mux.HandleFunc("GET /v1/models", s.auth(s.models))
	s.mux.HandleFunc("GET /v1/models/{id...}", s.auth(s.modelByID))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, msg: fmt.Sprintf("there is no %s %s; see / (a page to read documents), /v1/models, /v1/chat/completions, /v1/completions, /v1/ocr, /tokenize, /detokenize, /health, /metrics", r.Method, r.URL.Path), code: "not_found"})
	})
	return s
}

// Ready starts serving requests on a loaded model.
func (s *Server) Ready(l *lanes.Scheduler, fe *engine.Frontend, info model.Info) {
	eos := map[int32]bool{}
	for _, id := range l.Config().EOS {
		eos[id] = true
	}
	// a text longer than the context times the longest token cannot fit: refused unencoded
	fe.MaxTextBytes = l.Config().Context * fe.Tok.MaxTokenBytes()
	s.ready.Store(&loaded{lanes: l, fe: fe, info: info, eos: eos})
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.cfg.Log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if !rec.wrote {
				writeError(rec, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: fmt.Sprintf("internal error: %v", v)})
			}
		}
	}()
	s.mux.ServeHTTP(rec, r)
	level := slog.LevelInfo
	if r.URL.Path == "/health" || r.URL.Path == "/metrics" {
		level = slog.LevelDebug
	}
	s.cfg.Log.Log(r.Context(), level, "request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start).Round(time.Microsecond))
}

// statusWriter records the status for the log and passes flushes through.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.status, w.wrote = code, true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.ready.Load() == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"loading"}`+"\n")
		return
	}
	io.WriteString(w, `{"status":"ok"}`+"\n")
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{s.model()}})
}

// modelByID answers GET /v1/models/{id}, as OpenAI clients' models.retrieve asks.
func (s *Server) modelByID(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.cfg.Name {
		writeError(w, &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", id, s.cfg.Name)})
		return
	}
	writeJSON(w, http.StatusOK, s.model())
}

// model is the served model's object.
func (s *Server) model() map[string]any {
	m := map[string]any{"id": s.cfg.Name, "object": "model", "created": s.created, "owned_by": "tfc", "root": s.cfg.Name}
	if ld := s.ready.Load(); ld != nil {
		m["max_model_len"] = ld.lanes.Config().Context
	}
	if s.cfg.OCR != nil && len(s.cfg.OCR.Tasks) > 0 { // tfc: the task names /v1/ocr takes
		tasks := make([]string, len(s.cfg.OCR.Tasks))
		for i, t := range s.cfg.OCR.Tasks {
			tasks[i] = t.Name
		}
		m["ocr_tasks"] = tasks
	}
	return m
}

// auth checks the API key.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.APIKey != "" {
			scheme, got, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
			ok = ok && strings.EqualFold(scheme, "Bearer") // the scheme is case-insensitive (RFC 9110)
			got = strings.TrimSpace(got)
			if !ok || got != s.cfg.APIKey {
				msg := "this server needs an API key; send it as \"Authorization: Bearer <key>\""
				if ok {
					msg = "the API key is not the one this server was started with"
				}
				writeError(w, &apiError{status: http.StatusUnauthorized, msg: msg, code: "invalid_api_key"})
				return
			}
		}
		h(w, r)
	}
}

// api wraps a POST endpoint: key, readiness, the body read under its limit.
func (s *Server) api(h func(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError) http.HandlerFunc {
	return s.auth(func(w http.ResponseWriter, r *http.Request) {
		ld := s.ready.Load()
		if ld == nil {
			writeError(w, &apiError{status: http.StatusServiceUnavailable, msg: "the model is still loading; retry when /health answers 200", typ: "server_error", code: "model_loading"})
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, &apiError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("the request body is over the %d-byte limit; send smaller images or fewer of them", s.cfg.MaxBody), code: "body_too_large"})
				return
			}
			writeError(w, &apiError{status: http.StatusBadRequest, msg: "the request body could not be read: " + err.Error()})
			return
		}
		if e := h(w, r, ld, body); e != nil {
			writeError(w, e)
		}
	})
}

// apiError is an OpenAI error object with its HTTP status.
type apiError struct {
	status     int
	msg, typ   string
	param      string
	code       string
	retryAfter time.Duration
}

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), param: param}
}

func writeError(w http.ResponseWriter, e *apiError) {
	typ := e.typ
	if typ == "" {
		typ = "invalid_request_error"
	}
	body := map[string]any{"message": e.msg, "type": typ, "param": nil, "code": nil}
	if e.param != "" {
		body["param"] = e.param
	}
	if e.code != "" {
		body["code"] = e.code
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, map[string]any{"error": body})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// decode reads a JSON body into v, naming the field and the expected type on a type mismatch.
func decode(body []byte, v any) *apiError {
	err := json.Unmarshal(body, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		te.Field = strings.ReplaceAll(te.Field, "genFields.", "")
		return badRequest(te.Field, "%s must be %s, not a JSON %s", fieldName(te.Field), typeName(te.Type), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("", "the request body is not valid JSON (at byte %d: %v)", se.Offset, err)
	}
	return badRequest("", "the request body is not valid JSON: %v", err)
}

func fieldName(f string) string {
	if f == "" {
		return "the request body"
	}
	return f
}

func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint64:
		return "an integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	}
	return t.String()
}

// checkModel refuses a model name other than the served one; an empty name means the served one.
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.cfg.Name {
		return nil
	}
	return &apiError{status: http.StatusNotFound, param: "model", code: "model_not_found",
		msg: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.cfg.Name)}
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
