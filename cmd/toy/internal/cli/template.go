package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// ErrNoChatTemplate: the model file has no tokenizer.chat_template and no template is named.
var ErrNoChatTemplate = errors.New("the model has no chat template (no tokenizer.chat_template, and no kernel-table entry names it); name one with -template")

// TemplateUsage is the help of a command's -template: the built-in chat templates' names
// (engines/sample's TemplateNames), what the template is used for (forWhat, e.g. " for .jsonl
// data") and whose tokenizer.chat_template it stands in for.
func TemplateUsage(forWhat, whose string) string {
	return fmt.Sprintf("a built-in chat template%s instead of the model's own: %s (default: %s tokenizer.chat_template, rendered as Jinja)",
		forWhat, strings.Join(sample.TemplateNames(), ", "), whose)
}

// CheckTemplateName refuses a -template that names no built-in chat template (sample.TemplateByName,
// whose error lists them) before a command loads anything; "" (the model's own) passes.
func CheckTemplateName(name string) error {
	if name == "" {
		return nil
	}
	if _, err := sample.TemplateByName(name); err != nil {
		return fmt.Errorf("-template: %w", err)
	}
	return nil
}

// ChatTemplate picks the template named, or else the model's own tokenizer.chat_template
// rendered as Jinja (its bos_token and eos_token the tokenizer's, a leading bos_token dropped
// when addBOS puts the BOS token first). A file's template that does not compile is an error
// naming the file (its base name: serve's clients see render errors) and the template's line;
// no named template stands in for it.
func ChatTemplate(m *decoding.GGUFModel, tok *tokenizer.Tokenizer, name string, addBOS bool) (sample.Template, error) {
	if name != "" {
		return sample.TemplateByName(name)
	}
	src, _ := m.Meta["tokenizer.chat_template"].(string)
	if src == "" {
		return sample.Template{}, ErrNoChatTemplate
	}
	return sample.NewJinjaTemplate(src, sample.JinjaOptions{Source: filepath.Base(m.Path()) + " (tokenizer.chat_template)",
		BOSToken: tok.Token(tok.BOS()), EOSToken: tok.Token(tok.EOS()), AddsBOS: addBOS})
}
