package sample

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned (wrapped) by Template.Apply, DetectTemplate and
// TemplateByName.
var (
	ErrEmptyConversation = errors.New("sample: empty conversation")
	ErrUnknownRole       = errors.New("sample: unknown role")
	ErrUnknownTemplate   = errors.New("sample: unknown chat template")
)

// format is a chat template family.
type format int

const (
	formatNone format = iota
	formatChatML
	formatGemma
	formatJinja
)

// Template renders conversations in one chat format. Use the ChatML,
// SmolLM2, Qwen25 and Gemma values, DetectTemplate or TemplateByName, or
// NewJinjaTemplate for a model's own Jinja template; the zero value renders
// nothing and Apply fails with ErrUnknownTemplate.
type Template struct {
	// Name identifies the template ("chatml", "smollm2", "qwen2.5",
	// "gemma"; "jinja" for NewJinjaTemplate's).
	Name string
	// DefaultSystem, for ChatML templates, is the system message inserted
	// when the conversation does not start with one, as the SmolLM2 and
	// Qwen2.5 templates do. Empty means none. Gemma ignores it.
	DefaultSystem string

	format format
	jinja  *jinjaTemplate
}

// ChatML is the plain ChatML format:
//
//	<|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
var ChatML = Template{Name: "chatml", format: formatChatML}

// SmolLM2 is ChatML with SmolLM2-Instruct's default system message.
var SmolLM2 = Template{
	Name:          "smollm2",
	DefaultSystem: "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
	format:        formatChatML,
}

// Qwen25 is ChatML with Qwen2.5-Instruct's default system message (the
// template's behaviour without tools).
var Qwen25 = Template{
	Name:          "qwen2.5",
	DefaultSystem: "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
	format:        formatChatML,
}

// Gemma is the Gemma (2) format:
//
//	<start_of_turn>user\ncontent<end_of_turn>\n<start_of_turn>model\n
//
// Contents are trimmed of surrounding white space, the assistant role is
// written "model", and turns must alternate user/assistant starting with
// user, as the jinja template demands. Gemma has no system role: a leading
// system message is prepended to the first user turn, separated by a blank
// line (as llama.cpp and the Gemma 3 template do); a system message
// anywhere else is an error.
var Gemma = Template{Name: "gemma", format: formatGemma}

// NewJinjaTemplate compiles a Jinja chat template (a GGUF file's
// tokenizer.chat_template, in the dialect Hugging Face's
// apply_chat_template renders). The template is rendered with the
// variables Hugging Face and llama.cpp provide: messages (role, content,
// and where present tool_calls, tool_call_id, name), add_generation_prompt,
// bos_token, eos_token, tools (none: None), raise_exception (an error
// holding the template's message) and strftime_now.
//
// A template has no declared stop strings; NewJinjaTemplate derives them.
// The end of an assistant turn (EndOfTurn) is the text the template writes
// right after an assistant's content, up to white space, found by rendering
// a user/assistant probe conversation: "<|im_end|>" for ChatML templates,
// "<end_of_turn>" for Gemma's, "<|eot_id|>" for Llama 3's. Where it writes
// nothing there (or fails on the probe), the EOS token's text is used. The
// stop strings are that marker, the start-of-turn markers of the ChatML and
// Gemma families when the template writes them ("<|im_start|>",
// "<start_of_turn>"), and the EOS token's text: for ChatML and Gemma
// templates the named templates' stop strings and then the EOS text.
//
// A template that does not compile is a *TemplateError naming
// opts.Source and the template's line.
func NewJinjaTemplate(src string, opts JinjaOptions) (t Template, err error) {
	j, err := compileJinja(src, opts)
	if err != nil {
		return Template{}, err
	}
	return Template{Name: "jinja", format: formatJinja, jinja: j}, nil
}

// namedTemplates are the built-in templates TemplateByName knows, in the order
// TemplateNames lists them; templateAliases are other names of some.
var (
	namedTemplates  = []Template{ChatML, SmolLM2, Qwen25, Gemma}
	templateAliases = map[string]string{"qwen": Qwen25.Name}
)

