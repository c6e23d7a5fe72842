package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// toolParameters are the parameters of the test functions, every value bounded so that a call
// of the random test model completes within the tests' max_tokens: strings, enums, integers and
// numbers, arrays, required and optional fields; "now" takes none.
var toolParameters = map[string]string{
	"get_weather": `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}`,
	"add":         `{"type": "object", "properties": {"a": {"type": "integer", "minimum": -99, "maximum": 99}, "b": {"type": "number", "minimum": 0}}, "required": ["a", "b"], "additionalProperties": false}`,
	"tag":         `{"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3}, "ok": {"type": "boolean"}}, "required": ["tags"], "additionalProperties": false}`,
	"now":         ``,
}

// toolsJSON is the "tools" array offering the named functions of toolParameters.
func toolsJSON(names ...string) string {
	var tools []string
	for _, n := range names {
		params := ""
		if p := toolParameters[n]; p != "" {
			params = `, "parameters": ` + p
		}
		tools = append(tools, fmt.Sprintf(`{"type": "function", "function": {"name": %q, "description": "the %s function"%s}}`, n, n, params))
	}
	return "[" + strings.Join(tools, ", ") + "]"
}

// toolValidators are JSON-Schema validators of each function's arguments.
func toolValidators(t *testing.T) map[string]*jsonschema.Schema {
	v := map[string]*jsonschema.Schema{}
	for name, p := range toolParameters {
		if p == "" {
			p = `{"type": "object", "additionalProperties": false}`
		}
		v[name] = validator(t, p)
	}
	return v
}

// chatModel writes the test model with ChatML's markers as special tokens, <|im_end|> its end
// of text, and 2048 positions (room for the offer of tools), and returns its path.
func chatModel(t *testing.T) string {
	path, err := writeModelWith(t.TempDir(), "chat.gguf", 0, 2048, tokenizer.TrainOptions{Special: []string{"<|im_start|>", "<|im_end|>"}, EOS: "<|im_end|>"})
	require.NoError(t, err)
	return path
}

// gotCall is a tool call of a reply.
type gotCall struct{ ID, Type, Name, Arguments string }

// chatReply is what a chat reply's first choice said.
type chatReply struct {
	content *string
	calls   []gotCall
	finish  string
	usage   map[string]any
}

// wholeReply posts a chat request and reads its first choice.
func wholeReply(t *testing.T, ts *httptest.Server, body string) chatReply {
	t.Helper()
	code, out := post(t, ts, "/v1/chat/completions", body)
	require.Equal(t, 200, code, out)
	var r struct {
		Choices []struct {
			Message struct {
				Role      string  `json:"role"`
				Content   *string `json:"content"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Type     string `json:"type"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage map[string]any `json:"usage"`
	}
	b, _ := json.Marshal(out)
	require.NoError(t, json.Unmarshal(b, &r))
	require.Len(t, r.Choices, 1)
	c := r.Choices[0]
	assert.Equal(t, "assistant", c.Message.Role)
	reply := chatReply{content: c.Message.Content, finish: c.FinishReason, usage: r.Usage}
	for _, call := range c.Message.ToolCalls {
		reply.calls = append(reply.calls, gotCall{ID: call.ID, Type: call.Type, Name: call.Function.Name, Arguments: call.Function.Arguments})
	}
	return reply
}

// streamedReply posts a chat request with "stream": true and puts the first choice's deltas
// back together as a client does: the content pieces one after another, each tool call's id,
// type and name from the chunks of its index and its arguments the concatenation of theirs.
func streamedReply(t *testing.T, ts *httptest.Server, body string) chatReply {
	t.Helper()
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(strings.Replace(body, "{", `{"stream":true,`, 1)))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var r chatReply
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			require.Empty(t, sc.Text())
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    *int    `json:"index"`
						ID       *string `json:"id"`
						Type     *string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error any `json:"error"`
		}
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		require.Nil(t, c.Error)
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				content.WriteString(*ch.Delta.Content)
			}
			for _, d := range ch.Delta.ToolCalls {
				require.NotNil(t, d.Index, data)
				if *d.Index == len(r.calls) {
					r.calls = append(r.calls, gotCall{})
				}
				require.Less(t, *d.Index, len(r.calls), "calls are numbered in order: %s", data)
				call := &r.calls[*d.Index]
				if d.ID != nil {
					call.ID = *d.ID
				}
				if d.Type != nil {
					call.Type = *d.Type
				}
				if d.Function.Name != nil {
					call.Name += *d.Function.Name
				}
				if d.Function.Arguments != nil {
					call.Arguments += *d.Function.Arguments
				}
			}
			if ch.FinishReason != nil {
				r.finish = *ch.FinishReason
			}
		}
	}
	require.NoError(t, sc.Err())
	require.True(t, done, "data: [DONE]")
	if s := content.String(); s != "" || len(r.calls) == 0 {
		r.content = &s
	}
	return r
}

