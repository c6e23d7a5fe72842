package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// modelPath is a tiny random llama model with a trained byte-level tokenizer (no special
// tokens, so no end of text: replies run to max_tokens or a stop string), written once.
var modelPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toy-serve-test")
	if err != nil {
		panic(err)
	}
	modelPath, err = writeModel(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func writeModel(dir string) (string, error) { return writeModelSeeded(dir, "tiny.gguf", 0) }

// writeModelSeeded writes the test model to dir/name, its weights drawn from seed (0: the
// preset's).
func writeModelSeeded(dir, name string, seed int) (string, error) {
	return writeModelWith(dir, name, seed, 512, tokenizer.TrainOptions{Special: []string{}})
}

// writeModelWith writes the test model of context positions with a tokenizer trained with opts
// (its special tokens, its EOS) to dir/name, its weights drawn from seed (0: the preset's).
func writeModelWith(dir, name string, seed, context int, opts tokenizer.TrainOptions) (string, error) {
	text := strings.Repeat("func main() { return nil }\nif err != nil { return err }\nHello, world! ", 40)
	tok, err := tokenizer.Train(slices.Values([][]byte{[]byte(text)}), 300, opts)
	if err != nil {
		return "", err
	}
	c, err := config.LlamaPreset("tiny")
	if err != nil {
		return "", err
	}
	c.Vocab, c.Context = tok.VocabSize(), context
	if seed != 0 {
		c.Seed = seed
	}
	be, err := ggml.NewCPUBackend(1)
	if err != nil {
		return "", err
	}
	defer be.Close()
	m, err := training.New(c, be)
	if err != nil {
		return "", err
	}
	defer m.Close()
	if err := m.Init(); err != nil {
		return "", err
	}
	var kvs []transformer.KV
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
	}
	path := filepath.Join(dir, name)
	return path, m.Save(path, kvs)
}

// newServer serves the test model with parallel slots of slotCtx positions on loopback; each
// of configure may change the server's Config.
func newServer(t testing.TB, parallel, queue, slotCtx int, configure ...func(*Config)) (*Server, *httptest.Server) {
	return newServerOf(t, modelPath, parallel, queue, slotCtx, configure...)
}

// newServerOf is newServer of the model at path.
func newServerOf(t testing.TB, path string, parallel, queue, slotCtx int, configure ...func(*Config)) (*Server, *httptest.Server) {
	m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	require.NoError(t, err)
	dec, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: parallel, SlotContext: slotCtx, Batch: 64})
	require.NoError(t, err)
	tmpl, err := sample.TemplateByName("chatml")
	require.NoError(t, err)
	cfg := Config{Model: m, Decoder: dec, Tokenizer: tok, ModelName: "tiny", Template: &tmpl,
		Defaults: sample.DefaultParams(), Queue: queue, Info: map[string]any{"kernel_entry": "none (test)"}}
	for _, c := range configure {
		c(&cfg)
	}
	s, err := New(cfg)
	require.NoError(t, err)
	ts := httptest.NewServer(s.Handler()) // 127.0.0.1
	t.Cleanup(func() {
		ts.Close()
		s.Close()
		dec.Close()
		m.Close()
	})
	return s, ts
}

func post(t testing.TB, ts *httptest.Server, path, body string) (int, map[string]any) {
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	return resp.StatusCode, out
}

// streamResult is what one streamed request gave.
type streamResult struct {
	text, finish string
	ttft         time.Duration
	done         bool
	usage        map[string]any
}

