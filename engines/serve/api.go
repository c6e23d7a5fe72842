package serve

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
)

// params checks the request's sampling fields over the defaults.
func (s *Server) params(r *request) (sample.Params, int, *apiError) {
	p := s.cfg.Defaults
	if r.N != nil && (*r.N < 1 || *r.N > maxChoices) {
		return p, 0, badRequest("n", "n = %d: want 1 to %d choices per request", *r.N, maxChoices)
	}
	if e := s.modelIs(r.Model); e != nil {
		return p, 0, e
	}
	maxTokens := 0
	for _, m := range []struct {
		name string
		v    *int
	}{{"max_tokens", r.MaxTokens}, {"max_completion_tokens", r.MaxCompletion}} {
		if m.v != nil {
			if *m.v <= 0 {
				return p, 0, badRequest(m.name, "%s = %d: want at least 1", m.name, *m.v)
			}
			maxTokens = *m.v
		}
	}
	if e := unsupported(r); e != nil {
		return p, 0, e
	}
	if len(r.LogitBias) > 0 {
		bias, e := s.logitBias(r.LogitBias)
		if e != nil {
			return p, 0, e
		}
		p.LogitBias = bias
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", r.FrequencyPenalty}, {"presence_penalty", r.PresencePenalty}} {
		if f.v != nil && !(*f.v >= -2 && *f.v <= 2) {
			return p, 0, badRequest(f.name, "%s %v: want a number in [-2, 2] (0 = off)", f.name, *f.v)
		}
	}
	// The overlay's seed and logit_bias are never set: the request's own fields of those names
	// take them from the JSON.
	r.SamplingOverlay.Apply((*config.Sampling)(&p))
	if r.RepetitionPenalty != nil {
		p.RepeatPenalty = *r.RepetitionPenalty
	}
	if r.Seed != nil {
		p.Seed = uint64(*r.Seed)
	}
	if math.IsNaN(p.RepeatPenalty) || p.RepeatPenalty <= 0 {
		return p, 0, badRequest("repetition_penalty", "repetition_penalty %v: want a number > 0 (1 = off)", p.RepeatPenalty)
	}
	if p.RepeatLastN < -1 {
		return p, 0, badRequest("repeat_last_n", "repeat_last_n %d: want >= -1", p.RepeatLastN)
	}
	if err := p.Validate(); err != nil {
		return p, 0, badRequest("", "%v", err)
	}
	return p, maxTokens, nil
}

// logprobsOf reads the log-probabilities a request asks for: chat's "logprobs": true with
// "top_logprobs" 0..20, or a text completion's "logprobs": N (0..20 alternatives; the chosen
// token's log-probability is reported with 0 too). on is false where they ask for none (absent,
// null, false).
func logprobsOf(r *request, chat bool) (on bool, top int, e *apiError) {
	limit := sample.MaxTopLogprobs
	if chat {
		switch r.Logprobs {
		case nil, false, 0.0:
		case true:
			on = true
		default:
			return false, 0, badRequest("logprobs", "field \"logprobs\": want true or false (top_logprobs says how many alternatives)")
		}
		if r.TopLogprobs != nil {
			if *r.TopLogprobs < 0 || *r.TopLogprobs > limit {
				return false, 0, badRequest("top_logprobs", "top_logprobs = %d: want 0 to %d", *r.TopLogprobs, limit)
			}
			if *r.TopLogprobs > 0 && !on {
				return false, 0, badRequest("top_logprobs", "top_logprobs = %d needs \"logprobs\": true", *r.TopLogprobs)
			}
			top = *r.TopLogprobs
		}
		return on, top, nil
	}
	if r.TopLogprobs != nil && *r.TopLogprobs != 0 {
		return false, 0, badRequest("top_logprobs", "top_logprobs is chat's; a text completion asks with \"logprobs\": N")
	}
	switch v := r.Logprobs.(type) {
	case nil:
		return false, 0, nil
	case bool:
		if !v {
			return false, 0, nil
		}
	case float64:
		if v == math.Trunc(v) && v >= 0 && v <= float64(limit) {
			if r.Echo {
				return false, 0, badRequest("logprobs", "logprobs with echo: the prompt's log-probabilities are not computed")
			}
			return true, int(v), nil
		}
	}
	return false, 0, badRequest("logprobs", "field \"logprobs\": want an integer 0 to %d (the alternatives reported per token)", limit)
}