// sameReply requires a streamed reply to say what the whole one said: content, calls (but
// their ids, each reply's own) and finish.
func sameReply(t *testing.T, whole, streamed chatReply, what string) {
	t.Helper()
	require.Equal(t, whole.content, streamed.content, what)
	require.Equal(t, whole.finish, streamed.finish, what)
	require.Len(t, streamed.calls, len(whole.calls), what)
	for k := range whole.calls {
		w, s := whole.calls[k], streamed.calls[k]
		require.NotEmpty(t, s.ID, what)
		w.ID, s.ID = "", ""
		require.Equal(t, w, s, what)
	}
}

// checkCalls requires every call to be in OpenAI's shape, each id its own, naming a function
// offered, with arguments (a string) that parse and validate against its parameters.
func checkCalls(t *testing.T, validators map[string]*jsonschema.Schema, offered []string, calls []gotCall, what string) {
	t.Helper()
	ids := map[string]bool{}
	for _, c := range calls {
		require.NotEmpty(t, c.ID, what)
		require.False(t, ids[c.ID], "%s: the id %s twice", what, c.ID)
		ids[c.ID] = true
		require.Equal(t, "function", c.Type, what)
		require.Contains(t, offered, c.Name, what)
		require.NoError(t, checkJSON(validators[c.Name], c.Arguments), "%s: %s(%s)", what, c.Name, c.Arguments)
	}
}