func stream(t testing.TB, ts *httptest.Server, path, body string) (streamResult, error) {
	start := time.Now()
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		return streamResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return streamResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		return streamResult{}, fmt.Errorf("content type %q", ct)
	}
	var r streamResult
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return r, fmt.Errorf("not an event: %q", line)
		}
		if data == "[DONE]" {
			r.done = true
			continue
		}
		var c struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
				Delta        struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
			Error any            `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return r, err
		}
		if c.Error != nil {
			return r, fmt.Errorf("error event: %v", c.Error)
		}
		if c.Usage != nil {
			r.usage = c.Usage
		}
		for _, ch := range c.Choices {
			piece := ch.Text + ch.Delta.Content
			if piece != "" && r.ttft == 0 {
				r.ttft = time.Since(start)
			}
			r.text += piece
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
	}
	return r, sc.Err()
}

func TestEndpoints(t *testing.T) {
	_, ts := newServer(t, 2, 8, 256)

	code, out := post(t, ts, "/v1/completions", `{"model":"tiny","prompt":"func main","max_tokens":6,"temperature":0}`)
	require.Equal(t, 200, code, out)
	assert.Equal(t, "text_completion", out["object"])
	ch := out["choices"].([]any)[0].(map[string]any)
	assert.Equal(t, "length", ch["finish_reason"])
	usage := out["usage"].(map[string]any)
	assert.Equal(t, 6.0, usage["completion_tokens"])
	assert.Greater(t, usage["prompt_tokens"], 0.0)
	text := ch["text"].(string)

	// The same request streamed gives the same text.
	r, err := stream(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":6,"temperature":0,"stream":true,"stream_options":{"include_usage":true}}`)
	require.NoError(t, err)
	assert.True(t, r.done)
	assert.Equal(t, text, r.text)
	assert.Equal(t, "length", r.finish)
	assert.Equal(t, 6.0, r.usage["completion_tokens"])

	// A stop string taken from the greedy reply ends it there, with finish_reason stop.
	if len(text) > 2 {
		stop, _ := json.Marshal(text[1:2])
		code, out = post(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":6,"temperature":0,"stop":[`+string(stop)+`]}`)
		require.Equal(t, 200, code)
		ch = out["choices"].([]any)[0].(map[string]any)
		assert.Equal(t, "stop", ch["finish_reason"])
		assert.Equal(t, text[:1], ch["text"])
	}

	code, out = post(t, ts, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello"}]}],"max_tokens":5,"seed":3,"temperature":0.7,"top_k":20,"top_p":0.9,"min_p":0.01,"repetition_penalty":1.1}`)
	require.Equal(t, 200, code, out)
	assert.Equal(t, "chat.completion", out["object"])
	msg := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	assert.Equal(t, "assistant", msg["role"])
	// A seed repeats a sampled reply.
	code, out2 := post(t, ts, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":5,"seed":3,"temperature":0.7,"top_k":20,"top_p":0.9,"min_p":0.01,"repetition_penalty":1.1}`)
	require.Equal(t, 200, code)
	assert.Equal(t, msg["content"], out2["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"])

	r, err = stream(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":4,"stream":true}`)
	require.NoError(t, err)
	assert.True(t, r.done)
	assert.Equal(t, "length", r.finish)

	resp, err := http.Get(ts.URL + "/v1/models")
	require.NoError(t, err)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&models))
	resp.Body.Close()
	assert.Equal(t, "tiny", models.Data[0].ID)
	for path, status := range map[string]int{"/v1/models/tiny": 200, "/v1/models/gpt-4": 404, "/v1/models/org/tiny": 404} {
		resp, err := http.Get(ts.URL + path)
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&m))
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, path)
		if status == 200 {
			assert.Equal(t, map[string]any{"id": "tiny", "object": "model", "created": m["created"], "owned_by": "toy"}, m)
		} else {
			assert.Equal(t, "model_not_found", m["error"].(map[string]any)["code"], path)
		}
	}

	resp, err = http.Get(ts.URL + "/health")
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, "ok", h["status"])
	assert.Equal(t, "none (test)", h["kernel_entry"])

	metrics := metricsText(t, ts)
	for _, want := range []string{`toy_requests_total{endpoint="completions",code="200"} 3`, "toy_queue_depth 0",
		"toy_time_to_first_token_seconds_count 6", "toy_generation_tokens_per_second ", "toy_generated_tokens_total "} {
		assert.Contains(t, metrics, want)
	}

	resp, err = http.Get(ts.URL + "/")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, string(b), "/v1/chat/completions")
}