// unsupported refuses the fields of OpenAI's API that ask for what toy does not do (the
// legacy function calling that tools replace, several candidates to choose among, insertion),
// rather than answer as if they had been honoured; the values that ask for nothing (null, no
// functions, "none", one candidate, no suffix) pass, as clients send them.
func unsupported(r *request) *apiError {
	if e := noneOf("functions", r.Functions, "[]"); e != nil {
		return e
	}
	if e := noneOf("function_call", r.FunctionCall, `"none"`, `"auto"`); e != nil {
		return e
	}
	if r.BestOf != nil && *r.BestOf != 1 {
		return badRequest("best_of", "best_of = %d: only one candidate per request", *r.BestOf)
	}
	if r.Suffix != nil && *r.Suffix != "" {
		return badRequest("suffix", "suffix is not supported: a completion continues its prompt, it does not fill in before a suffix")
	}
	return nil
}

// jsonObject is the grammar of response_format json_object, compiled once.
var jsonObject = sync.OnceValue(func() *grammar.Grammar { return grammar.MustParse(grammar.JSONObject) })

// grammarOf is the grammar a request's response_format constrains the reply to, nil for none
// ("text" or absent). A schema the compiler cannot handle is refused with the keyword it names.
func grammarOf(f *responseFormat) (*grammar.Grammar, *apiError) {
	if f == nil {
		return nil, nil
	}
	var schema json.RawMessage
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		if len(f.Schema) == 0 || bytes.Equal(f.Schema, []byte("null")) {
			return jsonObject(), nil
		}
		schema = f.Schema
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 || bytes.Equal(f.JSONSchema.Schema, []byte("null")) {
			return nil, badRequest("response_format", "response_format json_schema: \"json_schema\": {\"name\": ..., \"schema\": {...}} is required")
		}
		schema = f.JSONSchema.Schema
	default:
		return nil, badRequest("response_format", "response_format type %q: want text, json_object or json_schema", f.Type)
	}
	g, err := grammar.CompileJSONSchema(schema)
	if err != nil {
		return nil, badRequest("response_format", "response_format: %v", err)
	}
	return g, nil
}

// noneOf refuses the function-calling field name's JSON value v unless it is absent, null or
// one of the values that ask for nothing (compared without blanks).
func noneOf(name string, v json.RawMessage, nothing ...string) *apiError {
	var c bytes.Buffer
	if len(v) == 0 || json.Compact(&c, v) != nil { // absent; a malformed body failed to decode before
		return nil
	}
	t := c.String()
	if t == "null" || slices.Contains(nothing, t) {
		return nil
	}
	if len(t) > 40 {
		t = t[:40] + "…"
	}
	return badRequest(name, "%s %s: the legacy function calling is not supported; offer \"tools\" (chat completions)", name, t)
}

// logitBias reads OpenAI's logit_bias: token ids of the model's vocabulary (the JSON object's
// keys) and biases in [-100, 100].
func (s *Server) logitBias(m map[string]float64) (map[int32]float64, *apiError) {
	vocab := math.MaxInt32
	if s.cfg.Model != nil {
		vocab = s.cfg.Model.Arch.Vocab
	}
	out := make(map[int32]float64, len(m))
	for k, b := range m {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id >= vocab {
			return nil, badRequest("logit_bias", "logit_bias: token %q: want a token id in [0, %d)", k, vocab)
		}
		if !(math.Abs(b) <= sample.MaxLogitBias) {
			return nil, badRequest("logit_bias", "logit_bias: token %d: bias %v, want a number in [-%d, %d]", id, b, sample.MaxLogitBias, sample.MaxLogitBias)
		}
		out[int32(id)] = b
	}
	return out, nil
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.counted("chat", s.keyed(s.completion(true))))
	mux.HandleFunc("/v1/completions", s.counted("completions", s.keyed(s.completion(false))))
	mux.HandleFunc("/v1/embeddings", s.counted("embeddings", s.keyed(s.embeddings)))
	mux.HandleFunc("/v1/models", s.counted("models", s.keyed(s.models)))
	mux.HandleFunc("/v1/models/{id...}", s.counted("models", s.keyed(s.modelByID)))
	mux.HandleFunc("/health", s.health)
	mux.HandleFunc("/metrics", s.metrics.serve)
	mux.HandleFunc("/", s.counted("other", s.page))
	return mux
}