// TestToolCallsRequired asks the random chat model for calls with tool_choice "required" and
// a named function, parallel calls allowed or not, many seeds each: every reply that finished
// must be tool calls alone (content null, finish_reason tool_calls) of the functions offered
// (the named one) whose arguments parse and validate with a JSON-Schema validator; one call
// at most without parallel_tool_calls. The streamed reply of a seed, its deltas put back
// together, must equal the whole one. It reports the calls per reply.
func TestToolCallsRequired(t *testing.T) {
	_, ts := newServerOf(t, chatModel(t), 2, 16, 2048)
	validators := toolValidators(t)
	offered := []string{"get_weather", "add", "tag", "now"}
	tools := toolsJSON(offered...)
	const seeds = 24
	for _, choice := range []string{`"required"`, `{"type": "function", "function": {"name": "add"}}`, `{"type": "function", "function": {"name": "now"}}`} {
		perReply := map[int]int{}
		for seed := range seeds {
			parallel := seed%2 == 0
			body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Call a tool."}], "tools": %s, "tool_choice": %s, "parallel_tool_calls": %v,
				"max_tokens": 600, "temperature": 1, "top_k": 0, "top_p": 1, "min_p": 0, "seed": %d}`, tools, choice, parallel, seed)
			what := fmt.Sprintf("tool_choice %s, seed %d", choice, seed)
			r := wholeReply(t, ts, body)
			require.Equal(t, "tool_calls", r.finish, "%s: %+v %q", what, r, deref(r.content))
			require.Nil(t, r.content, what)
			require.NotEmpty(t, r.calls, what)
			names := offered
			if choice[0] == '{' {
				var c struct{ Function struct{ Name string } }
				require.NoError(t, json.Unmarshal([]byte(choice), &c))
				names = []string{c.Function.Name}
			}
			checkCalls(t, validators, names, r.calls, what)
			if !parallel {
				require.Len(t, r.calls, 1, what)
			}
			perReply[len(r.calls)]++
			if seed < 6 {
				sameReply(t, r, streamedReply(t, ts, body), what+" streamed")
			}
		}
		t.Logf("tool_choice %s: %d replies, all valid calls; replies by number of calls: %v", choice, seeds, perReply)
	}
}

// TestToolCallsAuto offers tools with tool_choice auto (and absent, its default): the random
// model writes text (it never starts a call on its own), which comes as content with finish
// stop or length and no calls, the same streamed; the prompt is the template's rendering of
// the conversation with the tools offered.
func TestToolCallsAuto(t *testing.T) {
	var tok *tokenizer.Tokenizer
	var tmpl *sample.Template
	_, ts := newServerOf(t, chatModel(t), 2, 16, 2048, func(c *Config) { tok, tmpl = c.Tokenizer, c.Template })
	tools := toolsJSON("get_weather", "add")
	var raw []json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(tools), &raw))
	prompt, err := tmpl.Render([]sample.Message{{Role: "user", Content: "Weather?"}}, sample.RenderOptions{AddGenerationPrompt: true, Tools: raw})
	require.NoError(t, err)
	require.Contains(t, prompt, `<tools>`+"\n"+`{"type":"function","function":{"name":"get_weather"`)
	want := len(tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true}))
	for seed := range 8 {
		choice := ""
		if seed%2 == 0 {
			choice = `"tool_choice": "auto", `
		}
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Weather?"}], "tools": %s, %s"max_tokens": 40, "temperature": 1, "seed": %d}`, tools, choice, seed)
		r := wholeReply(t, ts, body)
		assert.Contains(t, []string{"stop", "length"}, r.finish)
		require.NotNil(t, r.content)
		assert.Empty(t, r.calls)
		assert.NotContains(t, *r.content, "<tool_call>")
		assert.Equal(t, float64(want), r.usage["prompt_tokens"])
		sameReply(t, r, streamedReply(t, ts, body), fmt.Sprintf("seed %d streamed", seed))
	}
	// "none": the tools are not offered, the reply is text.
	r := wholeReply(t, ts, `{"messages": [{"role": "user", "content": "Weather?"}], "tools": `+tools+`, "tool_choice": "none", "max_tokens": 4}`)
	plain, err := tmpl.Apply([]sample.Message{{Role: "user", Content: "Weather?"}}, true)
	require.NoError(t, err)
	assert.Equal(t, float64(len(tok.Encode(plain, tokenizer.EncodeOptions{ParseSpecial: true}))), r.usage["prompt_tokens"])
	assert.Empty(t, r.calls)
}

// TestToolRoundTrip takes a call from the server and sends it back with the tool's answer, in
// the conversation OpenAI's clients send (the assistant's message with content null and its
// tool_calls, then a tool message with tool_call_id), through the built-in chatml and through
// Qwen2.5's own template: the prompt the server decodes is the template's rendering of that
// conversation (its prompt tokens those of the rendering), which holds the call and the answer.
func TestToolRoundTrip(t *testing.T) {
	templates := map[string]func(*testing.T) *sample.Template{
		"chatml": func(*testing.T) *sample.Template { tm := sample.ChatML; return &tm },
		"qwen2.5 jinja": func(t *testing.T) *sample.Template {
			src := sharedTemplate(t, "Qwen-Qwen2.5-7B-Instruct.jinja")
			tm, err := sample.NewJinjaTemplate(src, sample.JinjaOptions{Source: "qwen.gguf", EOSToken: "<|im_end|>"})
			require.NoError(t, err)
			return &tm
		},
	}
	model := chatModel(t)
	for name, build := range templates {
		t.Run(name, func(t *testing.T) {
			tmpl := build(t)
			var tok *tokenizer.Tokenizer
			_, ts := newServerOf(t, model, 1, 4, 2048, func(c *Config) { c.Template, tok = tmpl, c.Tokenizer })
			tools := toolsJSON("get_weather", "add")
			first := wholeReply(t, ts, `{"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": `+tools+`, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false, "max_tokens": 300, "seed": 3, "temperature": 1}`)
			require.Equal(t, "tool_calls", first.finish, "%+v %q", first, deref(first.content))
			require.Len(t, first.calls, 1)
			call := first.calls[0]
			callJSON, err := json.Marshal(map[string]any{"id": call.ID, "type": "function", "function": map[string]any{"name": call.Name, "arguments": call.Arguments}})
			require.NoError(t, err)
			body := `{"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [` + string(callJSON) + `]},
				{"role": "tool", "tool_call_id": "` + call.ID + `", "content": "{\"temp\": 21}"}], "tools": ` + tools + `, "max_tokens": 5, "seed": 1}`
			second := wholeReply(t, ts, body)
			var raw []json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tools), &raw))
			prompt, err := tmpl.Render([]sample.Message{
				{Role: "user", Content: "Weather in Paris?"},
				{Role: "assistant", ToolCalls: []sample.ToolCall{{ID: call.ID, Name: call.Name, Arguments: call.Arguments}}},
				{Role: "tool", ToolCallID: call.ID, Content: `{"temp": 21}`},
			}, sample.RenderOptions{AddGenerationPrompt: true, Tools: raw})
			require.NoError(t, err)
			assert.Contains(t, prompt, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ")
			assert.Contains(t, prompt, "<tool_response>\n{\"temp\": 21}\n</tool_response>")
			assert.Equal(t, float64(len(tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true}))), second.usage["prompt_tokens"])
			// Arguments sent back as an object (some clients do) render the same.
			var args any
			require.NoError(t, json.Unmarshal([]byte(call.Arguments), &args))
			asObject := strings.Replace(body, `"arguments":`+mustJSON(t, call.Arguments), `"arguments":`+call.Arguments, 1)
			require.NotEqual(t, body, asObject)
			assert.Equal(t, second.usage["prompt_tokens"], wholeReply(t, ts, asObject).usage["prompt_tokens"])
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// sharedTemplate reads a chat template of the workspace's shared test data (llama.cpp's
// published templates), skipping the test when it is absent (a checkout outside the workspace).
func sharedTemplate(t *testing.T, name string) string {
	b, err := os.ReadFile(filepath.Join("../../../shared/testdata/vocab", name))
	if err != nil {
		t.Skipf("llama.cpp's templates not found beside the checkout: %v", err)
	}
	return string(b)
}

// llama3Template is a chat template written for this test in the manner of Llama 3.x's (its
// header markers; tools offered as JSON in the system turn with the instruction to answer with
// {"name": ..., "parameters": ...}; calls written back that way; tool answers in the ipython
// role).
const llama3Template = `{{- bos_token }}{%- if tools %}<|start_header_id|>system<|end_header_id|>

Answer with a JSON object {"name": function name, "parameters": its arguments} to call one of:
{% for t in tools %}{{ t | tojson }}
{% endfor %}<|eot_id|>{%- endif %}
{%- for m in messages %}{%- if m.role == 'assistant' and m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>

{% for c in m.tool_calls %}{"name": "{{ c.function.name }}", "parameters": {{ c.function.arguments | tojson }}}{% endfor %}<|eot_id|>
{%- elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ m.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}<|eot_id|>
{%- endif %}{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`

// TestToolCallsLlamaJSON serves a Llama 3 style template, which asks for calls as a JSON object
// of name and parameters: required calls come in that form, read back as OpenAI's tool_calls
// whose arguments validate, whole and streamed alike, one per reply.
func TestToolCallsLlamaJSON(t *testing.T) {
	tmpl, err := sample.NewJinjaTemplate(llama3Template, sample.JinjaOptions{Source: "llama.gguf"})
	require.NoError(t, err)
	require.Equal(t, sample.ToolSyntaxJSON, tmpl.ToolSyntax())
	_, ts := newServerOf(t, chatModel(t), 2, 8, 2048, func(c *Config) { c.Template = &tmpl })
	validators := toolValidators(t)
	offered := []string{"get_weather", "add", "tag"}
	for seed := range 12 {
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Call."}], "tools": %s, "tool_choice": "required", "max_tokens": 400, "temperature": 1, "seed": %d}`, toolsJSON(offered...), seed)
		r := wholeReply(t, ts, body)
		what := fmt.Sprintf("seed %d", seed)
		require.Equal(t, "tool_calls", r.finish, "%s: %+v", what, r)
		require.Len(t, r.calls, 1, what)
		checkCalls(t, validators, offered, r.calls, what)
		if seed < 3 {
			sameReply(t, r, streamedReply(t, ts, body), what+" streamed")
		}
	}
}

// TestToolRefusals: malformed tools, schemas the grammar compiler cannot handle, a choice of no
// function offered or needing tools without any, tool calls where they cannot be, and tools
// beside response_format or on text completions are 400s in OpenAI's shape naming the field.
func TestToolRefusals(t *testing.T) {
	_, ts := newServer(t, 1, 4, 256)
	weather := toolsJSON("get_weather")
	user := `"messages": [{"role": "user", "content": "hi"}]`
	for _, c := range []struct{ body, param, want string }{
		{`{` + user + `, "tools": "f"}`, "tools", "want an array"},
		{`{` + user + `, "tools": [{"type": "retrieval"}]}`, "tools[0].type", `"retrieval"`},
		{`{` + user + `, "tools": [{"type": "function"}]}`, "tools[0].function", `"function"`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "a b"}}]}`, "tools[0].function.name", `"a b"`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": ""}}]}`, "tools[0].function.name", `""`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}`, "tools[1].function.name", `a second function named "f"`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]}`, "tools[0].function.parameters", `"type": "object"`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}`, "tools[0].function.parameters", "JSON Schema object"},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}}}]}`, "tools", `function "f": parameters: json schema: the keyword "pattern"`},
		{`{` + user + `, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"$ref": "#/$defs/x"}}}]}`, "tools", `"$ref"`},
		{`{` + user + `, "tool_choice": "required"}`, "tool_choice", `needs "tools"`},
		{`{` + user + `, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}`, "tool_choice", `needs "tools"`},
		{`{` + user + `, "tools": ` + weather + `, "tool_choice": {"type": "function", "function": {"name": "add"}}}`, "tool_choice", `"add", which is not among the tools offered`},
		{`{` + user + `, "tools": ` + weather + `, "tool_choice": "sometimes"}`, "tool_choice", `"sometimes"`},
		{`{` + user + `, "tools": ` + weather + `, "tool_choice": {"type": "function"}}`, "tool_choice", `want "none"`},
		{`{` + user + `, "tools": ` + weather + `, "tool_choice": 3}`, "tool_choice", `want "none"`},
		{`{` + user + `, "tools": ` + weather + `, "parallel_tool_calls": "yes"}`, "parallel_tool_calls", "want bool"},
		{`{` + user + `, "tools": ` + weather + `, "response_format": {"type": "json_object"}}`, "response_format", "with tools"},
		{`{"messages": [{"role": "user", "content": "hi", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}`, "messages[0].tool_calls", "only an assistant's"},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "", "arguments": "{}"}}]}]}`, "messages[0].tool_calls[0].function.name", `"name" is required`},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": 5}}]}]}`, "messages[0].tool_calls[0].function.arguments", "a string of JSON or an object"},
		{`{"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "code", "function": {"name": "f"}}]}]}`, "messages[0].tool_calls[0].type", `"code"`},
		{`{"messages": [{"role": "function", "content": "x"}]}`, "messages", `unknown role "function"`},
		{`{` + user + `, "functions": [{"name": "f"}]}`, "functions", "offer \"tools\""},
	} {
		code, out := post(t, ts, "/v1/chat/completions", c.body)
		require.Equal(t, 400, code, "%s: %v", c.body, out)
		e := out["error"].(map[string]any)
		assert.Equal(t, "invalid_request_error", e["type"], c.body)
		assert.Equal(t, c.param, e["param"], c.body)
		assert.Contains(t, e["message"], c.want, c.body)
	}
	for param, body := range map[string]string{"tools": `{"prompt": "hi", "tools": ` + weather + `}`, "tool_choice": `{"prompt": "hi", "tool_choice": "required"}`} {
		code, out := post(t, ts, "/v1/completions", body)
		require.Equal(t, 400, code, out)
		e := out["error"].(map[string]any)
		assert.Equal(t, param, e["param"])
		assert.Contains(t, e["message"], "a text completion calls no functions")
	}
	// What asks for nothing passes: no tools with tool_choice none or auto, tool_choice none
	// beside response_format; and a call and a tool message in the conversation.
	for _, body := range []string{
		`{` + user + `, "tools": [], "tool_choice": "auto", "parallel_tool_calls": false, "max_tokens": 2}`,
		`{` + user + `, "tools": null, "tool_choice": "none", "max_tokens": 2}`,
		`{` + user + `, "tools": ` + weather + `, "tool_choice": "none", "response_format": {"type": "json_object"}, "max_tokens": 2}`,
		`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}, {"role": "tool", "tool_call_id": "c1", "content": "1"}], "max_tokens": 2}`,
	} {
		code, out := post(t, ts, "/v1/chat/completions", body)
		assert.Equal(t, 200, code, "%s: %v", body, out)
	}
}