// TestFront: before Ready, /health and the API answer 503.
func TestFront(t *testing.T) {
	var f Front
	ts := httptest.NewServer(&f)
	defer ts.Close()
	for _, p := range []string{"/health", "/v1/models"} {
		resp, err := http.Get(ts.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 503, resp.StatusCode, p)
	}
	f.Ready(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	resp, err := http.Get(ts.URL + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 204, resp.StatusCode)
}

// TestBadRequests sends a corpus of bad requests: each gets its 4xx in OpenAI's error shape,
// and the server stays healthy.
func TestBadRequests(t *testing.T) {
	_, ts := newServer(t, 1, 4, 64)
	long := strings.Repeat("func main() { return nil } ", 40)
	cases := []struct {
		method, path, body string
		status             int
	}{
		{"POST", "/v1/chat/completions", `{`, 400},
		{"POST", "/v1/chat/completions", ``, 400},
		{"POST", "/v1/chat/completions", `[]`, 400},
		{"POST", "/v1/chat/completions", `"hello"`, 400},
		{"POST", "/v1/chat/completions", `{"messages":"hi"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":5}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"hi"}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[]}`, 400},
		{"POST", "/v1/chat/completions", `{}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":0}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":-5}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":"ten"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1.5}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":-1}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_p":0}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_p":1.5}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_k":-1}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":17}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":0}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"stop":7}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"seed":"x"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"frequency_penalty":2.5}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"presence_penalty":-3}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"presence_penalty":"x"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"repetition_penalty":0}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":3}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","logprobs":true}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","logprobs":21}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","logprobs":2,"echo":true}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","top_logprobs":2}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":3}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f g"}}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tools":"f"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"required"}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json"}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a"}}}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{}}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"abc":1}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"-1":1}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"99999999":1}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"5":150}}`, 400},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logit_bias":{"5":"up"}}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","best_of":3}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","suffix":"end"}`, 400},
		{"POST", "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}]}`, 404},
		{"POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400},
		{"POST", "/v1/completions", `{"prompt":"` + long + `"}`, 400},
		{"POST", "/v1/completions", `{"prompt":""}`, 400},
		{"POST", "/v1/completions", `{}`, 400},
		{"POST", "/v1/completions", `{"prompt":["a","b"]}`, 400},
		{"POST", "/v1/completions", `{"prompt":{"text":"a"}}`, 400},
		{"POST", "/v1/completions", `{"prompt":"hi","max_tokens":null,"min_p":"low"}`, 400},
		{"POST", "/v1/completions", "{\"prompt\":\"hi\xff\",", 400},
		{"GET", "/v1/completions", ``, 405},
		{"GET", "/v1/chat/completions", ``, 405},
		{"POST", "/v1/models", `{}`, 405},
		{"GET", "/v1/nothing", ``, 404},
		{"POST", "/v1/completions", `{"prompt":"` + strings.Repeat("x", maxBody) + `"}`, 413},
	}
	require.GreaterOrEqual(t, len(cases), 20)
	for _, c := range cases {
		name := c.body
		if len(name) > 60 {
			name = name[:60]
		}
		req, err := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, name)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, c.status, resp.StatusCode, "%s %s %s: %s", c.method, c.path, name, b)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if assert.NoError(t, json.Unmarshal(b, &e), "%s: %s", name, b) {
			assert.NotEmpty(t, e.Error.Message, name)
			assert.NotEmpty(t, e.Error.Type, name)
		}
		resp, err = http.Get(ts.URL + "/health")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "healthy after %s", name)
	}
	// And it still serves.
	code, out := post(t, ts, "/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	assert.Equal(t, 200, code, out)
}

// prompts are distinct greedy requests.
func prompts(n int) []string {
	var out []string
	words := []string{"func", "main", "return", "nil", "err", "if", "Hello", "world"}
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, strings.Repeat(words[i%8]+" ", 1+i/8)+words[(i*3)%8], 8+i%5))
	}
	return out
}