// keyed lets a request through h when the server has no API keys or it presents one as
// "Authorization: Bearer KEY" (the scheme in any case, as RFC 7235 has it: "bearer KEY" too);
// otherwise 401 invalid_api_key, as OpenAI answers.
func (s *Server) keyed(h http.HandlerFunc) http.HandlerFunc {
	if len(s.cfg.APIKeys) == 0 {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		ok := strings.EqualFold(scheme, "Bearer")
		found := 0
		for _, k := range s.cfg.APIKeys {
			found |= subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(k))
		}
		if !ok || found == 0 {
			w.Header().Set("WWW-Authenticate", "Bearer")
			writeError(w, &apiError{status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
				Message: "a missing or wrong API key: send it as \"Authorization: Bearer KEY\" (the key toy serve was started with, -api-key or -api-key-file)"})
			return
		}
		h(w, r)
	}
}

// counted counts the requests of an endpoint by status, and turns a panic into a 500 (never
// a crash).
func (s *Server) counted(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw, start := &statusWriter{ResponseWriter: w}, time.Now()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				fmt.Fprintf(s.cfg.Log, "toy serve: %s %s: panic: %s\n", r.Method, logField(r.URL.Path), logText(fmt.Sprint(v)))
				if sw.status == 0 {
					writeError(sw, &apiError{status: 500, Type: "server_error", Message: "internal error"})
				}
			}
			s.metrics.request(endpoint, sw.status)
			if s.cfg.LogRequests {
				note := sw.note
				if note != "" {
					note = ": " + logText(note)
				}
				// The method is an HTTP token (the server refuses others); the path and the
				// note may hold anything a client sent.
				fmt.Fprintf(s.cfg.Log, "toy serve: %s %s %d in %v%s\n", r.Method, logField(r.URL.Path), sw.status, time.Since(start).Round(time.Millisecond), note)
			}
		}()
		h(sw, r)
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	if !methodIs(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": []any{s.model()}})
}

// model is the served model as OpenAI's API describes one.
func (s *Server) model() map[string]any {
	return map[string]any{"id": s.cfg.ModelName, "object": "model", "created": s.created, "owned_by": "toy"}
}

// modelByID answers GET /v1/models/{id} (the openai packages' models.retrieve): the served
// model, or 404 model_not_found.
func (s *Server) modelByID(w http.ResponseWriter, r *http.Request) {
	if !methodIs(w, r, http.MethodGet) {
		return
	}
	if id := r.PathValue("id"); id != s.cfg.ModelName {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Message: fmt.Sprintf("the model %q does not exist; this server serves %q", id, s.cfg.ModelName)})
		return
	}
	writeJSON(w, 200, s.model())
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "shutting down"})
		return
	}
	info := map[string]any{"status": "ok", "model": s.cfg.ModelName, "slots": s.dec.Slots(),
		"slot_context": s.dec.SlotContext(), "busy": s.metrics.busy.Load(), "queued": s.metrics.queued.Load()}
	for k, v := range s.cfg.Info {
		info[k] = v
	}
	writeJSON(w, 200, info)
}

