package serve

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// structuredSchemas are response_format schemas whose every value is bounded (strings by
// maxLength or enum, arrays by maxItems, integers by range), so that a reply of the random
// test model always completes within the test's max_tokens: nested objects, arrays of objects,
// enums, numbers, optional and required fields, references, alternatives.
var structuredSchemas = map[string]string{
	"person": `{"type": "object", "properties": {
		"name": {"type": "string", "maxLength": 6},
		"age": {"type": "integer", "minimum": 0, "maximum": 120},
		"score": {"type": "number", "minimum": 0},
		"tags": {"type": "array", "items": {"enum": ["go", "c", "py"]}, "maxItems": 3},
		"address": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 5}, "zip": {"type": "integer", "minimum": 10000, "maximum": 99999}}, "required": ["city"], "additionalProperties": false},
		"ok": {"type": "boolean"}},
		"required": ["name", "age", "ok"], "additionalProperties": false}`,
	"orders": `{"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "object", "properties": {
		"id": {"type": "integer", "minimum": 1, "maximum": 999},
		"status": {"enum": ["open", "paid", "void", null]},
		"lines": {"type": "array", "maxItems": 2, "items": {"type": "object", "properties": {"sku": {"type": "string", "minLength": 2, "maxLength": 4}, "qty": {"type": "integer", "minimum": 1, "maximum": 9}}, "required": ["sku", "qty"], "additionalProperties": false}}},
		"required": ["id", "status", "lines"], "additionalProperties": false}}`,
	"event": `{"$defs": {"when": {"type": "object", "properties": {"date": {"type": "string", "format": "date"}, "all_day": {"type": "boolean"}}, "required": ["date"], "additionalProperties": false}},
		"type": "object", "properties": {"title": {"type": ["string", "null"], "maxLength": 8}, "when": {"$ref": "#/$defs/when"},
		"kind": {"anyOf": [{"const": "meeting"}, {"type": "integer", "minimum": -5, "maximum": 5}]}}, "required": ["title", "when", "kind"], "additionalProperties": false}`,
	"answer": `{"type": "object", "properties": {"answer": {"enum": ["yes", "no", "maybe"]}, "confidence": {"type": "integer", "minimum": 0, "maximum": 100}}, "required": ["answer", "confidence"], "additionalProperties": false}`,
}

// validator compiles a schema with a JSON-Schema validator (draft 2020-12, formats asserted).
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

