package sample

import (
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	qwenJinja  = "Qwen-Qwen2.5-7B-Instruct.jinja"
	gemmaJinja = "google-gemma-2-2b-it.jinja"
)

// vocabTemplate reads a chat template of the workspace's shared test data, skipping the test
// when it is absent (a checkout outside the workspace).
func vocabTemplate(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "testdata", "vocab", name))
	if os.IsNotExist(err) {
		t.Skipf("test data not found: %v", err)
	}
	require.NoError(t, err)
	return string(src)
}

func newJinja(t *testing.T, src string, o JinjaOptions) Template {
	t.Helper()
	tmpl, err := NewJinjaTemplate(src, o)
	require.NoError(t, err)
	return tmpl
}

// goldenMessage is a message of testdata/jinja_golden.json, in OpenAI's shape.
type goldenMessage struct {
	Role       string  `json:"role"`
	Content    *string `json:"content"`
	ToolCallID string  `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// TestJinjaGolden renders the cases of testdata/jinja_golden.json, which Python's jinja2 rendered
// as Hugging Face's apply_chat_template does, and llama.cpp's own Jinja engine the same
// (scripts/jinja-golden.py and jinja-golden-llamacpp.cpp), and compares byte for byte: the
// prompt, or the template's raise_exception message.
func TestJinjaGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "jinja_golden.json"))
	require.NoError(t, err)
	var cases []struct {
		Template            string            `json:"template"`
		BOSToken            string            `json:"bos_token"`
		EOSToken            string            `json:"eos_token"`
		Messages            []goldenMessage   `json:"messages"`
		Tools               []json.RawMessage `json:"tools"`
		AddGenerationPrompt bool              `json:"add_generation_prompt"`
		Want                *string           `json:"want"`
		Error               string            `json:"error"`
		LlamaCpp            any               `json:"llama_cpp"`
	}
	require.NoError(t, json.Unmarshal(raw, &cases))
	require.NotEmpty(t, cases)
	srcs := map[string]string{}
	toolCalls, raised := 0, 0
	for i, c := range cases {
		require.Equal(t, "agrees", c.LlamaCpp, "case %d: llama.cpp's Jinja engine rendered it otherwise", i)
		if srcs[c.Template] == "" {
			srcs[c.Template] = vocabTemplate(t, c.Template)
		}
		tmpl := newJinja(t, srcs[c.Template], JinjaOptions{Source: c.Template, BOSToken: c.BOSToken, EOSToken: c.EOSToken})
		msgs := make([]Message, len(c.Messages))
		for k, m := range c.Messages {
			msgs[k] = Message{Role: m.Role, ToolCallID: m.ToolCallID}
			if m.Content != nil {
				msgs[k].Content = *m.Content
			}
			for _, tc := range m.ToolCalls {
				msgs[k].ToolCalls = append(msgs[k].ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
				toolCalls++
			}
		}
		got, err := tmpl.Render(msgs, RenderOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools})
		if c.Want != nil {
			require.NoError(t, err, "case %d", i)
			require.Equal(t, *c.Want, got, "case %d (%s)", i, c.Template)
			continue
		}
		var te *TemplateError
		require.ErrorAs(t, err, &te, "case %d", i)
		assert.True(t, te.Raised, "case %d: %v", i, err)
		assert.Equal(t, c.Error, te.Message, "case %d", i)
		raised++
	}
	assert.Positive(t, toolCalls, "the golden cases hold tool calls")
	assert.Positive(t, raised, "the golden cases hold refused conversations")
}

// randomConversation draws a conversation: an optional system message, then turns of the given
// roles (alternating user/assistant when alternate, any of them otherwise), with contents that
// hold white space, markup and non-ASCII text.
func randomConversation(rng *rand.Rand, system, alternate bool) []Message {
	words := []string{"Hi", "  padded ", "two\nlines", "naïve", "日本", "<b>&</b>", "'\"", "{{ x }}", "\t", "", "\n\n"}
	text := func() string {
		var parts []string
		for n := rng.Intn(4); n >= 0; n-- {
			parts = append(parts, words[rng.Intn(len(words))])
		}
		return strings.Join(parts, " ")
	}
	var msgs []Message
	if system {
		msgs = append(msgs, Message{Role: RoleSystem, Content: text()})
	}
	for i, n := 0, 1+rng.Intn(6); i < n; i++ {
		role := RoleUser
		if alternate && i%2 == 1 || !alternate && rng.Intn(2) == 1 {
			role = RoleAssistant
		}
		msgs = append(msgs, Message{Role: role, Content: text()})
	}
	return msgs
}

// TestJinjaMatchesNamed renders random conversations through the model files' own templates and
// through the named templates that claim their formats (qwen2.5 without tools; gemma for
// conversations without a system message, which Gemma's template refuses): byte for byte equal.
func TestJinjaMatchesNamed(t *testing.T) {
	qwen := newJinja(t, vocabTemplate(t, qwenJinja), JinjaOptions{Source: qwenJinja, EOSToken: "<|im_end|>"})
	gemmaSrc := vocabTemplate(t, gemmaJinja)
	gemma := newJinja(t, gemmaSrc, JinjaOptions{Source: gemmaJinja, BOSToken: "<bos>", EOSToken: "<eos>", AddsBOS: true})
	gemmaBOS := newJinja(t, gemmaSrc, JinjaOptions{Source: gemmaJinja, BOSToken: "<bos>", EOSToken: "<eos>"})
	rng := rand.New(rand.NewSource(40))
	for i := 0; i < 500; i++ {
		gen := i%2 == 0
		msgs := randomConversation(rng, rng.Intn(2) == 0, rng.Intn(3) > 0)
		want, err := Qwen25.Apply(msgs, gen)
		require.NoError(t, err)
		got, err := qwen.Apply(msgs, gen)
		require.NoError(t, err)
		require.Equal(t, want, got, "conversation %d: %+v", i, msgs)

		msgs = randomConversation(rng, false, true)
		want, err = Gemma.Apply(msgs, gen)
		require.NoError(t, err)
		got, err = gemma.Apply(msgs, gen)
		require.NoError(t, err)
		require.Equal(t, want, got, "conversation %d: %+v", i, msgs)
		got, err = gemmaBOS.Apply(msgs, gen)
		require.NoError(t, err)
		require.Equal(t, "<bos>"+want, got, "without AddsBOS the template's bos_token stays")
	}
}

// TestJinjaGemmaRaises: Gemma's template refuses a system message and roles that do not
// alternate, with its own messages, naming the file and the template's line.
func TestJinjaGemmaRaises(t *testing.T) {
	gemma := newJinja(t, vocabTemplate(t, gemmaJinja), JinjaOptions{Source: "gemma.gguf", BOSToken: "<bos>", AddsBOS: true})
	for _, c := range []struct {
		msgs []Message
		want string
	}{
		{[]Message{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hi"}}, "System role not supported"},
		{[]Message{{Role: RoleUser, Content: "Hi"}, {Role: RoleUser, Content: "Hi again"}}, "Conversation roles must alternate user/assistant/user/assistant/..."},
		{[]Message{{Role: RoleAssistant, Content: "Hello"}}, "Conversation roles must alternate user/assistant/user/assistant/..."},
	} {
		_, err := gemma.Apply(c.msgs, true)
		var te *TemplateError
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Raised)
		assert.Equal(t, c.want, te.Message)
		assert.Equal(t, 1, te.Line)
		assert.Equal(t, "gemma.gguf: chat template line 1 refuses the conversation: "+c.want, err.Error())
		// The named template accepts a leading system message (llama.cpp's extension) but
		// refuses the others too.
		if c.msgs[0].Role != RoleSystem {
			_, err = Gemma.Apply(c.msgs, true)
			assert.Error(t, err)
		}
	}
}

// TestJinjaRaiseLine: the line of the raise_exception whose literal is the message, among several.
func TestJinjaRaiseLine(t *testing.T) {
	src := "{% if messages[0].role == 'system' %}\n{{ raise_exception('no system') }}\n{% endif %}\n" +
		"{% for m in messages %}{% if m.role == 'ipython' %}\n\n{{ raise_exception(\"no \\\"tools\\\"\") }}{% endif %}{{ m.content }}{% endfor %}"
	tmpl := newJinja(t, src, JinjaOptions{Source: "x.gguf"})
	_, err := tmpl.Apply([]Message{{Role: RoleSystem, Content: "s"}}, false)
	var te *TemplateError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 2, te.Line)
	// (A tool message that such a template refuses is folded into a user message; a role it
	// does not know is not.)
	_, err = tmpl.Apply([]Message{{Role: "ipython", Content: "r"}}, false)
	require.ErrorAs(t, err, &te)
	assert.Equal(t, `no "tools"`, te.Message)
	assert.Equal(t, 6, te.Line)
	out, err := tmpl.Apply([]Message{{Role: RoleUser, Content: "u"}}, false)
	require.NoError(t, err)
	assert.Equal(t, "u", strings.TrimSpace(out))
}

// TestJinjaCompileError: a template that does not parse is an error naming the source and line.
func TestJinjaCompileError(t *testing.T) {
	for _, c := range []struct {
		src  string
		line int
	}{
		{"{% for m in messages %}\n{{ m.content }}\n{% frobnicate %}\n{% endfor %}", 3},
		{"line one\nline two\n{{ messages[0].content", 3},
		{"{% for m in messages %}{{ m.content }}", 0},
	} {
		_, err := NewJinjaTemplate(c.src, JinjaOptions{Source: "broken.gguf"})
		var te *TemplateError
		require.ErrorAs(t, err, &te, c.src)
		assert.False(t, te.Raised)
		assert.True(t, strings.HasPrefix(err.Error(), "broken.gguf: chat template"), err.Error())
		if c.line > 0 {
			assert.Equal(t, c.line, te.Line, err.Error())
		}
	}
}

// TestJinjaStopStrings: a ChatML or Gemma Jinja template stops where the named template of its
// family does, then at the EOS text; a template of another family stops at the marker it writes
// after a reply; one that writes none, at EOS.
func TestJinjaStopStrings(t *testing.T) {
	qwen := newJinja(t, vocabTemplate(t, qwenJinja), JinjaOptions{EOSToken: "<|im_end|>"})
	assert.Equal(t, Qwen25.StopStrings(), qwen.StopStrings())
	assert.Equal(t, Qwen25.EndOfTurn(), qwen.EndOfTurn())
	gemma := newJinja(t, vocabTemplate(t, gemmaJinja), JinjaOptions{BOSToken: "<bos>", EOSToken: "<eos>", AddsBOS: true})
	assert.Equal(t, append(Gemma.StopStrings(), "<eos>"), gemma.StopStrings())
	assert.Equal(t, Gemma.EndOfTurn(), gemma.EndOfTurn())

	llama3 := "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content | trim }}<|eot_id|>{% endfor %}" +
		"{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
	l3 := newJinja(t, llama3, JinjaOptions{BOSToken: "<|begin_of_text|>", EOSToken: "<|end_of_text|>", AddsBOS: true})
	assert.Equal(t, "<|eot_id|>", l3.EndOfTurn())
	assert.Equal(t, []string{"<|eot_id|>", "<|end_of_text|>"}, l3.StopStrings())
	out, err := l3.Apply([]Message{{Role: RoleUser, Content: " Hi "}}, true)
	require.NoError(t, err)
	assert.Equal(t, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", out)

	plain := newJinja(t, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}", JinjaOptions{EOSToken: "</s>"})
	assert.Equal(t, "</s>", plain.EndOfTurn())
	assert.Equal(t, []string{"</s>"}, plain.StopStrings())
}

// TestJinjaToolsAndRoles: tools reach the template in the order given (tojson keeps key order);
// a tool message and an assistant's tool calls render; the named templates render them in the
// Hermes convention.
func TestJinjaToolsAndRoles(t *testing.T) {
	src := "{% if tools %}{% for t in tools %}{{ t | tojson }}{{ '\\n' }}{% endfor %}{% endif %}" +
		"{% for m in messages %}{{ m.role }}({{ m.tool_call_id }}):{% if m.content is none %}<none>{% else %}{{ m.content }}{% endif %}" +
		"{% for c in m.tool_calls %}[{{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}{{ '\\n' }}{% endfor %}"
	tmpl := newJinja(t, src, JinjaOptions{})
	tools := []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"z":1,"a":[true,null,2.5,"<&>"]}}}`)}
	msgs := []Message{
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"y": 2, "x": "s"}`}, {ID: "c2", Name: "g", Arguments: `not json`}}},
		{Role: RoleTool, ToolCallID: "c1", Content: "42"},
	}
	out, err := tmpl.Render(msgs, RenderOptions{Tools: tools})
	require.NoError(t, err)
	assert.Equal(t, `{"type": "function", "function": {"name": "f", "parameters": {"z": 1, "a": [true, null, 2.5, "<&>"]}}}`+"\n"+
		"user():q\n"+
		`assistant():<none>[c1 f {"y": 2, "x": "s"}][c2 g "not json"]`+"\n"+
		"tool(c1):42\n", out)
	out, err = tmpl.Render(msgs[:1], RenderOptions{})
	require.NoError(t, err)
	assert.Equal(t, "user():q\n", out)

	_, err = tmpl.Render(msgs, RenderOptions{Tools: []json.RawMessage{json.RawMessage(`{"a":`)}})
	assert.Error(t, err)
	for _, named := range []Template{ChatML, Qwen25, Gemma} {
		out, err = named.Render(msgs[:1], RenderOptions{Tools: tools})
		require.NoError(t, err, named.Name)
		assert.Contains(t, out, "<tools>\n"+`{"type":"function","function":{"name":"f","parameters":{"z":1,"a":[true,null,2.5,"<&>"]}}}`+"\n</tools>", named.Name)
		out, err = named.Render(msgs, RenderOptions{AddGenerationPrompt: true})
		require.NoError(t, err, named.Name)
		assert.Contains(t, out, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"y\": 2, \"x\": \"s\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": \"not json\"}\n</tool_call>", named.Name)
		assert.Contains(t, out, "<tool_response>\n42\n</tool_response>", named.Name)
	}
}