// TestCallScanner reads replies written by hand, whole and cut into random pieces: the content
// and calls must be the expected ones, and the same however the reply is cut.
func TestCallScanner(t *testing.T) {
	hermes := &toolUse{syntax: sample.ToolSyntaxHermes, names: []string{"f", "g"}}
	jsonUse := &toolUse{syntax: sample.ToolSyntaxJSON, names: []string{"f", "g"}}
	call := func(name, args string) string {
		return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n</tool_call>"
	}
	for _, c := range []struct {
		u       *toolUse
		reply   string
		content string
		calls   []toolCall
	}{
		{hermes, "Hello there.\n", "Hello there.\n", nil},
		{hermes, call("f", `{"a": 1}`), "", []toolCall{{"f", `{"a": 1}`}}},
		{hermes, "Let me see.\n" + call("f", `{}`) + "\n" + call("g", `{"x": [1, 2]}`), "Let me see.", []toolCall{{"f", `{}`}, {"g", `{"x": [1, 2]}`}}},
		{hermes, "a <tool b", "a <tool b", nil},
		{hermes, "<tool_call>\n{\"name\": \"f\", \"argu", "<tool_call>\n{\"name\": \"f\", \"argu", nil}, // cut short
		{hermes, call("h", `{}`), call("h", `{}`), nil},                                                 // not a function offered
		{hermes, call("f", `"{\"a\": 2}"`), "", []toolCall{{"f", `{"a": 2}`}}},                          // arguments as a string
		{hermes, "<tool_call>{\"name\": \"g\", \"parameters\": {\"y\": true}}</tool_call>", "", []toolCall{{"g", `{"y": true}`}}},
		{hermes, call("f", `{}`) + "\n\n", "", []toolCall{{"f", `{}`}}},
		{jsonUse, `{"name": "f", "parameters": {"a": "}"}}`, "", []toolCall{{"f", `{"a": "}"}`}}},
		{jsonUse, `The answer is {"name": "f"}`, `The answer is {"name": "f"}`, nil},
		{jsonUse, `{"name": "h", "parameters": {}}`, `{"name": "h", "parameters": {}}`, nil},
		{jsonUse, `{"name": "f", "param`, `{"name": "f", "param`, nil},
		{jsonUse, ` {"name": "f", "parameters": {}}`, ` {"name": "f", "parameters": {}}`, nil},
	} {
		rng := rand.New(rand.NewPCG(uint64(len(c.reply)), 1))
		for try := range 20 {
			sc := newCallScanner(c.u)
			var content strings.Builder
			var calls []toolCall
			rest := c.reply
			for rest != "" {
				n := len(rest)
				if try > 0 {
					n = 1 + rng.IntN(min(len(rest), 6))
				}
				out, got := sc.feed(rest[:n])
				content.WriteString(out)
				calls = append(calls, got...)
				rest = rest[n:]
			}
			content.WriteString(sc.finish())
			require.Equal(t, c.content, content.String(), "%q try %d", c.reply, try)
			require.Equal(t, c.calls, calls, "%q try %d", c.reply, try)
		}
	}
}