// checkJSON parses text with encoding/json (one value, nothing after it) and validates it.
func checkJSON(s *jsonschema.Schema, text string) error {
	d := json.NewDecoder(strings.NewReader(text))
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("encoding/json: %w", err)
	}
	if d.More() {
		return fmt.Errorf("encoding/json: more after the value")
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// isPrefix reports whether text is where the grammar can be after some tokens: a reply cut by
// max_tokens must still be the start of a sentence.
func isPrefix(g *grammar.Grammar, text string) bool {
	return g.NewMatcher(nil).AcceptBytes([]byte(text)) == nil
}

// TestStructuredOutput asks the random test model for replies in each schema's shape, many
// seeds each, through chat and text completions, streamed and not: every reply that finished
// with "stop" must parse with encoding/json and validate against its schema with a JSON-Schema
// validator, every reply cut by max_tokens must be a prefix of a sentence, and a streamed reply
// must equal the whole one of the same seed. The test reports how many stopped.
func TestStructuredOutput(t *testing.T) {
	_, ts := newServer(t, 4, 16, 512)
	const seeds = 24
	for name, schema := range structuredSchemas {
		v := validator(t, schema)
		text, err := grammar.FromJSONSchema([]byte(schema))
		require.NoError(t, err)
		g := grammar.MustParse(text)
		stopped := 0
		for seed := range seeds {
			chat := seed%2 == 0
			format := fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":%q,"schema":%s,"strict":true}}`, name, schema)
			body := fmt.Sprintf(`"max_tokens":400,"temperature":1,"top_k":0,"top_p":1,"min_p":0,"seed":%d,"response_format":%s`, seed, format)
			path := "/v1/completions"
			if chat {
				path = "/v1/chat/completions"
				body = `{"messages":[{"role":"user","content":"Reply in JSON."}],` + body + "}"
			} else {
				body = `{"prompt":"JSON: ",` + body + "}"
			}
			code, out := post(t, ts, path, body)
			require.Equal(t, 200, code, out)
			choice := out["choices"].([]any)[0].(map[string]any)
			reply, _ := choice["text"].(string)
			if chat {
				reply = choice["message"].(map[string]any)["content"].(string)
			}
			finish := choice["finish_reason"].(string)
			if finish == "stop" {
				stopped++
				require.NoError(t, checkJSON(v, reply), "%s seed %d: %q", name, seed, reply)
			} else {
				require.Equal(t, "length", finish)
				require.True(t, isPrefix(g, reply), "%s seed %d: the cut reply %q leaves the grammar", name, seed, reply)
			}
			if seed < 2 { // streamed: the same text and finish
				r, err := stream(t, ts, path, strings.Replace(body, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
				require.NoError(t, err)
				assert.Equal(t, reply, r.text, "%s seed %d streamed", name, seed)
				assert.Equal(t, finish, r.finish)
			}
		}
		assert.Positive(t, stopped, "%s: some replies complete", name)
		t.Logf("%s: %d of %d replies stopped at the end of the JSON, all valid", name, stopped, seeds)
	}
}

// TestJSONObject asks for response_format json_object: the replies that stop are JSON objects;
// the random model's strings are unbounded, so many run to max_tokens, each a prefix of one.
func TestJSONObject(t *testing.T) {
	_, ts := newServer(t, 2, 8, 512)
	g := grammar.MustParse(grammar.JSONObject)
	stopped := 0
	const seeds = 8
	for seed := range seeds {
		body := fmt.Sprintf(`{"prompt":"{","max_tokens":200,"temperature":1,"seed":%d,"response_format":{"type":"json_object"}}`, seed)
		code, out := post(t, ts, "/v1/completions", body)
		require.Equal(t, 200, code, out)
		choice := out["choices"].([]any)[0].(map[string]any)
		reply, finish := choice["text"].(string), choice["finish_reason"].(string)
		if finish == "stop" {
			stopped++
			var obj map[string]any
			require.NoError(t, json.Unmarshal([]byte(reply), &obj), "%q", reply)
		} else {
			require.True(t, isPrefix(g, reply), "%q", reply)
		}
		require.True(t, strings.HasPrefix(reply, "{"), "%q", reply)
	}
	t.Logf("json_object: %d of %d replies stopped (complete objects); the rest reached max_tokens", stopped, seeds)
}

// TestResponseFormatRefusals: what cannot be honoured is a 400 that names the response_format
// and, for a schema, the keyword.
func TestResponseFormatRefusals(t *testing.T) {
	_, ts := newServer(t, 1, 4, 128)
	for _, c := range []struct{ format, want string }{
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"^a+$"}}}`, `"pattern"`},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"n":{"type":"number","multipleOf":3}}}}}`, `"multipleOf" (at /properties/n/multipleOf)`},
		{`{"type":"json_schema","json_schema":{"name":"x"}}`, `"schema"`},
		{`{"type":"json_schema"}`, `"schema"`},
		{`{"type":"json_schema","json_schema":{"name":"x","schema":{"$ref":"#/$defs/none"}}}`, `"$ref"`},
		{`{"type":"xml"}`, `want text, json_object or json_schema`},
	} {
		code, out := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"response_format":`+c.format+`}`)
		require.Equal(t, 400, code, c.format)
		e := out["error"].(map[string]any)
		assert.Equal(t, "response_format", e["param"], c.format)
		assert.Contains(t, e["message"], c.want, c.format)
	}
	// "text" asks for nothing.
	code, out := post(t, ts, "/v1/completions", `{"prompt":"hi","max_tokens":2,"response_format":{"type":"text"}}`)
	assert.Equal(t, 200, code, out)
}

// TestOpenAIClientStructured asks for JSON through OpenAI's official Node client
// (testdata/openai-structured.js): response_format json_schema, whole and streamed, and
// json_object. What the client got must equal the server's replies to the same requests over
// plain HTTP, parse and validate; a schema the compiler refuses must arrive as the client's
// BadRequestError naming the keyword.
func TestOpenAIClientStructured(t *testing.T) {
	client := openaiClient(t)
	_, ts := newServer(t, 2, 8, 512)
	schema := structuredSchemas["answer"]
	stdout := client("testdata/openai-structured.js", ts.URL, schema)
	var got struct {
		Schema, SchemaStream, Object struct {
			Text, Finish string
			Parsed       any
		}
		Refused struct {
			Status         int
			Class, Message string
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)

	v := validator(t, schema)
	format := fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"answer","schema":%s,"strict":true}}`, schema)
	code, out := post(t, ts, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"Is it JSON?"}],"max_tokens":200,"temperature":0,"response_format":`+format+`}`)
	require.Equal(t, 200, code, out)
	want := out["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	assert.Equal(t, want, got.Schema.Text)
	assert.Equal(t, want, got.SchemaStream.Text, "streamed")
	for _, r := range []struct{ Text, Finish string }{{got.Schema.Text, got.Schema.Finish}, {got.SchemaStream.Text, got.SchemaStream.Finish}} {
		assert.Equal(t, "stop", r.Finish)
		assert.NoError(t, checkJSON(v, r.Text), r.Text)
	}
	assert.NotNil(t, got.Schema.Parsed, "the client's JSON.parse of the reply")
	if got.Object.Finish == "stop" {
		assert.IsType(t, map[string]any{}, got.Object.Parsed)
	} else {
		assert.True(t, isPrefix(grammar.MustParse(grammar.JSONObject), got.Object.Text), got.Object.Text)
	}
	assert.Equal(t, 400, got.Refused.Status)
	assert.Equal(t, "BadRequestError", got.Refused.Class)
	assert.Contains(t, got.Refused.Message, `"pattern"`)
}

// FuzzResponseFormat: no response_format makes the server panic; each is a grammar or a 400
// naming response_format.
func FuzzResponseFormat(f *testing.F) {
	for _, s := range structuredSchemas {
		f.Add(fmt.Sprintf(`{"type":"json_schema","json_schema":{"name":"x","schema":%s}}`, s))
	}
	f.Add(`{"type":"json_object"}`)
	f.Add(`{"type":"json_object","schema":{"type":"array","items":{"$ref":"#"}}}`)
	f.Add(`{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a"}}}`)
	f.Add(`{"type":"text"}`)
	f.Fuzz(func(t *testing.T, format string) {
		var r request
		if json.Unmarshal([]byte(`{"response_format":`+format+`}`), &r) != nil || r.ResponseFormat == nil {
			return
		}
		g, e := grammarOf(&r.ResponseFormat.responseFormat)
		if e != nil {
			if e.status != 400 || e.Param == nil || *e.Param != "response_format" {
				t.Fatalf("%s: %+v", format, e)
			}
			return
		}
		if g != nil {
			g.NewMatcher(nil).AcceptBytes([]byte(`{"a": 1}`))
		}
	})
}