// completion handles /v1/chat/completions (chat) and /v1/completions.
func (s *Server) completion(chat bool) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if !methodIs(w, req, http.MethodPost) {
			return
		}
		if !s.reserve() {
			refuseBusy(w)
			return
		}
		release := sync.OnceFunc(func() { s.preparing.Add(-1) })
		defer release()
		var r request
		if e := decode(w, req, &r, s.bodyBound); e != nil {
			writeError(w, e)
			return
		}
		p, maxTokens, e := s.params(&r)
		if e != nil {
			writeError(w, e)
			return
		}
		text, parseSpecial := "", false
		var stops []string
		var tools *toolUse // the functions a chat reply may call (nil: none)
		if chat {
			if r.Messages == nil {
				writeError(w, badRequest("messages", "\"messages\" is required"))
				return
			}
			if s.cfg.Template == nil {
				writeError(w, badRequest("messages", "the model has no chat template (start the server with -template); use /v1/completions"))
				return
			}
			msgs, e := messagesOf(*r.Messages)
			if e != nil {
				writeError(w, e)
				return
			}
			if tools, e = toolsOf(&r, s.cfg.Template); e != nil {
				writeError(w, e)
				return
			}
			o := sample.RenderOptions{AddGenerationPrompt: true}
			if tools != nil {
				o.Tools = tools.raw
			}
			var err error
			if text, err = s.cfg.Template.Render(msgs, o); err != nil {
				writeError(w, badRequest("messages", "%v", err))
				return
			}
			parseSpecial = true
			stops = s.cfg.Template.StopStrings()
		} else {
			if e := cmp.Or(noneOf("tools", r.Tools, "[]"), noneOf("tool_choice", r.ToolChoice, `"none"`, `"auto"`)); e != nil {
				e.Message = fmt.Sprintf("%s: a text completion calls no functions; offer tools to /v1/chat/completions", *e.Param)
				writeError(w, e)
				return
			}
			var e *apiError
			if text, e = promptOf(r.Prompt); e != nil {
				writeError(w, e)
				return
			}
		}
		userStops, e := stopsOf(r.Stop)
		if e != nil {
			writeError(w, e)
			return
		}
		for _, st := range userStops {
			if st != "" {
				stops = append(stops, st)
			}
		}
		param := "messages"
		if !chat {
			param = "prompt"
		}
		if e := s.fits(text, param); e != nil {
			writeError(w, e)
			return
		}
		ids := s.tok.Encode(text, tokenizer.EncodeOptions{ParseSpecial: parseSpecial})
		if s.cfg.AddBOS && s.tok.BOS() >= 0 {
			ids = append([]int32{s.tok.BOS()}, ids...)
		}
		var format *responseFormat
		if r.ResponseFormat != nil {
			format = &r.ResponseFormat.responseFormat
		}
		g, e := grammarOf(format)
		if e != nil {
			writeError(w, e)
			return
		}
		if tools != nil {
			g = tools.grammar // toolsOf refused a response_format beside it
		}
		logprobs, topLogprobs, e := logprobsOf(&r, chat)
		if e != nil {
			writeError(w, e)
			return
		}
		n := 1
		if r.N != nil {
			n = *r.N
		}
		// Each choice is a job of its own; with a seed, choice i draws with seed+i, so that a
		// request with a seed is reproducible and its choice i is what n = 1 with seed+i gives.
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel() // a choice still running when the reply ends (the client went away) frees its slot
		jobs := make([]*job, n)
		for i := range jobs {
			pi := p
			pi.Seed += uint64(i)
			j, e := s.newJob(ctx, ids, pi, r.Seed != nil, maxTokens, slices.Clone(stops))
			if e != nil {
				if !chat && e.Param != nil && *e.Param == "messages" {
					e.Param = strPtr("prompt")
				}
				writeError(w, e)
				return
			}
			j.grammar = g
			if logprobs {
				j.logprobs, j.topLogprobs = true, topLogprobs
				j.events = make(chan event, 2*j.maxTokens+2) // a log-probability event per token besides its text
			}
			jobs[i] = j
		}
		for i, j := range jobs {
			if i > 0 && !s.reserve() { // the first holds the place reserved above
				cancel()
				refuseBusy(w)
				return
			}
			err := s.submit(j)
			if i == 0 {
				release() // queued, and counted there, or refused
			} else {
				s.preparing.Add(-1)
			}
			if err != nil {
				cancel() // the choices queued end at once
				if errors.Is(err, errQueueFull) {
					refuseBusy(w)
				} else {
					writeError(w, &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Message: err.Error()})
				}
				return
			}
		}
		out := &responder{w: w, chat: chat, model: s.cfg.ModelName, id: newID(chat), created: time.Now().Unix(),
			usage: r.StreamOptions != nil && r.StreamOptions.IncludeUsage, start: time.Now(), logprobs: logprobs, tools: tools}
		if !chat && r.Echo {
			out.echo = text
		}
		if r.Stream {
			out.stream(jobs)
		} else {
			out.whole(jobs)
		}
	}
}

var idCounter atomicCounter

func newID(chat bool) string {
	if chat {
		return fmt.Sprintf("chatcmpl-toy%d", idCounter.next())
	}
	return fmt.Sprintf("cmpl-toy%d", idCounter.next())
}