// metricsText is the server's /metrics page.
func metricsText(t testing.TB, ts *httptest.Server) string {
	resp, err := http.Get(ts.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func completionText(t testing.TB, ts *httptest.Server, body string) string {
	code, out := post(t, ts, "/v1/completions", body)
	require.Equal(t, 200, code, out)
	return out["choices"].([]any)[0].(map[string]any)["text"].(string)
}

// TestBatchingChangesNothing: 16 concurrent greedy requests give what the same requests give
// one at a time (BatchDecoder's logits equal the lone Decoder's within 1e-4 of their scale,
// TestBatchDecoderMatchesDecoder; greedy choices do not move).
func TestBatchingChangesNothing(t *testing.T) {
	_, ts := newServer(t, 4, 16, 128)
	ps := prompts(16)
	alone := make([]string, len(ps))
	for i, p := range ps {
		alone[i] = completionText(t, ts, p)
	}
	together := make([]string, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			together[i] = completionText(t, ts, p)
		}()
	}
	wg.Wait()
	assert.Equal(t, alone, together)
}

// TestPromptCache: a request reuses the keys and values that its prompt's prefix left in a free
// slot (a conversation's previous turn, the same prompt again), reports them as cached tokens,
// and replies what a server without the cache replies.
func TestPromptCache(t *testing.T) {
	s, ts := newServer(t, 2, 8, 256)
	_, plain := newServer(t, 2, 8, 256, func(c *Config) { c.NoPromptCache = true })
	ask := func(ts *httptest.Server, prompt string) (reply string, promptTokens, cached int) {
		body, err := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 8, "temperature": 0})
		require.NoError(t, err)
		code, out := post(t, ts, "/v1/completions", string(body))
		require.Equal(t, 200, code, out)
		usage := out["usage"].(map[string]any)
		details := usage["prompt_tokens_details"].(map[string]any)
		return out["choices"].([]any)[0].(map[string]any)["text"].(string), int(usage["prompt_tokens"].(float64)), int(details["cached_tokens"].(float64))
	}
	encode := func(p string) []int32 { return s.tok.Encode(p, tokenizer.EncodeOptions{}) }

	first := "func main() { if err != nil {"
	reply, n, cached := ask(ts, first)
	assert.Equal(t, len(encode(first)), n)
	assert.Zero(t, cached, "nothing to reuse yet")
	// An unrelated prompt takes the other slot, the one whose cache is older (empty here),
	// and leaves the first request's cache alone.
	_, _, cached = ask(ts, "Hello, world!")
	assert.Zero(t, cached)

	// The conversation's next turn starts with the first prompt and its reply.
	next := first + reply + " return err }"
	got, n, cached := ask(ts, next)
	require.Equal(t, len(encode(next)), n)
	assert.GreaterOrEqual(t, cached, decoding.CommonPrefix(encode(first), encode(next)), "at least the first prompt's tokens")
	assert.Less(t, cached, n)
	want, _, plainCached := ask(plain, next)
	assert.Zero(t, plainCached)
	assert.Equal(t, want, got, "the reply with the cached prefix")

	// The same prompt again reuses all but its last token, whose logits give the reply.
	again, n, cached := ask(ts, next)
	assert.Equal(t, n-1, cached)
	assert.Equal(t, want, again)

	assert.Regexp(t, `toy_prompt_tokens_cached_total [1-9]`, metricsText(t, ts))
}

// TestPlace: a prompt takes the free slot with the longest cached prefix (among equals the one
// freed longest ago), and copies a longer prefix from any other slot, running or free, when
// that saves at least minSharedPrefix positions; at least its last token is computed.
func TestPlace(t *testing.T) {
	seq := func(s string) []int32 {
		out := make([]int32, len(s))
		for i, c := range s {
			out[i] = int32(c)
		}
		return out
	}
	ids := seq("system: be brief. user: hello")
	for _, c := range []struct {
		name  string
		cells []string
		free  []bool
		freed []int64
		cache bool
		want  placement
	}{
		{"the slot with the longest prefix", []string{"system: be", "system: be brief. user: bye", "xyz"}, []bool{true, true, true}, []int64{3, 2, 1}, true,
			placement{slot: 1, reuse: 24, donor: -1, shared: 24}},
		{"equal prefixes: the slot freed longest ago", []string{"abc", "", "q"}, []bool{true, true, true}, []int64{1, 3, 2}, true,
			placement{slot: 0, reuse: 0, donor: -1, shared: 0}},
		{"a running slot's longer prefix is copied", []string{"system: be brief. user: hi", "sys", ""}, []bool{false, true, true}, []int64{0, 2, 1}, true,
			placement{slot: 1, reuse: 3, donor: 0, shared: 25}},
		{"the same prompt: all but the last token", []string{"", string(seq("system: be brief. user: hello"))}, []bool{true, false}, []int64{1, 0}, true,
			placement{slot: 0, reuse: 0, donor: 1, shared: len(ids) - 1}},
		{"too short a gain to copy", []string{"system: be brief. user: hi", "system: be brief. user"}, []bool{false, true}, []int64{0, 1}, true,
			placement{slot: 1, reuse: 22, donor: -1, shared: 22}},
		{"without cache nothing is reused", []string{"system: be brief. user: hi", ""}, []bool{false, true}, []int64{0, 1}, false,
			placement{slot: 1, reuse: 0, donor: -1, shared: 0}},
		{"no free slot", []string{"a", "b"}, []bool{false, false}, []int64{0, 0}, true,
			placement{slot: -1, donor: -1}},
	} {
		cells := make([][]int32, len(c.cells))
		for i, s := range c.cells {
			cells[i] = seq(s)
		}
		assert.Equal(t, c.want, place(ids, cells, c.free, c.freed, c.cache), c.name)
	}
}