// TemplateNames lists the names of the built-in templates TemplateByName
// returns ("chatml", "smollm2", "qwen2.5", "gemma"; "qwen" is also
// Qwen2.5's): the list the commands' -template help and errors show.
func TemplateNames() []string {
	names := make([]string, len(namedTemplates))
	for i, t := range namedTemplates {
		names[i] = t.Name
	}
	return names
}

// TemplateByName returns the built-in template called name (any case): one
// of TemplateNames, or "qwen" for Qwen2.5.
func TemplateByName(name string) (Template, error) {
	want := strings.ToLower(name)
	if alias, ok := templateAliases[want]; ok {
		want = alias
	}
	for _, t := range namedTemplates {
		if t.Name == want {
			return t, nil
		}
	}
	return Template{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownTemplate, name, strings.Join(TemplateNames(), ", "))
}

// DetectTemplate recognises a jinja chat template (a GGUF file's
// tokenizer.chat_template) by its markers, as llama.cpp's
// llm_chat_detect_template does: "<|im_start|>" means ChatML and
// "<start_of_turn>" means Gemma. For ChatML it also picks up a default
// system message written as a string literal
// ('<|im_start|>system\n...<|im_end|>'), returning SmolLM2 or Qwen25 when
// it is theirs and ChatML with DefaultSystem set otherwise.
func DetectTemplate(jinja string) (Template, error) {
	switch {
	case strings.TrimSpace(jinja) == "":
		return Template{}, fmt.Errorf("%w: empty template", ErrUnknownTemplate)
	case strings.Contains(jinja, "<|im_start|>"):
		sys := chatMLDefaultSystem(jinja)
		for _, t := range []Template{SmolLM2, Qwen25} {
			if sys == t.DefaultSystem {
				return t, nil
			}
		}
		t := ChatML
		t.DefaultSystem = sys
		return t, nil
	case strings.Contains(jinja, "<start_of_turn>"):
		return Gemma, nil
	}
	return Template{}, fmt.Errorf("%w: no ChatML or Gemma markers", ErrUnknownTemplate)
}

// chatMLDefaultSystem finds the first quoted literal
// '<|im_start|>system\nTEXT<|im_end|>' whose TEXT is plain text (no
// quotes, braces, '+' or escapes other than \n) and returns TEXT, or "".
func chatMLDefaultSystem(src string) string {
	const open = "<|im_start|>system"
	for off := 0; ; {
		i := strings.Index(src[off:], open)
		if i < 0 {
			return ""
		}
		i += off
		off = i + len(open)
		if i == 0 || (src[i-1] != '\'' && src[i-1] != '"') {
			continue
		}
		rest := src[off:]
		switch {
		case strings.HasPrefix(rest, `\n`):
			rest = rest[2:]
		case strings.HasPrefix(rest, "\n"):
			rest = rest[1:]
		default:
			continue
		}
		j := strings.Index(rest, "<|im_end|>")
		if j <= 0 {
			continue
		}
		text := strings.ReplaceAll(rest[:j], `\n`, "\n")
		if strings.ContainsAny(text, "'\"{}+\\") {
			continue
		}
		return text
	}
}

// EndOfTurn returns the text of the token that ends a turn: "<|im_end|>"
// for ChatML, "<end_of_turn>" for Gemma.
func (t Template) EndOfTurn() string {
	switch t.format {
	case formatJinja:
		return t.jinja.endOfTurn
	case formatChatML:
		return "<|im_end|>"
	case formatGemma:
		return "<end_of_turn>"
	}
	return ""
}

// StopStrings returns the strings that end the assistant's reply when the
// output is decoded with special tokens: the end-of-turn marker and the
// start-of-turn marker (in case the model opens a new turn without closing
// its own). Use them with NewStopper. A Jinja template's are derived (see
// NewJinjaTemplate).
func (t Template) StopStrings() []string {
	switch t.format {
	case formatJinja:
		return append([]string(nil), t.jinja.stops...)
	case formatChatML:
		return []string{"<|im_end|>", "<|im_start|>"}
	case formatGemma:
		return []string{"<end_of_turn>", "<start_of_turn>"}
	}
	return nil
}