// FuzzCallScanner: no reply makes the scanner panic, and a reply cut into pieces gives what the
// whole does.
func FuzzCallScanner(f *testing.F) {
	f.Add("Hi <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", uint64(1), false)
	f.Add("<tool_call><tool_call>{\"name\": \"g\"}</tool_call></tool_call>", uint64(2), false)
	f.Add(`{"name": "f", "parameters": {"a": [1, {"b": "}"}]}}`, uint64(3), true)
	f.Add(`{"name": "g", "arguments": "{\"x\": 1}"} tail`, uint64(4), true)
	f.Fuzz(func(t *testing.T, reply string, seed uint64, jsonSyntax bool) {
		u := &toolUse{syntax: sample.ToolSyntaxHermes, names: []string{"f", "g"}}
		if jsonSyntax {
			u.syntax = sample.ToolSyntaxJSON
		}
		read := func(cut func(int) int) (string, []toolCall) {
			sc := newCallScanner(u)
			var content strings.Builder
			var calls []toolCall
			for rest := reply; rest != ""; {
				n := cut(len(rest))
				out, got := sc.feed(rest[:n])
				content.WriteString(out)
				calls = append(calls, got...)
				rest = rest[n:]
			}
			content.WriteString(sc.finish())
			return content.String(), calls
		}
		wantContent, wantCalls := read(func(n int) int { return n })
		rng := rand.New(rand.NewPCG(seed, 0))
		gotContent, gotCalls := read(func(n int) int { return 1 + rng.IntN(n) })
		if gotContent != wantContent || fmt.Sprint(gotCalls) != fmt.Sprint(wantCalls) {
			t.Fatalf("%q: whole %q %v, in pieces %q %v", reply, wantContent, wantCalls, gotContent, gotCalls)
		}
		for _, c := range wantCalls {
			if !json.Valid([]byte(c.arguments)) {
				t.Fatalf("%q: arguments %q", reply, c.arguments)
			}
		}
	})
}

