package server

import (
	"bytes"
	"encoding/json"
	"net/http"

	"tfc/runtime/engine"
)

// defaultCompletionTokens is OpenAI's max_tokens default for text completions.
const defaultCompletionTokens = 16

func (s *Server) chat(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError {
	var req chatRequest
	if e := decode(body, &req); e != nil {
		return e
	}
	set, e := s.settings(&req.genFields)
	if e != nil {
		return e
	}
	if req.Messages == nil {
		return badRequest("messages", "messages is required: an array of {\"role\", \"content\"} objects")
	}
	p, keys, times, e := s.chatPrompt(ld, req.Messages, req.ChatTemplateKwargs, true)
	if e != nil {
		return e
	}
	return s.generate(w, r, ld, &job{chat: true, prompt: p, imageKeys: keys, set: set, defMax: s.cfg.MaxTokens, images: times})
}

type completionRequest struct {
	genFields
	Prompt json.RawMessage `json:"prompt"`
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError {
	var req completionRequest
	if e := decode(body, &req); e != nil {
		return e
	}
	set, e := s.settings(&req.genFields)
	if e != nil {
		return e
	}
	ids, e := s.promptIDs(ld, req.Prompt)
	if e != nil {
		return e
	}
	return s.generate(w, r, ld, &job{prompt: engine.Prompt{IDs: ids}, set: set, defMax: defaultCompletionTokens})
}

// promptIDs reads a text completion prompt: a string, an array of token ids, or an array of one of either.
// tooLong refuses a text longer than the context can hold, before encoding it.
func tooLong(ld *loaded, param, text string) *apiError {
	if m := ld.fe.MaxTextBytes; m > 0 && len(text) > m {
		return &apiError{status: http.StatusBadRequest, param: param, code: "context_length_exceeded",
			msg: (&engine.TextTooLongError{Bytes: len(text), Limit: m}).Error()}
	}
	return nil
}

func (s *Server) promptIDs(ld *loaded, raw json.RawMessage) ([]int32, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("prompt", "prompt is required: a string or an array of token ids")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		if text == "" {
			return nil, badRequest("prompt", "prompt is empty")
		}
		if e := tooLong(ld, "prompt", text); e != nil {
			return nil, e
		}
		return toInt32(ld.fe.Tok.Encode(text)), nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil {
		return s.checkIDs(ld, "prompt", ids)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
		if len(list) > 1 {
			return nil, badRequest("prompt", "prompt holds %d prompts; send one per request", len(list))
		}
		return s.promptIDs(ld, list[0])
	}
	return nil, badRequest("prompt", "prompt must be a string or an array of token ids")
}

func (s *Server) checkIDs(ld *loaded, param string, ids []int64) ([]int32, *apiError) {
	if len(ids) == 0 {
		return nil, badRequest(param, "%s is empty", param)
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= int64(ld.info.Vocab) {
			return nil, badRequest(param, "%s[%d] is %d, outside the vocabulary of %d tokens", param, i, id, ld.info.Vocab)
		}
		out[i] = int32(id)
	}
	return out, nil
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}

type tokenizeRequest struct {
	Model               string          `json:"model"`
	Prompt              *string         `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	ChatTemplateKwargs  json.RawMessage `json:"chat_template_kwargs"`
}

// tokenize answers with the ids of a text prompt, or of a chat rendered by the template with its images expanded.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError {
	var req tokenizeRequest
	if e := decode(body, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	var ids []int32
	switch {
	case req.Prompt != nil && req.Messages != nil:
		return badRequest("prompt", "send either prompt or messages, not both")
	case req.Prompt != nil:
		if e := tooLong(ld, "prompt", *req.Prompt); e != nil {
			return e
		}
		ids = toInt32(ld.fe.Tok.Encode(*req.Prompt))
	case req.Messages != nil:
		add := req.AddGenerationPrompt == nil || *req.AddGenerationPrompt
		p, _, _, e := s.chatPrompt(ld, req.Messages, req.ChatTemplateKwargs, add)
		if e != nil {
			return e
		}
		ids = p.IDs
	default:
		return badRequest("prompt", "send prompt (a string) or messages (a chat)")
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": ld.lanes.Config().Context, "tokens": nonNil(ids)})
	return nil
}

type detokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

func (s *Server) detokenize(w http.ResponseWriter, r *http.Request, ld *loaded, body []byte) *apiError {
	var req detokenizeRequest
	if e := decode(body, &req); e != nil {
		return e
	}
	if e := s.checkModel(req.Model); e != nil {
		return e
	}
	if req.Tokens == nil {
		return badRequest("tokens", "tokens is required: an array of token ids")
	}
	ids := make([]int, len(req.Tokens))
	for i, id := range req.Tokens {
		if id < 0 || id >= int64(ld.info.Vocab) {
			return badRequest("tokens", "tokens[%d] is %d, outside the vocabulary of %d tokens", i, id, ld.info.Vocab)
		}
		ids[i] = int(id)
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": ld.fe.Tok.Decode(ids, false)})
	return nil
}
