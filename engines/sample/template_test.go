package sample

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	oneTurn   = []Message{{Role: RoleUser, Content: "Hello"}}
	multiTurn = []Message{
		{Role: RoleUser, Content: "Hi"},
		{Role: RoleAssistant, Content: "Hello! How can I help?"},
		{Role: RoleUser, Content: "Tell me a joke."},
	}
	withSystem = []Message{
		{Role: RoleSystem, Content: "Be brief."},
		{Role: RoleUser, Content: "Hi"},
		{Role: RoleAssistant, Content: "Hello!"},
		{Role: RoleUser, Content: "Bye"},
	}
)

func apply(t *testing.T, tmpl Template, msgs []Message, gen bool) string {
	t.Helper()
	out, err := tmpl.Apply(msgs, gen)
	require.NoError(t, err)
	return out
}

func TestChatML(t *testing.T) {
	assert.Equal(t,
		"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
		apply(t, ChatML, oneTurn, true))
	assert.Equal(t,
		"<|im_start|>user\nHello<|im_end|>\n",
		apply(t, ChatML, oneTurn, false))
	assert.Equal(t,
		"<|im_start|>user\nHi<|im_end|>\n"+
			"<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"+
			"<|im_start|>user\nTell me a joke.<|im_end|>\n"+
			"<|im_start|>assistant\n",
		apply(t, ChatML, multiTurn, true))
	assert.Equal(t,
		"<|im_start|>system\nBe brief.<|im_end|>\n"+
			"<|im_start|>user\nHi<|im_end|>\n"+
			"<|im_start|>assistant\nHello!<|im_end|>\n"+
			"<|im_start|>user\nBye<|im_end|>\n",
		apply(t, ChatML, withSystem, false))
	// Content is not trimmed.
	assert.Equal(t,
		"<|im_start|>user\n  spaced \n<|im_end|>\n",
		apply(t, ChatML, []Message{{Role: RoleUser, Content: "  spaced \n"}}, false))
}

// Expected output derived by hand from Qwen-Qwen2.5-7B-Instruct.jinja
// (no tools): a default system turn unless messages[0] is a system message,
// then '<|im_start|>' + role + '\n' + content + '<|im_end|>\n' per message.
func TestQwen25(t *testing.T) {
	const def = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
	assert.Equal(t,
		def+"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
		apply(t, Qwen25, oneTurn, true))
	assert.Equal(t,
		def+"<|im_start|>user\nHi<|im_end|>\n"+
			"<|im_start|>assistant\nHello! How can I help?<|im_end|>\n"+
			"<|im_start|>user\nTell me a joke.<|im_end|>\n",
		apply(t, Qwen25, multiTurn, false))
	assert.Equal(t,
		"<|im_start|>system\nBe brief.<|im_end|>\n"+
			"<|im_start|>user\nHi<|im_end|>\n"+
			"<|im_start|>assistant\nHello!<|im_end|>\n"+
			"<|im_start|>user\nBye<|im_end|>\n"+
			"<|im_start|>assistant\n",
		apply(t, Qwen25, withSystem, true))
	// A system message that is not first is a turn of its own, after the
	// default one.
	assert.Equal(t,
		def+"<|im_start|>user\nHi<|im_end|>\n<|im_start|>system\nNow in French.<|im_end|>\n",
		apply(t, Qwen25, []Message{{Role: RoleUser, Content: "Hi"}, {Role: RoleSystem, Content: "Now in French."}}, false))
}

func TestSmolLM2(t *testing.T) {
	assert.Equal(t,
		"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"+
			"<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n",
		apply(t, SmolLM2, oneTurn, true))
}

// Expected output derived by hand from google-gemma-2-2b-it.jinja:
// '<start_of_turn>' + role + '\n' + content|trim + '<end_of_turn>\n' with
// assistant written as model, then '<start_of_turn>model\n'. The leading
// {{ bos_token }} is left to the tokenizer's add_bos. The jinja rejects a
// system message; Apply folds it into the first user turn instead.
func TestGemma(t *testing.T) {
	assert.Equal(t,
		"<start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n",
		apply(t, Gemma, oneTurn, true))
	assert.Equal(t,
		"<start_of_turn>user\nHello<end_of_turn>\n",
		apply(t, Gemma, oneTurn, false))
	assert.Equal(t,
		"<start_of_turn>user\nHi<end_of_turn>\n"+
			"<start_of_turn>model\nHello! How can I help?<end_of_turn>\n"+
			"<start_of_turn>user\nTell me a joke.<end_of_turn>\n"+
			"<start_of_turn>model\n",
		apply(t, Gemma, multiTurn, true))
	assert.Equal(t,
		"<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"+
			"<start_of_turn>model\nHello!<end_of_turn>\n"+
			"<start_of_turn>user\nBye<end_of_turn>\n",
		apply(t, Gemma, withSystem, false))
	// Contents are trimmed, as | trim does.
	assert.Equal(t,
		"<start_of_turn>user\nsys\n\nq<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n",
		apply(t, Gemma, []Message{{Role: RoleSystem, Content: " sys\n"}, {Role: RoleUser, Content: "\n q \n"}, {Role: RoleAssistant, Content: " a "}}, false))
}