// TestOpenAIClientTools calls with tools through OpenAI's official Node client
// (testdata/openai-tools.js): the calls it read, whole and through its stream helper (which
// puts the tool-call deltas together itself), must equal the server's reply to the same request
// over plain HTTP, their arguments valid; runTools must have parsed those arguments, run the
// function and built the conversation OpenAI's way (the assistant's calls, then the tool's
// answer), which the server takes back (the prompt of the same conversation sent here); a
// schema the compiler refuses arrives as the client's BadRequestError naming the keyword.
func TestOpenAIClientTools(t *testing.T) {
	client := openaiClient(t)
	_, ts := newServerOf(t, chatModel(t), 2, 16, 2048)
	tools := toolsJSON("get_weather", "add")
	stdout := client("testdata/openai-tools.js", ts.URL, tools)
	type reply struct {
		Finish    string
		Content   *string
		ToolCalls []struct {
			ID       string
			Type     string
			Function struct{ Name, Arguments string }
		}
		ToolDeltas int
		Usage      map[string]any
	}
	var got struct {
		Whole, Required, Stream, RoundTrip reply
		RunTools                           struct {
			Called   []map[string]any
			Messages []json.RawMessage
		}
		Refused struct {
			Status         int
			Class, Message string
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)

	validators := toolValidators(t)
	asCalls := func(r reply) []gotCall {
		var calls []gotCall
		for _, c := range r.ToolCalls {
			calls = append(calls, gotCall{ID: c.ID, Type: c.Type, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		return calls
	}
	body := `{"model": "tiny", "messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": ` + tools +
		`, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "parallel_tool_calls": false, "max_tokens": 300, "temperature": 0}`
	want := wholeReply(t, ts, body)
	require.Equal(t, "tool_calls", want.finish)
	for name, r := range map[string]reply{"whole": got.Whole, "stream": got.Stream} {
		assert.Equal(t, "tool_calls", r.Finish, name)
		assert.Nil(t, r.Content, name)
		sameReply(t, want, chatReply{content: r.Content, calls: asCalls(r), finish: r.Finish}, name)
		checkCalls(t, validators, []string{"get_weather"}, asCalls(r), name)
	}
	assert.Equal(t, 2, got.Stream.ToolDeltas, "a chunk of the call's id and name, one of its arguments")
	assert.Equal(t, "tool_calls", got.Required.Finish)
	checkCalls(t, validators, []string{"get_weather", "add"}, asCalls(got.Required), "required")

	require.Len(t, got.RunTools.Called, 1)
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(want.calls[0].Arguments), &args))
	assert.Equal(t, args, got.RunTools.Called[0], "runTools parsed the arguments")
	require.Len(t, got.RunTools.Messages, 3, "user, the assistant's call, the tool's answer")
	var roles []string
	for _, m := range got.RunTools.Messages {
		var r struct{ Role string }
		require.NoError(t, json.Unmarshal(m, &r))
		roles = append(roles, r.Role)
	}
	assert.Equal(t, []string{"user", "assistant", "tool"}, roles)
	msgs, err := json.Marshal(got.RunTools.Messages)
	require.NoError(t, err)
	again := wholeReply(t, ts, `{"messages": `+string(msgs)+`, "tools": `+tools+`, "tool_choice": "none", "max_tokens": 5, "temperature": 0}`)
	assert.Equal(t, again.usage["prompt_tokens"], got.RoundTrip.Usage["prompt_tokens"])
	assert.Equal(t, deref(again.content), deref(got.RoundTrip.Content))
	assert.Empty(t, got.RoundTrip.ToolCalls)

	assert.Equal(t, 400, got.Refused.Status)
	assert.Equal(t, "BadRequestError", got.Refused.Class)
	assert.Contains(t, got.Refused.Message, `"pattern"`)
}

// TestToolCallsLogprobs: with log-probabilities asked for, a reply of calls reports every token
// it drew, whole and streamed alike (the streamed ones ride on the chunks of the calls), and
// their pieces make up the text the calls were read from.
func TestToolCallsLogprobs(t *testing.T) {
	_, ts := newServerOf(t, chatModel(t), 1, 4, 2048)
	for seed := range 3 {
		body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Call."}], "tools": %s, "tool_choice": "required", "parallel_tool_calls": false,
			"logprobs": true, "top_logprobs": 2, "max_tokens": 300, "temperature": 1, "seed": %d}`, toolsJSON("get_weather", "add"), seed)
		code, out := post(t, ts, "/v1/chat/completions", body)
		require.Equal(t, 200, code, out)
		choice := out["choices"].([]any)[0].(map[string]any)
		require.Equal(t, "tool_calls", choice["finish_reason"])
		whole := chatReported(t, choice["logprobs"])
		assert.Len(t, whole, int(out["usage"].(map[string]any)["completion_tokens"].(float64)))
		text := strings.Join(pieces(whole), "")
		call := choice["message"].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
		assert.Contains(t, text, call["arguments"].(string))
		assert.True(t, strings.HasPrefix(text, "<tool_call>\n{\"name\": \""+call["name"].(string)+"\""), text)

		var streamed []reported
		for _, c := range events(t, ts, "/v1/chat/completions", strings.Replace(body, "{", `{"stream": true,`, 1)) {
			for _, ch := range c["choices"].([]any) {
				if lp := ch.(map[string]any)["logprobs"]; lp != nil {
					streamed = append(streamed, chatReported(t, lp)...)
				}
			}
		}
		assert.Equal(t, whole, streamed, "seed %d", seed)
	}
}

// TestToolCallsLargeVocab asks a random model with llama.cpp's starcoder vocabulary (49152
// tokens whose pieces straddle the call's tags and JSON in every way; an end-of-text token) for
// calls, required and named, parallel or not: every reply calls, every call validates. It
// reports the time per token of replies with tool_choice auto (the mask of text without a
// call) against none (no mask), the same seeds, their prompts cached.
func TestToolCallsLargeVocab(t *testing.T) {
	_, ts := newServerOf(t, starcoderModel(t, 2048), 2, 8, 2048)
	validators := toolValidators(t)
	offered := []string{"get_weather", "add", "tag", "now"}
	tools := toolsJSON(offered...)
	calls := 0
	for _, choice := range []string{`"required"`, `{"type": "function", "function": {"name": "tag"}}`} {
		for seed := range 8 {
			body := fmt.Sprintf(`{"messages": [{"role": "user", "content": "Call a tool."}], "tools": %s, "tool_choice": %s, "parallel_tool_calls": %v,
				"max_tokens": 600, "temperature": 1, "seed": %d}`, tools, choice, seed%2 == 0, seed)
			what := fmt.Sprintf("tool_choice %s, seed %d", choice, seed)
			r := wholeReply(t, ts, body)
			require.Equal(t, "tool_calls", r.finish, "%s: %+v %q", what, r, deref(r.content))
			names := offered
			if choice[0] == '{' {
				names = []string{"tag"}
			}
			checkCalls(t, validators, names, r.calls, what)
			calls += len(r.calls)
		}
	}
	perToken := func(choice string) float64 {
		wholeReply(t, ts, fmt.Sprintf(`{"messages": [{"role": "user", "content": "Hi"}], "tools": %s, "tool_choice": %q, "max_tokens": 1}`, tools, choice)) // the prompt cached
		tokens := 0
		start := time.Now()
		for seed := range 4 {
			r := wholeReply(t, ts, fmt.Sprintf(`{"messages": [{"role": "user", "content": "Hi"}], "tools": %s, "tool_choice": %q, "max_tokens": 64, "temperature": 1, "seed": %d}`, tools, choice, seed))
			assert.NotNil(t, r.content)
			tokens += int(r.usage["completion_tokens"].(float64))
		}
		return float64(time.Since(start).Microseconds()) / 1000 / float64(max(tokens, 1))
	}
	none, auto := perToken("none"), perToken("auto")
	t.Logf("16 replies, %d calls, all valid; text replies %.2f ms a token with tool_choice auto, %.2f with none (tiny model, prompts cached)", calls, auto, none)
}
