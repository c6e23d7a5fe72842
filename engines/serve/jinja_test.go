package serve

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// TestJinjaChatTemplate serves chat through a Jinja template (Gemma 2's rules): a conversation
// it renders is the prompt the server decodes (its prompt_tokens are the rendering's tokens),
// and one it refuses with raise_exception is a 400 carrying the template's message.
func TestJinjaChatTemplate(t *testing.T) {
	src := "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}" +
		"{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}" +
		"{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}" +
		"{% if message['role'] == 'assistant' %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}" +
		"{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<start_of_turn>model\n' }}{% endif %}"
	tmpl, err := sample.NewJinjaTemplate(src, sample.JinjaOptions{Source: "tiny.gguf (tokenizer.chat_template)", BOSToken: "<s>", AddsBOS: true})
	require.NoError(t, err)
	var tok *tokenizer.Tokenizer
	_, ts := newServer(t, 1, 4, 256, func(c *Config) { c.Template, tok = &tmpl, c.Tokenizer })

	code, out := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":" Hi there "},{"role":"assistant","content":"Hello"},{"role":"user","content":"Go?"}],"max_tokens":3,"temperature":0}`)
	require.Equal(t, 200, code, out)
	prompt, err := tmpl.Apply([]sample.Message{{Role: "user", Content: " Hi there "}, {Role: "assistant", Content: "Hello"}, {Role: "user", Content: "Go?"}}, true)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(prompt, "<start_of_turn>user\nHi there<end_of_turn>\n"), prompt)
	ids := tok.Encode(prompt, tokenizer.EncodeOptions{ParseSpecial: true})
	assert.Equal(t, float64(len(ids)), out["usage"].(map[string]any)["prompt_tokens"])

	code, out = post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":3}`)
	require.Equal(t, 400, code, out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "tiny.gguf (tokenizer.chat_template): chat template line 1 refuses the conversation: System role not supported")
	code, out = post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}],"max_tokens":3}`)
	require.Equal(t, 400, code, out)
	assert.Contains(t, out["error"].(map[string]any)["message"], "Conversation roles must alternate")
}