// responder writes one request's reply.
type responder struct {
	w           http.ResponseWriter
	chat, usage bool
	model, id   string
	echo        string
	created     int64
	// start is when the request was queued and first when its first text came (the request
	// log's).
	start, first time.Time
	// logprobs reports each token's log-probabilities (logprobsOf).
	logprobs bool
	// tools, when not nil, reads each chat choice's text into content and tool calls.
	tools *toolUse
}

// noteUsage is the request log's account of a finished reply.
func (o *responder) noteUsage(e event) {
	first := ""
	if !o.first.IsZero() {
		first = fmt.Sprintf(", first text after %v", o.first.Sub(o.start).Round(time.Millisecond))
	}
	noteOn(o.w, "prompt tokens %d (cached %d), generated %d, finish %s%s", e.promptTokens, e.cachedTokens, e.completionTokens, e.finish, first)
}

func usageOf(e event) map[string]any {
	return map[string]any{"prompt_tokens": e.promptTokens, "completion_tokens": e.completionTokens, "total_tokens": e.promptTokens + e.completionTokens,
		"prompt_tokens_details": map[string]int{"cached_tokens": e.cachedTokens}}
}

// jsonLogprobs is the "logprobs" of a choice holding entries: null without log-probabilities.
func (o *responder) jsonLogprobs(entries []placedLogprob) any {
	if !o.logprobs {
		return nil
	}
	if o.chat {
		return chatLogprobs(entries)
	}
	return completionLogprobs(entries)
}

// usageOfAll is the usage of n choices: the prompt counted once (its cached tokens those of
// the first choice), the completion tokens of every choice.
func usageOfAll(choices []*choiceState) map[string]any { return usageOf(finalOfAll(choices)) }