// ToolSyntax is the text a model of this template writes its calls in: the JSON form for a
// Jinja template that renders tools itself without the Hermes tags and is Llama 3's (its header
// markers) or speaks of "parameters"; the Hermes form otherwise, the named templates' and the
// form the tools are offered in where the template renders none (foldTools).
func (t Template) ToolSyntax() ToolSyntax {
	if t.format != formatJinja || !t.jinja.caps.tools {
		return ToolSyntaxHermes
	}
	src := t.jinja.src
	if strings.Contains(src, "<tool_call>") {
		return ToolSyntaxHermes
	}
	if strings.Contains(src, "<|start_header_id|>") || strings.Contains(src, `"parameters"`) {
		return ToolSyntaxJSON
	}
	return ToolSyntaxHermes
}

// String returns the template's name.
func (t Template) String() string { return t.Name }

// Apply renders msgs as a prompt, without tools: Render with
// RenderOptions{AddGenerationPrompt: addGenerationPrompt}.
func (t Template) Apply(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.Render(msgs, RenderOptions{AddGenerationPrompt: addGenerationPrompt})
}

// Render renders msgs as a prompt. With o.AddGenerationPrompt it appends
// the opening of an assistant turn for the model to complete. The prompt
// holds no BOS token (see the package documentation; a Jinja template
// keeps its bos_token unless JinjaOptions.AddsBOS). Render fails on an
// empty conversation and conversations the format cannot express; the
// named templates also on a role other than system, user, assistant or
// tool. The named templates render tools, tool calls and tool messages in
// the Hermes convention (foldTools): the offer of tools in <tools> tags at
// the end of the system message (after the default one where there is
// none), an assistant's calls in <tool_call> tags after its content, and
// tool messages as a user turn of <tool_response> blocks. A Jinja template's
// failure, its raise_exception included, is a *TemplateError.
func (t Template) Render(msgs []Message, o RenderOptions) (string, error) {
	if t.format == formatNone {
		return "", fmt.Errorf("%w: zero Template", ErrUnknownTemplate)
	}
	if len(msgs) == 0 {
		return "", ErrEmptyConversation
	}
	if t.format == formatJinja {
		return t.jinja.render(msgs, o)
	}
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return "", fmt.Errorf("%w %q in message %d (want system, user, assistant or tool)", ErrUnknownRole, m.Role, i)
		}
	}
	msgs, err := foldTools(msgs, o.Tools, t.DefaultSystem, true, true, true, false)
	if err != nil {
		return "", err
	}
	if t.format == formatGemma {
		return applyGemma(msgs, o.AddGenerationPrompt)
	}
	return t.applyChatML(msgs, o.AddGenerationPrompt), nil
}

func (t Template) applyChatML(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	turn := func(role, content string) {
		b.WriteString("<|im_start|>")
		b.WriteString(role)
		b.WriteString("\n")
		b.WriteString(content)
		b.WriteString("<|im_end|>\n")
	}
	if t.DefaultSystem != "" && msgs[0].Role != RoleSystem {
		turn(RoleSystem, t.DefaultSystem)
	}
	for _, m := range msgs {
		turn(m.Role, m.Content)
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

func applyGemma(msgs []Message, addGenerationPrompt bool) (string, error) {
	system := ""
	if msgs[0].Role == RoleSystem {
		system = strings.TrimSpace(msgs[0].Content)
		msgs = msgs[1:]
		if len(msgs) == 0 {
			return "", fmt.Errorf("sample: gemma: a system message needs a user message after it")
		}
	}
	var b strings.Builder
	for i, m := range msgs {
		if m.Role == RoleSystem {
			return "", fmt.Errorf("sample: gemma: a system message is only supported as the first message")
		}
		want := RoleUser
		if i%2 == 1 {
			want = RoleAssistant
		}
		if m.Role != want {
			return "", fmt.Errorf("sample: gemma: roles must alternate user/assistant/user/...; got %s for turn %d", m.Role, i)
		}
		role := "user"
		if m.Role == RoleAssistant {
			role = "model"
		}
		content := strings.TrimSpace(m.Content)
		if i == 0 && system != "" {
			content = system + "\n\n" + content
		}
		b.WriteString("<start_of_turn>")
		b.WriteString(role)
		b.WriteString("\n")
		b.WriteString(content)
		b.WriteString("<end_of_turn>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<start_of_turn>model\n")
	}
	return b.String(), nil
}
