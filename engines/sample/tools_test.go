package sample

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTools are two tool definitions in OpenAI's shape.
var testTools = []json.RawMessage{
	json.RawMessage(`{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}`),
	json.RawMessage(`{"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "integer"}}}}}`),
}

// randomToolConversation draws a conversation of user turns, assistant replies in text or
// calls (arguments written as Python's json.dumps writes them, as a template's tojson does),
// and tool answers to every call, with an optional system message.
func randomToolConversation(t *testing.T, rng *rand.Rand, system bool) []Message {
	words := []string{"Hi", "  padded ", "two\nlines", "naïve", "日本", "<b>&</b>", "'\"", "{{ x }}", "42"}
	text := func() string {
		var parts []string
		for n := rng.Intn(3); n >= 0; n-- {
			parts = append(parts, words[rng.Intn(len(words))])
		}
		return strings.Join(parts, " ")
	}
	var msgs []Message
	if system {
		msgs = append(msgs, Message{Role: RoleSystem, Content: text()})
	}
	for turn, n := 0, 1+rng.Intn(3); turn < n; turn++ {
		msgs = append(msgs, Message{Role: RoleUser, Content: text()})
		if turn == n-1 && rng.Intn(2) == 0 {
			break
		}
		if rng.Intn(2) == 0 {
			msgs = append(msgs, Message{Role: RoleAssistant, Content: text()})
			continue
		}
		var calls []ToolCall
		for k, m := 0, 1+rng.Intn(2); k < m; k++ {
			var city strings.Builder
			enc := json.NewEncoder(&city)
			enc.SetEscapeHTML(false) // as tojson writes it
			require.NoError(t, enc.Encode(text()))
			calls = append(calls, ToolCall{ID: fmt.Sprintf("call_%d_%d", turn, k), Name: "get_weather", Arguments: `{"city": ` + strings.TrimSpace(city.String()) + `}`})
		}
		content := ""
		if rng.Intn(2) == 0 {
			content = text()
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Content: content, ToolCalls: calls})
		for _, c := range calls {
			msgs = append(msgs, Message{Role: RoleTool, ToolCallID: c.ID, Content: text()})
		}
		msgs = append(msgs, Message{Role: RoleAssistant, Content: text()})
	}
	return msgs
}

// TestNamedTemplatesRenderToolsAsQwen renders random conversations with tools, calls and tool
// answers through Qwen2.5's own template and the built-in qwen2.5: after the system turn, whose
// offer of tools each words its own way, the two are byte for byte equal; and the built-in
// one's system turn is the system message (or the default one) and the offer of every tool.
func TestNamedTemplatesRenderToolsAsQwen(t *testing.T) {
	qwen := newJinja(t, vocabTemplate(t, qwenJinja), JinjaOptions{Source: qwenJinja, EOSToken: "<|im_end|>"})
	assert.Equal(t, ToolSyntaxHermes, qwen.ToolSyntax())
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 300; i++ {
		msgs := randomToolConversation(t, rng, rng.Intn(2) == 0)
		o := RenderOptions{AddGenerationPrompt: i%2 == 0, Tools: testTools}
		want, err := qwen.Render(msgs, o)
		require.NoError(t, err)
		got, err := Qwen25.Render(msgs, o)
		require.NoError(t, err)
		_, wantTurns, _ := strings.Cut(want, "<|im_end|>\n")
		gotSystem, gotTurns, _ := strings.Cut(got, "<|im_end|>\n")
		require.Equal(t, wantTurns, gotTurns, "conversation %d: %+v", i, msgs)
		system := Qwen25.DefaultSystem
		if msgs[0].Role == RoleSystem {
			system = msgs[0].Content
		}
		offer, err := toolsText(testTools)
		require.NoError(t, err)
		require.Equal(t, "<|im_start|>system\n"+system+"\n\n"+offer, gotSystem)
		for _, name := range []string{`"name":"get_weather"`, `"name":"add"`} {
			assert.Contains(t, gotSystem, name)
		}
	}
}

// TestJinjaFoldsTools: a Jinja template that renders no tools (Gemma 2's, which also refuses a
// system message) gets the offer of tools in its first user turn, calls and tool answers as
// text, and renders byte for byte what the built-in gemma renders of the same conversation
// (whose first user text starts with no blanks);
// its probes say it writes none of them, and Qwen's that it writes all.
func TestJinjaFoldsTools(t *testing.T) {
	gemma := newJinja(t, vocabTemplate(t, gemmaJinja), JinjaOptions{Source: gemmaJinja, BOSToken: "<bos>", AddsBOS: true})
	assert.Equal(t, toolCaps{}, gemma.jinja.caps)
	qwen := newJinja(t, vocabTemplate(t, qwenJinja), JinjaOptions{Source: qwenJinja, EOSToken: "<|im_end|>"})
	assert.Equal(t, toolCaps{tools: true, calls: true, responses: true}, qwen.jinja.caps)
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 300; i++ {
		msgs := randomToolConversation(t, rng, false)
		// Gemma's template trims the first user turn with the offer before it, the built-in
		// one the user's text alone: equal where that text has no blanks at its start.
		msgs[0].Content = strings.TrimLeft(msgs[0].Content, " \t\n")
		o := RenderOptions{AddGenerationPrompt: i%2 == 0, Tools: testTools}
		want, err := Gemma.Render(msgs, o)
		require.NoError(t, err)
		got, err := gemma.Render(msgs, o)
		require.NoError(t, err, "conversation %d: %+v", i, msgs)
		require.Equal(t, want, got, "conversation %d: %+v", i, msgs)
		require.True(t, strings.HasPrefix(got, "<start_of_turn>user\n# Tools\n"), got)
	}
	// Without tools nothing is folded: the template's own refusal stands.
	_, err := gemma.Render([]Message{{Role: RoleSystem, Content: "s"}, {Role: RoleUser, Content: "u"}}, RenderOptions{})
	assert.ErrorContains(t, err, "System role not supported")
}

// TestToolSyntax: a Llama 3 style template that renders tools itself without Hermes tags asks
// for the JSON form; one that renders none, or the named ones, for the Hermes form.
func TestToolSyntax(t *testing.T) {
	llama := newJinja(t, "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{% if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}"+
		"{% if m.tool_calls %}{% for c in m.tool_calls %}{\"name\": \"{{ c.function.name }}\", \"parameters\": {{ c.function.arguments | tojson }}}{% endfor %}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}", JinjaOptions{})
	assert.Equal(t, ToolSyntaxJSON, llama.ToolSyntax())
	assert.Equal(t, toolCaps{tools: true, calls: true, responses: true}, llama.jinja.caps)
	plain := newJinja(t, "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}", JinjaOptions{})
	assert.Equal(t, ToolSyntaxHermes, plain.ToolSyntax())
	assert.Equal(t, toolCaps{responses: true}, plain.jinja.caps) // a tool message's content is written as any message's
	for _, named := range []Template{ChatML, SmolLM2, Gemma} {
		assert.Equal(t, ToolSyntaxHermes, named.ToolSyntax(), named.Name)
	}
}