// whole waits for the end of every choice and writes one JSON reply.
func (o *responder) whole(jobs []*job) {
	choices := make([]*choiceState, len(jobs))
	var out []any
	for i, j := range jobs {
		c := &choiceState{}
		choices[i] = c
		for e := range j.events {
			if !e.done {
				if o.first.IsZero() && e.text != "" {
					o.first = time.Now()
				}
				c.add(e)
				continue
			}
			if e.err != nil {
				if j.ctx.Err() == nil {
					writeError(o.w, errorOf(e.err))
				} else {
					noteOn(o.w, "the client went away")
				}
				return
			}
			c.final = e
			break
		}
		text := o.echo + string(c.text)
		lps := o.jsonLogprobs(c.release())
		if o.chat && o.tools != nil {
			sc := newCallScanner(o.tools)
			content, calls := sc.feed(text)
			content += sc.finish()
			message := map[string]any{"role": "assistant", "content": content}
			finish := c.final.finish
			if len(calls) > 0 {
				message["tool_calls"] = jsonToolCalls(o.id, i, calls)
				if content == "" {
					message["content"] = nil
				}
				if finish == "stop" {
					finish = "tool_calls"
				}
			}
			out = append(out, map[string]any{"index": i, "message": message, "finish_reason": finish, "logprobs": lps})
		} else if o.chat {
			out = append(out, map[string]any{"index": i, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": c.final.finish, "logprobs": lps})
		} else {
			out = append(out, map[string]any{"index": i, "text": text, "finish_reason": c.final.finish, "logprobs": lps})
		}
	}
	o.noteUsage(finalOfAll(choices))
	writeJSON(o.w, 200, map[string]any{"id": o.id, "object": o.object(false), "created": o.created, "model": o.model,
		"choices": out, "usage": usageOfAll(choices)})
}

func (o *responder) object(chunk bool) string {
	switch {
	case o.chat && chunk:
		return "chat.completion.chunk"
	case o.chat:
		return "chat.completion"
	}
	return "text_completion"
}

// stream writes server-sent events: one chunk per piece of text of each choice (with the
// log-probabilities of its tokens when asked), each choice's finish reason, optionally the
// usage, and "data: [DONE]".
func (o *responder) stream(jobs []*job) {
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	o.w.WriteHeader(200)
	flusher, _ := o.w.(http.Flusher)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(o.w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	chunk := func(index int, text string, finish any, lps []placedLogprob) map[string]any {
		var choice map[string]any
		var logprobs any
		if len(lps) > 0 {
			logprobs = o.jsonLogprobs(lps)
		}
		if o.chat {
			delta := map[string]any{}
			if text != "" || finish == nil {
				delta["content"] = text
			}
			choice = map[string]any{"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
		} else {
			choice = map[string]any{"index": index, "text": text, "finish_reason": finish, "logprobs": logprobs}
		}
		return map[string]any{"id": o.id, "object": o.object(true), "created": o.created, "model": o.model, "choices": []any{choice}}
	}
	for i := range jobs {
		if o.chat {
			first := chunk(i, "", nil, nil)
			first["choices"].([]any)[0].(map[string]any)["delta"] = map[string]any{"role": "assistant", "content": ""}
			if !send(first) {
				return
			}
		} else if o.echo != "" && !send(chunk(i, o.echo, nil, nil)) {
			return
		}
	}
	// The choices' events, merged in the order they come.
	type indexed struct {
		i int
		e event
	}
	merged, quit := make(chan indexed), make(chan struct{})
	defer close(quit)
	for i, j := range jobs {
		go func() {
			for e := range j.events {
				select {
				case merged <- indexed{i, e}:
				case <-quit:
					return
				}
				if e.done {
					return
				}
			}
		}()
	}
	choices := make([]*choiceState, len(jobs))
	for i := range choices {
		choices[i] = &choiceState{}
	}
	var scanners []*callScanner // each chat choice's reader of tool calls (o.tools)
	if o.chat && o.tools != nil {
		for range jobs {
			scanners = append(scanners, newCallScanner(o.tools))
		}
	}
	// sendTools sends what choice i's scanner makes of text: its content, then each call it
	// completed as OpenAI streams one (a chunk of its id, type and name, then one of its
	// arguments); the log-probabilities of the tokens so far go with the first chunk, if any.
	sendTools := func(i int, text string, c *choiceState) bool {
		sc := scanners[i]
		content, calls := sc.feed(text)
		if content == "" && len(calls) == 0 {
			return true // held back: the log-probabilities wait for the next chunk
		}
		lps := c.release()
		if content != "" {
			if !send(chunk(i, content, nil, lps)) {
				return false
			}
			lps = nil
		}
		from := len(sc.calls) - len(calls)
		for k, call := range calls {
			n := from + k
			head := map[string]any{"index": n, "id": callID(o.id, i, n), "type": "function",
				"function": map[string]any{"name": call.name, "arguments": ""}}
			args := map[string]any{"index": n, "function": map[string]any{"arguments": call.arguments}}
			for _, d := range []map[string]any{head, args} {
				ch := chunk(i, "", nil, lps)
				lps = nil
				ch["choices"].([]any)[0].(map[string]any)["delta"] = map[string]any{"tool_calls": []any{d}}
				if !send(ch) {
					return false
				}
			}
		}
		return true
	}
	for left := len(jobs); left > 0; {
		m := <-merged
		c, e := choices[m.i], m.e
		if !e.done {
			if o.first.IsZero() && e.text != "" {
				o.first = time.Now()
			}
			c.add(e)
			if e.text == "" {
				continue // a token's log-probabilities, sent with the text they belong to
			}
			if scanners != nil {
				if !sendTools(m.i, e.text, c) {
					noteOn(o.w, "the client went away")
					return
				}
				continue
			}
			if !send(chunk(m.i, e.text, nil, c.release())) {
				noteOn(o.w, "the client went away")
				return // the client went away: the scheduler frees the slots at its next step
			}
			continue
		}
		if e.err != nil {
			if jobs[m.i].ctx.Err() == nil {
				noteOn(o.w, "%v", e.err)
				send(map[string]any{"error": errorOf(e.err)})
			} else {
				noteOn(o.w, "the client went away")
			}
			return
		}
		c.final, c.done = e, true
		left--
		finish := e.finish
		if scanners != nil {
			sc := scanners[m.i]
			if rest := sc.finish(); rest != "" {
				send(chunk(m.i, rest, nil, nil))
			}
			if len(sc.calls) > 0 && finish == "stop" {
				finish = "tool_calls"
			}
		}
		send(chunk(m.i, "", finish, c.release()))
	}
	o.noteUsage(finalOfAll(choices))
	if o.usage {
		send(map[string]any{"id": o.id, "object": o.object(true), "created": o.created, "model": o.model, "choices": []any{}, "usage": usageOfAll(choices)})
	}
	fmt.Fprint(o.w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}
