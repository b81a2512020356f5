package server

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"tfc/runtime/chattemplate"
	"tfc/runtime/engine"
	"tfc/runtime/image"
	"tfc/runtime/sample"
)

// genFields are the generation settings chat and text completions share.
type genFields struct {
	Model               string          `json:"model"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	TopK                *int            `json:"top_k"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	N                   *int            `json:"n"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ReturnTokenIDs bool `json:"return_token_ids"`
	ReturnTimings  bool `json:"return_timings"`
	IgnoreEOS      bool `json:"ignore_eos"`
	// fields this server does not compute: refused by name when asked for, never ignored
	Tools            json.RawMessage `json:"tools"`
	ToolChoice       json.RawMessage `json:"tool_choice"`
	Functions        json.RawMessage `json:"functions"`
	FunctionCall     json.RawMessage `json:"function_call"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	Echo             bool            `json:"echo"`
	BestOf           *int            `json:"best_of"`
	Suffix           *string         `json:"suffix"`
	MinTokens        *int            `json:"min_tokens"`
	RepetitionStop   *bool           `json:"repetition_stop"`
	Logprobs         json.RawMessage `json:"logprobs"`
	ResponseFormat   *struct {
		Type string `json:"type"`
	} `json:"response_format"`
}

type chatRequest struct {
	genFields
	Messages           []chatMessage   `json:"messages"`
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// settings are a request's checked generation settings.
type settings struct {
	maxTokens    int // 0: what the default and the context allow
	sample       sample.Params
	stop         []string
	stream       bool
	includeUsage bool
	returnIDs    bool
	timings      bool // add where the request's time went (return_timings)
	ignoreEOS    bool
	minTokens    int
	repetition   bool // stop a looping output (lanes.Repeats)
}

const maxStops = 16

// settings checks the shared fields.
func (s *Server) settings(f *genFields) (settings, *apiError) {
	var st settings
	if e := s.checkModel(f.Model); e != nil {
		return st, e
	}
	if lp := bytes.TrimSpace(f.Logprobs); len(lp) > 0 && string(lp) != "null" && string(lp) != "false" && string(lp) != "0" {
		return st, badRequest("logprobs", "logprobs are not supported by this server; leave logprobs out")
	}
	if f.ResponseFormat != nil && f.ResponseFormat.Type != "" && f.ResponseFormat.Type != "text" {
		return st, badRequest("response_format", "response_format %q is not supported; this server only returns free text", f.ResponseFormat.Type)
	}
	if e := unsupported(f); e != nil {
		return st, e
	}
	if f.N != nil && *f.N != 1 {
		return st, badRequest("n", "n is %d; this server returns one choice per request, so n must be 1", *f.N)
	}
	mt, param := f.MaxTokens, "max_tokens"
	if f.MaxCompletionTokens != nil {
		mt, param = f.MaxCompletionTokens, "max_completion_tokens"
	}
	if mt != nil {
		if *mt < 1 {
			return st, badRequest(param, "%s is %d; it must be at least 1", param, *mt)
		}
		st.maxTokens = *mt
	}
	st.sample = s.cfg.Sample
	if f.Temperature != nil {
		if *f.Temperature < 0 || *f.Temperature > 2 {
			return st, badRequest("temperature", "temperature is %g; it must be between 0 and 2", *f.Temperature)
		}
		st.sample.Temperature = *f.Temperature
	}
	if f.TopP != nil {
		if *f.TopP <= 0 || *f.TopP > 1 {
			return st, badRequest("top_p", "top_p is %g; it must be above 0 and at most 1", *f.TopP)
		}
		st.sample.TopP = *f.TopP
	}
	if f.TopK != nil {
		if *f.TopK < -1 {
			return st, badRequest("top_k", "top_k is %d; it must be -1 or 0 (no limit) or a positive count", *f.TopK)
		}
		st.sample.TopK = max(*f.TopK, 0)
	}
	if f.Seed != nil {
		st.sample.Seed = uint64(*f.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		st.sample.Seed = binary.LittleEndian.Uint64(b[:])
	}
	stops, e := parseStop(f.Stop)
	if e != nil {
		return st, e
	}
	st.stop = stops
	st.stream = f.Stream
	if f.StreamOptions != nil {
		if !f.Stream {
			return st, badRequest("stream_options", "stream_options is only allowed with stream: true")
		}
		st.includeUsage = f.StreamOptions.IncludeUsage
	}
	st.returnIDs = f.ReturnTokenIDs
	st.timings = f.ReturnTimings
	st.ignoreEOS = f.IgnoreEOS
	if f.MinTokens != nil {
		if *f.MinTokens < 0 {
			return st, badRequest("min_tokens", "min_tokens is %d; it must not be negative", *f.MinTokens)
		}
		if st.maxTokens > 0 && *f.MinTokens > st.maxTokens {
			return st, badRequest("min_tokens", "min_tokens is %d, above %s %d", *f.MinTokens, param, st.maxTokens)
		}
		st.minTokens = *f.MinTokens
	}
	st.repetition = s.cfg.RepetitionStop
	if f.RepetitionStop != nil {
		st.repetition = *f.RepetitionStop
	}
	return st, nil
}

// unsupported refuses a field this server would otherwise ignore: tools and functions, logit
// bias, penalties, echo, best_of and suffix, when a request asks for them (their neutral values
// pass: null, {}, [], "none", 0, 1, "").
func unsupported(f *genFields) *apiError {
	set := func(raw json.RawMessage) bool {
		r := string(bytes.TrimSpace(raw))
		return r != "" && r != "null" && r != "{}" && r != "[]" && r != `"none"`
	}
	for _, x := range []struct {
		name string
		raw  json.RawMessage
		why  string
	}{
		{"tools", f.Tools, "tool calls"}, {"tool_choice", f.ToolChoice, "tool calls"},
		{"functions", f.Functions, "function calls"}, {"function_call", f.FunctionCall, "function calls"},
		{"logit_bias", f.LogitBias, "logit_bias"},
	} {
		if set(x.raw) {
			return badRequest(x.name, "%s: this server does not support %s; leave %s out", x.name, x.why, x.name)
		}
	}
	switch {
	case f.PresencePenalty != nil && *f.PresencePenalty != 0:
		return badRequest("presence_penalty", "presence_penalty is %g; this server applies no penalties, so it must be 0 or left out", *f.PresencePenalty)
	case f.FrequencyPenalty != nil && *f.FrequencyPenalty != 0:
		return badRequest("frequency_penalty", "frequency_penalty is %g; this server applies no penalties, so it must be 0 or left out", *f.FrequencyPenalty)
	case f.Echo:
		return badRequest("echo", "echo is not supported; the reply holds the completion only")
	case f.BestOf != nil && *f.BestOf != 1:
		return badRequest("best_of", "best_of is %d; this server returns one completion, so it must be 1", *f.BestOf)
	case f.Suffix != nil && *f.Suffix != "":
		return badRequest("suffix", "suffix is not supported; send the text after the insertion as part of the prompt")
	}
	return nil
}

// parseStop reads stop: null, a string or an array of strings.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop must be a string or an array of strings")
	}
	if len(many) > maxStops {
		return nil, badRequest("stop", "stop has %d strings; at most %d are allowed", len(many), maxStops)
	}
	var out []string
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// conversation turns OpenAI messages into the template's messages (image parts become
// {"type": "image"}) and the images' bytes in order.
func (s *Server) conversation(msgs []chatMessage) ([]byte, [][]byte, *apiError) {
	if len(msgs) == 0 {
		return nil, nil, badRequest("messages", "messages is empty; send at least one message")
	}
	var out []map[string]any
	var images [][]byte
	for i, m := range msgs {
		if m.Role == "" {
			return nil, nil, badRequest("messages", "messages[%d] has no role; use system, user or assistant", i)
		}
		content := bytes.TrimSpace(m.Content)
		var text string
		switch {
		case len(content) == 0 || string(content) == "null":
			out = append(out, map[string]any{"role": m.Role, "content": ""})
			continue
		case json.Unmarshal(content, &text) == nil:
			out = append(out, map[string]any{"role": m.Role, "content": text})
			continue
		}
		var parts []contentPart
		if err := json.Unmarshal(content, &parts); err != nil {
			return nil, nil, badRequest("messages", "messages[%d].content must be a string or an array of content parts", i)
		}
		var tparts []map[string]any
		for j, p := range parts {
			where := fmt.Sprintf("messages[%d].content[%d]", i, j)
			switch p.Type {
			case "text":
				if p.Text == nil {
					return nil, nil, badRequest("messages", "%s is a text part without a text string", where)
				}
				tparts = append(tparts, map[string]any{"type": "text", "text": *p.Text})
			case "image_url":
				if len(images) == s.cfg.MaxImages {
					return nil, nil, badRequest("messages", "the request has more than %d images; send at most %d", s.cfg.MaxImages, s.cfg.MaxImages)
				}
				data, e := s.imageData(len(images)+1, where, p.ImageURL)
				if e != nil {
					return nil, nil, e
				}
				images = append(images, data)
				tparts = append(tparts, map[string]any{"type": "image"})
			default:
				return nil, nil, badRequest("messages", "%s has type %q: content parts must be text or image_url; audio and video inputs are unsupported", where, p.Type)
			}
		}
		out = append(out, map[string]any{"role": m.Role, "content": tparts})
	}
	js, err := json.Marshal(out)
	if err != nil {
		return nil, nil, &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
	}
	return js, images, nil
}

// imageData reads an image_url part ({"url": ...} or a string): a data URL, or an http(s) URL
// when the server was started with image fetching allowed.
func (s *Server) imageData(index int, where string, raw json.RawMessage) ([]byte, *apiError) {
	url, ok := urlOf(raw)
	if !ok {
		return nil, badRequest("messages", "%s (image %d) needs image_url.url, a data URL such as data:image/png;base64,...", where, index)
	}
	return s.readURL(source{param: "messages", name: fmt.Sprintf("image %d", index), kinds: "images", example: "data:image/png;base64,...",
		accepts: func(mt string) bool { return strings.HasPrefix(mt, "image/") }, types: "an image/png, image/jpeg or image/webp data URL"}, url)
}

// urlOf reads a URL given as a string or as {"url": ...}.
func urlOf(raw json.RawMessage) (string, bool) {
	var url string
	if json.Unmarshal(raw, &url) == nil {
		return url, url != ""
	}
	var obj struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.URL == "" {
		return "", false
	}
	return obj.URL, true
}

// source names what a URL stands for in a request, for reading it and for its errors.
type source struct {
	param, name string // the request field, and the thing as a message names it ("image 2", "the document")
	kinds       string // what the server does not fetch unless allowed ("images", "documents")
	example     string // a data URL's start
	accepts     func(mediaType string) bool
	types       string // the media types accepted, for the message
}

// readURL returns the bytes a data URL holds, or those an http(s) URL serves when the server
// fetches URLs (--allow-image-urls).
func (s *Server) readURL(src source, url string) ([]byte, *apiError) {
	lower := strings.ToLower(url)
	if strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
		if !s.cfg.FetchImages {
			return nil, badRequest(src.param, "%s is an http(s) URL; this server does not fetch %s (start it with --allow-image-urls), send it inline as a data URL (%s)", src.name, src.kinds, src.example)
		}
		return s.fetch(src, url)
	}
	if !strings.HasPrefix(lower, "data:") {
		return nil, badRequest(src.param, "%s: the URL is not a data URL; send %s", src.name, src.example)
	}
	meta, payload, ok := strings.Cut(url[len("data:"):], ",")
	if !ok || !strings.HasSuffix(strings.ToLower(meta), ";base64") {
		return nil, badRequest(src.param, "%s: the data URL is not base64; send %s", src.name, src.example)
	}
	if mt := strings.ToLower(strings.TrimSuffix(meta, ";base64")); mt != "" && !src.accepts(mt) {
		return nil, badRequest(src.param, "%s has media type %q; send %s", src.name, mt, src.types)
	}
	payload = strings.TrimRight(payload, "=")
	data, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil {
		if data, err = base64.RawURLEncoding.DecodeString(payload); err != nil {
			return nil, badRequest(src.param, "%s: the data URL's base64 does not decode (%v)", src.name, err)
		}
	}
	return data, nil
}