// TestStructuredOutputLargeVocab serves a random model with llama.cpp's starcoder vocabulary
// (49152 tokens, SmolLM2's size and kind, with an end-of-text token) and asks for each schema
// with several seeds: every reply that stopped must validate, and the end token must come only
// where the JSON is complete (a bare number is complete after its first digit and may go on).
// It reports how many stopped and the time per generated token.
func TestStructuredOutputLargeVocab(t *testing.T) {
	_, ts := newServerOf(t, starcoderModel(t, 512), 2, 8, 512)

	schemas := map[string]string{"number": `{"type": "number"}`} // complete after a digit, yet it may go on: the end token decides
	for _, name := range []string{"answer", "person", "orders", "number"} {
		schema := structuredSchemas[name]
		if s, ok := schemas[name]; ok {
			schema = s
		}
		v := validator(t, schema)
		stopped, tokens := 0, 0
		start := time.Now()
		const seeds = 6
		for seed := range seeds {
			body := fmt.Sprintf(`{"prompt":"JSON:","max_tokens":300,"temperature":1,"top_k":0,"top_p":1,"min_p":0,"seed":%d,"response_format":{"type":"json_schema","json_schema":{"name":%q,"schema":%s}}}`, seed, name, schema)
			code, out := post(t, ts, "/v1/completions", body)
			require.Equal(t, 200, code, out)
			choice := out["choices"].([]any)[0].(map[string]any)
			reply, finish := choice["text"].(string), choice["finish_reason"].(string)
			tokens += int(out["usage"].(map[string]any)["completion_tokens"].(float64))
			if finish == "stop" {
				stopped++
				require.NoError(t, checkJSON(v, reply), "%s seed %d: %q", name, seed, reply)
			}
		}
		assert.Positive(t, stopped, name)
		t.Logf("%s: %d of %d replies stopped, all valid; %d tokens at %.2f ms a token (tiny model, mask included)",
			name, stopped, seeds, tokens, float64(time.Since(start).Microseconds())/1000/float64(max(tokens, 1)))
	}
}

// starcoderModel writes a random tiny model of context positions with llama.cpp's starcoder
// vocabulary (49152 tokens, SmolLM2's size and kind, with an end-of-text token), skipping the
// test where the vocabulary files are absent, and returns its path.
func starcoderModel(t *testing.T, context int) string {
	vocabPath := filepath.Join("../../../shared/testdata/vocab", "ggml-vocab-starcoder.gguf")
	if _, err := os.Stat(vocabPath); err != nil {
		t.Skipf("llama.cpp's vocabulary test files not found beside the checkout: %v", err)
	}
	f, err := gguffile.ReadFile(vocabPath)
	require.NoError(t, err)
	tok, err := tokenizer.FromGGUF(f.Get)
	require.NoError(t, err)
	c, err := config.LlamaPreset("tiny")
	require.NoError(t, err)
	c.Vocab, c.Context = tok.VocabSize(), context
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	var kvs []transformer.KV
	for _, kv := range tok.GGUF() {
		kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
	}
	path := filepath.Join(t.TempDir(), "starcoder-tiny.gguf")
	require.NoError(t, m.Save(path, kvs))
	return path
}