func TestApplyErrors(t *testing.T) {
	for _, tmpl := range []Template{ChatML, Qwen25, Gemma} {
		_, err := tmpl.Apply(nil, true)
		assert.ErrorIs(t, err, ErrEmptyConversation, tmpl.Name)
		// "tool" is a role now (tool answers); OpenAI's legacy "function" is not.
		_, err = tmpl.Apply([]Message{{Role: RoleUser, Content: "a"}, {Role: "function", Content: "b"}}, true)
		assert.ErrorIs(t, err, ErrUnknownRole, tmpl.Name)
		assert.ErrorContains(t, err, `"function"`)
	}
	_, err := Template{}.Apply(oneTurn, true)
	assert.ErrorIs(t, err, ErrUnknownTemplate)

	for name, msgs := range map[string][]Message{
		"system only":          {{Role: RoleSystem, Content: "s"}},
		"assistant first":      {{Role: RoleAssistant, Content: "a"}, {Role: RoleUser, Content: "u"}},
		"two users":            {{Role: RoleUser, Content: "u"}, {Role: RoleUser, Content: "u"}},
		"system in the middle": {{Role: RoleUser, Content: "u"}, {Role: RoleAssistant, Content: "a"}, {Role: RoleSystem, Content: "s"}, {Role: RoleUser, Content: "u"}},
	} {
		_, err := Gemma.Apply(msgs, true)
		assert.Error(t, err, name)
	}
}

func TestTemplateByName(t *testing.T) {
	for name, want := range map[string]Template{
		"chatml": ChatML, "ChatML": ChatML, "gemma": Gemma,
		"qwen2.5": Qwen25, "qwen": Qwen25, "smollm2": SmolLM2,
	} {
		got, err := TemplateByName(name)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	_, err := TemplateByName("llama3")
	assert.ErrorIs(t, err, ErrUnknownTemplate)
}

// TestTemplateNames: every name TemplateNames lists is a template TemplateByName returns under
// that name, in upper case too; the list has no duplicates; an unknown name's error lists them.
func TestTemplateNames(t *testing.T) {
	names := TemplateNames()
	assert.Equal(t, []string{"chatml", "smollm2", "qwen2.5", "gemma"}, names)
	for _, name := range names {
		got, err := TemplateByName(strings.ToUpper(name))
		require.NoError(t, err, name)
		assert.Equal(t, name, got.Name)
		assert.Equal(t, 1, strings.Count(strings.Join(names, " ")+" ", name+" "), "%s listed once", name)
	}
	_, err := TemplateByName("vicuna")
	assert.ErrorContains(t, err, "(known: "+strings.Join(names, ", ")+")")
}

func TestStopStrings(t *testing.T) {
	assert.Equal(t, "<|im_end|>", ChatML.EndOfTurn())
	assert.Equal(t, "<|im_end|>", Qwen25.EndOfTurn())
	assert.Equal(t, "<end_of_turn>", Gemma.EndOfTurn())
	assert.Equal(t, "", Template{}.EndOfTurn())
	assert.Equal(t, []string{"<|im_end|>", "<|im_start|>"}, ChatML.StopStrings())
	assert.Equal(t, []string{"<end_of_turn>", "<start_of_turn>"}, Gemma.StopStrings())

	s := NewStopper(Gemma.StopStrings()...)
	outs, stopped := feed(s, "Sure", "!", "<end_of", "_turn>")
	assert.Equal(t, []string{"Sure", "!", "", ""}, outs)
	assert.True(t, stopped)
}

func TestDetectTemplateInline(t *testing.T) {
	// SmolLM2-Instruct's template, as stored in GGUF (real newlines).
	smol := "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}" +
		"{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}" +
		"{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}" +
		"{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
	got, err := DetectTemplate(smol)
	require.NoError(t, err)
	assert.Equal(t, SmolLM2, got)

	plain := "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
	got, err = DetectTemplate(plain)
	require.NoError(t, err)
	assert.Equal(t, ChatML, got)

	custom := `{{ '<|im_start|>system\nYou are a pirate.\nArr.<|im_end|>\n' }}`
	got, err = DetectTemplate(custom)
	require.NoError(t, err)
	assert.Equal(t, "chatml", got.Name)
	assert.Equal(t, "You are a pirate.\nArr.", got.DefaultSystem)

	for _, bad := range []string{"", "  ", "{{ messages }} [INST]"} {
		_, err := DetectTemplate(bad)
		assert.ErrorIs(t, err, ErrUnknownTemplate, "%q", bad)
	}
}

func TestDetectTemplateFiles(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "testdata", "vocab")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("test data not found: %v", err)
	}
	for file, want := range map[string]Template{
		"Qwen-Qwen2.5-7B-Instruct.jinja": Qwen25,
		"google-gemma-2-2b-it.jinja":     Gemma,
	} {
		src, err := os.ReadFile(filepath.Join(dir, file))
		if os.IsNotExist(err) {
			t.Logf("skipping %s: absent", file)
			continue
		}
		require.NoError(t, err)
		got, err := DetectTemplate(string(src))
		require.NoError(t, err, file)
		assert.Equal(t, want, got, file)
	}
}