// chatPrompt renders a chat request to token ids with its images' patches and identities, and
// the time its images took to decode and preprocess.
func (s *Server) chatPrompt(ld *loaded, msgs []chatMessage, kwargs json.RawMessage, addGen bool) (engine.Prompt, []string, engine.ImageTimes, *apiError) {
	conv, files, e := s.conversation(msgs)
	if e != nil {
		return engine.Prompt{}, nil, engine.ImageTimes{}, e
	}
	opts := chattemplate.Options{AddGenerationPrompt: addGen}
	if k := bytes.TrimSpace(kwargs); len(k) > 0 && string(k) != "null" {
		if k[0] != '{' {
			return engine.Prompt{}, nil, engine.ImageTimes{}, badRequest("chat_template_kwargs", "chat_template_kwargs must be an object")
		}
		opts.KwargsJSON = k
	}
	return s.prompt(ld, conv, files, opts)
}

// prompt renders a conversation (the template's messages) and its images' bytes to token ids
// with the images' patches and identities, and the time the images took.
func (s *Server) prompt(ld *loaded, conv []byte, files [][]byte, opts chattemplate.Options) (engine.Prompt, []string, engine.ImageTimes, *apiError) {
	pics, decode, err := ld.fe.Decode(files)
	if len(files) > 0 {
		s.metrics.imageDecode.Observe(decode.Seconds())
	}
	if err != nil {
		return engine.Prompt{}, nil, engine.ImageTimes{Decode: decode}, badRequest("messages", "%v", err)
	}
	p, keys, times, e := s.promptPictures(ld, conv, pics, opts)
	times.Decode = decode
	return p, keys, times, e
}