// TestSharedPrefix: a request whose prompt extends a running request's takes another slot with
// that prompt's keys and values copied, and replies as a server without a cache does.
func TestSharedPrefix(t *testing.T) {
	s, ts := newServer(t, 2, 8, 256)
	_, plain := newServer(t, 2, 8, 256, func(c *Config) { c.NoPromptCache = true })
	long := strings.Repeat("func main() { if err != nil { return err } } ", 3)
	second := long + "Hello, world!"
	body := func(prompt string, n int, stream bool) string {
		b, err := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": n, "temperature": 0, "stream": stream})
		require.NoError(t, err)
		return string(b)
	}
	want := completionText(t, plain, body(second, 8, false))
	shared := decoding.CommonPrefix(s.tok.Encode(long, tokenizer.EncodeOptions{}), s.tok.Encode(second, tokenizer.EncodeOptions{}))
	// The first request must still be running when the second arrives: it streams 200 tokens,
	// and the second is sent after its first. Should it end first all the same (a very slow
	// machine), the second reuses its free slot instead, and the scenario runs again.
	for attempt := 0; attempt < 3 && s.metrics.sharedTokens.Load() == 0; attempt++ {
		resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body(long, 200, true)))
		require.NoError(t, err)
		r := bufio.NewReader(resp.Body)
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			if strings.HasPrefix(line, "data: ") {
				break
			}
		}
		code, out := post(t, ts, "/v1/completions", body(second, 8, false))
		require.Equal(t, 200, code, out)
		assert.Equal(t, want, out["choices"].([]any)[0].(map[string]any)["text"], "attempt %d", attempt)
		details := out["usage"].(map[string]any)["prompt_tokens_details"].(map[string]any)
		assert.GreaterOrEqual(t, int(details["cached_tokens"].(float64)), shared, "attempt %d", attempt)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	assert.GreaterOrEqual(t, s.metrics.sharedTokens.Load(), int64(shared), "a running request's prompt was copied")
	assert.Regexp(t, `toy_prompt_tokens_shared_total [1-9]`, metricsText(t, ts))
}

