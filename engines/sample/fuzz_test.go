package sample

import (
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