// promptPictures is prompt for images already decoded (a rendered page comes as pixels).
func (s *Server) promptPictures(ld *loaded, conv []byte, pics []*image.RGB, opts chattemplate.Options) (engine.Prompt, []string, engine.ImageTimes, *apiError) {
	imgs, times, err := ld.fe.TimedPictures(pics)
	if len(pics) > 0 {
		s.metrics.imagePreprocess.Observe(times.Preprocess.Seconds())
	}
	if err != nil {
		return engine.Prompt{}, nil, times, badRequest("messages", "%v", err)
	}
	p, _, err := ld.fe.Build(conv, imgs, ld.info.ImageToken, ld.info.Merge, opts)
	if len(imgs) > 1 { // the prompt holds a copy of every image's patches
		for _, im := range imgs {
			image.Release(im.Pixels)
		}
	}
	if tl := (*engine.TextTooLongError)(nil); errors.As(err, &tl) {
		return engine.Prompt{}, nil, times, &apiError{status: http.StatusBadRequest, param: "messages", code: "context_length_exceeded", msg: err.Error()}
	}
	if err != nil {
		return engine.Prompt{}, nil, times, badRequest("messages", "%v", err)
	}
	keys := make([]string, len(imgs))
	for i, im := range imgs {
		keys[i] = im.Hash
	}
	return p, keys, times, nil
}

// fetch downloads a URL, bounded in time and size.
func (s *Server) fetch(src source, url string) ([]byte, *apiError) {
	timeout := s.cfg.FetchTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	client := &http.Client{Timeout: timeout}
	resp, err := client.Get(url)
	if err != nil {
		return nil, badRequest(src.param, "%s could not be fetched: %v", src.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, badRequest(src.param, "%s could not be fetched: %s answered %s", src.name, url, resp.Status)
	}
	limit := s.cfg.MaxBody
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, badRequest(src.param, "%s could not be fetched: %v", src.name, err)
	}
	if int64(len(data)) > limit {
		return nil, badRequest(src.param, "%s at %s is over %d bytes; send a smaller one", src.name, url, limit)
	}
	return data, nil
}