// TestPenaltiesReachTheSampler: OpenAI's frequency and presence penalties and llama.cpp's
// repetition penalty in a request become the sampler's parameters, and a greedy request with
// them is served (the sampler's own test checks what they do to the logits).
func TestPenaltiesReachTheSampler(t *testing.T) {
	s, ts := newServer(t, 1, 4, 128)
	var r request
	require.NoError(t, json.Unmarshal([]byte(`{"prompt":"x","frequency_penalty":0.75,"presence_penalty":-1.5,"repetition_penalty":1.2,"repeat_last_n":16}`), &r))
	p, _, apiErr := s.params(&r)
	require.Nil(t, apiErr)
	assert.Equal(t, 0.75, p.FrequencyPenalty)
	assert.Equal(t, -1.5, p.PresencePenalty)
	assert.Equal(t, 1.2, p.RepeatPenalty)
	assert.Equal(t, 16, p.RepeatLastN)
	code, out := post(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":6,"temperature":0,"frequency_penalty":2,"presence_penalty":2}`)
	require.Equal(t, 200, code, out)
	assert.Equal(t, 6.0, out["usage"].(map[string]any)["completion_tokens"])
}

// TestLogitBias: logit_bias reaches the sampler, a bias of +100 makes a greedy completion
// repeat its token, and the fields of features toy lacks pass when they ask for nothing.
func TestLogitBias(t *testing.T) {
	s, ts := newServer(t, 1, 4, 128)
	var r request
	require.NoError(t, json.Unmarshal([]byte(`{"prompt":"x","logit_bias":{"7":-100,"12":2.5}}`), &r))
	p, _, apiErr := s.params(&r)
	require.Nil(t, apiErr)
	assert.Equal(t, map[int32]float64{7: -100, 12: 2.5}, p.LogitBias)

	tok := s.cfg.Tokenizer
	ids := tok.Encode("main", tokenizer.EncodeOptions{})
	require.NotEmpty(t, ids)
	x := ids[0]
	want, err := tok.Decode([]int32{x, x, x, x, x}, tokenizer.DecodeOptions{})
	require.NoError(t, err)
	plain := completionText(t, ts, `{"prompt":"func main","max_tokens":5,"temperature":0}`)
	biased := completionText(t, ts, fmt.Sprintf(`{"prompt":"func main","max_tokens":5,"temperature":0,"logit_bias":{"%d":100}}`, x))
	assert.Equal(t, want, biased, "token %d (%q) five times", x, tok.Token(x))
	assert.NotEqual(t, plain, biased, "the random model's greedy reply is not that token five times")

	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tools":[],"tool_choice":"none","functions":null,"response_format":{"type":"text"},"logprobs":false,"top_logprobs":0,"logit_bias":{}}`,
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"tool_choice":"auto","function_call":"none","tools":[ ` + "\n" + ` ]}`,
	} {
		code, out := post(t, ts, "/v1/chat/completions", body)
		assert.Equal(t, 200, code, "%s: %v", body, out)
	}
	code, out := post(t, ts, "/v1/completions", `{"prompt":"hi","max_tokens":2,"best_of":1,"suffix":""}`)
	assert.Equal(t, 200, code, out)
}

// TestAPIKeys: with keys, the API answers only requests that present one as a bearer token
// (401 invalid_api_key otherwise, in OpenAI's shape); /health, /metrics and the page need none.
func TestAPIKeys(t *testing.T) {
	var cfg Config
	_, ts := newServer(t, 1, 4, 128, func(c *Config) { c.APIKeys = []string{"first-key", "second"}; cfg = *c })
	do := func(method, path, auth, body string) (int, string) {
		req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	completion := `{"prompt":"hi","max_tokens":2}`
	for _, c := range []struct {
		method, path, auth, body string
		status                   int
	}{
		{"POST", "/v1/completions", "", completion, 401},
		{"POST", "/v1/completions", "Bearer wrong", completion, 401},
		{"POST", "/v1/completions", "Bearer first-key-and-more", completion, 401},
		{"POST", "/v1/completions", "first-key", completion, 401},
		{"POST", "/v1/completions", "Basic Zmlyc3Qta2V5", completion, 401},
		{"POST", "/v1/chat/completions", "", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, 401},
		{"GET", "/v1/models", "", "", 401},
		{"GET", "/v1/models/tiny", "", "", 401},
		{"POST", "/v1/completions", "Bearer first-key", completion, 200},
		{"POST", "/v1/completions", "Bearer second", completion, 200},
		{"GET", "/v1/models", "Bearer second", "", 200},
		{"GET", "/health", "", "", 200},
		{"GET", "/metrics", "", "", 200},
		{"GET", "/", "", "", 200},
	} {
		code, body := do(c.method, c.path, c.auth, c.body)
		assert.Equal(t, c.status, code, "%s %s with %q: %s", c.method, c.path, c.auth, body)
		if c.status == 401 {
			assert.Contains(t, body, `"code":"invalid_api_key"`)
		}
	}
	cfg.APIKeys = []string{"first-key", ""}
	_, err := New(cfg)
	assert.ErrorContains(t, err, "empty API key")
}

// logBuffer is a Log that handlers may write to at once.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRequestLog: with LogRequests, each request to the API ends with a line saying what it
// got: the reply's tokens, or the error's message.
func TestRequestLog(t *testing.T) {
	var log logBuffer
	_, ts := newServer(t, 1, 4, 128, func(c *Config) { c.LogRequests, c.Log = true, &log })
	code, out := post(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":3,"temperature":0}`)
	require.Equal(t, 200, code, out)
	_, err := stream(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,"temperature":0}`)
	require.NoError(t, err)
	code, _ = post(t, ts, "/v1/completions", `{"prompt":"x","max_tokens":0}`)
	require.Equal(t, 400, code)
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	require.Len(t, lines, 3, log.String())
	assert.Regexp(t, `^toy serve: POST /v1/completions 200 in \S+: prompt tokens \d+ \(cached 0\), generated 3, finish length(, first text after \S+)?$`, lines[0])
	assert.Regexp(t, `^toy serve: POST /v1/chat/completions 200 in \S+: prompt tokens \d+ \(cached 0\), generated 2, finish length(, first text after \S+)?$`, lines[1])
	assert.Regexp(t, `^toy serve: POST /v1/completions 400 in \S+: max_tokens = 0: want at least 1$`, lines[2])
}

// TestLoad: 64 streamed requests from 16 concurrent clients on loopback, bounded in count and
// time; every one completes with its own reply.
func TestLoad(t *testing.T) {
	s, ts := newServer(t, 8, 64, 128)
	ps := prompts(8)
	want := make([]string, len(ps))
	for i, p := range ps {
		want[i] = completionText(t, ts, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const total, clients = 64, 16
	var mu sync.Mutex
	var ttfts []time.Duration
	next := 0
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= total {
					return
				}
				body := strings.Replace(ps[i%len(ps)], `"temperature":0`, `"temperature":0,"stream":true`, 1)
				r, err := stream(t, ts, "/v1/completions", body)
				if !assert.NoError(t, err, "request %d", i) {
					continue
				}
				assert.True(t, r.done, "request %d", i)
				assert.Equal(t, want[i%len(ps)], r.text, "request %d got another's reply", i)
				mu.Lock()
				ttfts = append(ttfts, r.ttft)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.NoError(t, ctx.Err())
	require.Len(t, ttfts, total)
	sort.Slice(ttfts, func(i, j int) bool { return ttfts[i] < ttfts[j] })
	t.Logf("%d streamed requests from %d clients in %v: time to first token p50 %v, p99 %v",
		total, clients, time.Since(start).Round(time.Millisecond), ttfts[total/2], ttfts[total*99/100])
	idle(t, s)
}

// idle waits until the server has no busy slot and nothing queued: a slot is released just
// after its reply's last byte, which the client may read first.
func idle(t *testing.T, s *Server) {
	t.Helper()
	assert.Eventually(t, func() bool { return s.metrics.busy.Load() == 0 && s.metrics.queued.Load() == 0 },
		10*time.Second, 5*time.Millisecond, "busy %d, queued %d", s.metrics.busy.Load(), s.metrics.queued.Load())
}

// TestQueueFull: with the queue full, a request is refused with 429. The server here has no
// scheduler running, so that nothing leaves the queue.
func TestQueueFull(t *testing.T) {
	s, _ := newServer(t, 1, 1, 64)
	q := &Server{cfg: s.cfg, dec: s.dec, tok: s.tok, queue: make(chan *job, 1)}
	q.metrics.init(1)
	require.NoError(t, q.submit(&job{ctx: context.Background(), ids: []int32{1}}))
	w := httptest.NewRecorder()
	q.Handler().ServeHTTP(w, httptest.NewRequest("POST", "/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":2}`)))
	assert.Equal(t, 429, w.Code, w.Body.String())
	assert.Equal(t, "1", w.Header().Get("Retry-After"))
	assert.Contains(t, w.Body.String(), `"type":"rate_limit_exceeded"`)
}

// TestDisconnect: a client that goes away frees its slot.
func TestDisconnect(t *testing.T) {
	s, ts := newServer(t, 1, 4, 512)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"hi","max_tokens":500,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	cancel()
	resp.Body.Close()
	completionText(t, ts, `{"prompt":"hi","max_tokens":1}`) // needs the only slot
	t.Logf("cancelled requests: %d", s.metrics.cancelled.Load())
	idle(t, s)
}

// TestDrain: Drain lets a running request finish, then refuses new ones (503).
func TestDrain(t *testing.T) {
	s, ts := newServer(t, 2, 4, 512)
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":400,"stream":true}`))
	require.NoError(t, err)
	defer resp.Body.Close()
	rd := bufio.NewReader(resp.Body)
	_, err = rd.ReadString('\n') // running
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.Drain(ctx)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	assert.Contains(t, string(rest), `"finish_reason":"length"`)
	assert.True(t, strings.HasSuffix(string(rest), "data: [DONE]\n\n"))
	code, out := post(t, ts, "/v1/completions", `{"prompt":"hi","max_tokens":2}`)
	assert.Equal(t, 503, code, out)
}
