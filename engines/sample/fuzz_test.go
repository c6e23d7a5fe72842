package sample

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzChatTemplate detects a template from arbitrary jinja text and renders arbitrary messages
// with it and with every named template: never a panic; a detected template is one toy knows;
// a rendered conversation holds every message's text and ends with the generation prompt.
func FuzzChatTemplate(f *testing.F) {
	f.Add("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "Be brief.", "Hi", "Hello!", true)
	f.Add("{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}", "", "What is Go?", "", false)
	f.Add("<start_of_turn>user\n{{ content }}<end_of_turn>", "sys", "  spaced  ", "ok", true)
	f.Add("", "", "", "", false)
	f.Add("'<|im_start|>system\n\\n\\'{}+<|im_end|>'", "<|im_end|>", "<start_of_turn>", "\x00\xff", true)
	f.Fuzz(func(t *testing.T, jinja, system, user, assistant string, gen bool) {
		tmpls := []Template{ChatML, SmolLM2, Qwen25, Gemma}
		if d, err := DetectTemplate(jinja); err == nil {
			switch d.format {
			case formatChatML, formatGemma:
			default:
				t.Fatalf("DetectTemplate(%q) gave a template of format %v", jinja, d.format)
			}
			tmpls = append(tmpls, d)
		}
		convs := [][]Message{
			{{Role: RoleUser, Content: user}},
			{{Role: RoleSystem, Content: system}, {Role: RoleUser, Content: user}},
			{{Role: RoleUser, Content: user}, {Role: RoleAssistant, Content: assistant}, {Role: RoleUser, Content: user}},
			{{Role: RoleSystem, Content: system}},
			{{Role: RoleUser, Content: user}, {Role: RoleSystem, Content: system}},
			{{Role: user, Content: assistant}},
		}
		for _, tm := range tmpls {
			for _, msgs := range convs {
				out, err := tm.Apply(msgs, gen)
				if err != nil {
					continue
				}
				for _, m := range msgs {
					if !strings.Contains(out, strings.TrimSpace(m.Content)) {
						t.Fatalf("%s: %q does not hold message %q", tm, out, m.Content)
					}
				}
				if gen && !strings.HasSuffix(out, "\n") {
					t.Fatalf("%s: the generation prompt of %q does not end a line", tm, out)
				}
				_ = tm.StopStrings()
				_ = tm.EndOfTurn()
			}
		}
	})
}

// FuzzJinjaTemplate compiles arbitrary Jinja text as a chat template and renders conversations of
// arbitrary roles, contents, tool calls and tools through it and through the shipped Qwen2.5 and
// Gemma templates (when the shared test data is present): never a panic, every failure a
// *TemplateError or a bad tool definition; Qwen's rendering holds every message's text, and
// agrees with the named qwen2.5 template where that one renders the conversation.
func FuzzJinjaTemplate(f *testing.F) {
	f.Add("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}", "user", "Hi", "Hello!", `{"a": 1}`, true)
	f.Add("{{ raise_exception('no ' + messages[0].role) }}", "system", "", "", `[1,`, false)
	f.Add("{% for t in tools %}{{ t | tojson }}{% endfor %}{{ messages[5].content }}", "tool", "{{", "}}", `{"type":"function"}`, true)
	f.Add("{% if %}", "assistant", "\x00", "\xff", "null", false)
	f.Add("{{ strftime_now('%Y') }}{{ bos_token }}{{ eos_token }}{% set x = namespace(n=0) %}{{ x.n + 1 }}", "developer", "a", "b", "", true)
	dir := filepath.Join("..", "..", "..", "shared", "testdata", "vocab")
	var shipped []string
	for _, name := range []string{"Qwen-Qwen2.5-7B-Instruct.jinja", "google-gemma-2-2b-it.jinja"} {
		if src, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			shipped = append(shipped, string(src))
			f.Add(string(src), "user", "Hi", "Hello", `{"type":"function","function":{"name":"f"}}`, true)
		}
	}
	f.Fuzz(func(t *testing.T, src, role, user, assistant, tool string, gen bool) {
		msgs := []Message{
			{Role: RoleUser, Content: user},
			{Role: RoleAssistant, Content: assistant, ToolCalls: []ToolCall{{ID: "c", Name: role, Arguments: tool}}},
			{Role: RoleTool, ToolCallID: "c", Content: tool},
			{Role: role, Content: user},
			{Role: RoleAssistant, Content: assistant},
		}
		opts := []RenderOptions{{AddGenerationPrompt: gen}, {AddGenerationPrompt: !gen, Tools: []json.RawMessage{json.RawMessage(tool)}}}
		for k, s := range append([]string{src}, shipped...) {
			if k == 0 && (strings.Contains(s, "macro") || strings.Contains(s, "range") || strings.Contains(s, "*") || strings.Contains(s, "recursive")) {
				continue // unbounded recursion and huge loops are the engine's known limits (docs/INFERENCE.md)
			}
			tmpl, err := NewJinjaTemplate(s, JinjaOptions{Source: "fuzz.gguf", BOSToken: "<bos>", EOSToken: "<eos>", AddsBOS: gen})
			if err != nil {
				var te *TemplateError
				if !errors.As(err, &te) || k > 0 {
					t.Fatalf("template %d: %v", k, err)
				}
				continue
			}
			_, _ = tmpl.StopStrings(), tmpl.EndOfTurn()
			for n := 1; n <= len(msgs); n++ {
				for _, o := range opts {
					out, err := tmpl.Render(msgs[:n], o)
					if err != nil {
						var te *TemplateError
						if !errors.As(err, &te) && !strings.HasPrefix(err.Error(), "sample: tool ") {
							t.Fatalf("template %d: %v is not a TemplateError", k, err)
						}
						continue
					}
					if k == 1 { // Qwen2.5's writes every content
						for _, m := range msgs[:n] {
							if !strings.Contains(out, m.Content) {
								t.Fatalf("Qwen's rendering %q lacks %q", out, m.Content)
							}
						}
						if len(o.Tools) == 0 && n == 1 {
							want, err := Qwen25.Render(msgs[:n], o)
							if err != nil || want != out {
								t.Fatalf("Qwen's template gave %q, the named one %q (%v)", out, want, err)
							}
						}
					}
				}
			}
		}
	})
}
