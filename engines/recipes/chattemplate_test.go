package recipes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/data"
	chatfmt "github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// TestRenderChatJinja: fine-tuning data rendered through the Qwen2.5 and Gemma 2 files' own
// Jinja templates has the tokens and the assistant mask that the named qwen2.5 and gemma
// templates give (conversations with several replies, a system message for Qwen).
func TestRenderChatJinja(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "testdata", "vocab")
	read := func(name string) string {
		src, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			t.Skipf("test data not found: %v", err)
		}
		require.NoError(t, err)
		return string(src)
	}
	qwenSrc, gemmaSrc := read("Qwen-Qwen2.5-7B-Instruct.jinja"), read("google-gemma-2-2b-it.jinja")
	convs := [][]data.Message{
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"}, {Role: "assistant", Content: "Hello!"},
			{Role: "user", Content: " two\nlines "}, {Role: "assistant", Content: "ok, fine"}},
		{{Role: "user", Content: "What is 2+2?"}, {Role: "assistant", Content: " 4 "}},
	}
	var texts [][]byte
	for _, c := range convs {
		for _, m := range c {
			texts = append(texts, []byte(m.Content))
		}
	}
	tok, err := tokenizer.Train(slices.Values(texts), 300, tokenizer.TrainOptions{
		Special: []string{"<bos>", "<|im_start|>", "<|im_end|>", "<start_of_turn>", "<end_of_turn>"}, BOS: "<bos>", EOS: "<|im_end|>", AddBOS: true})
	require.NoError(t, err)
	for _, c := range []struct {
		named chatfmt.Template
		src   string
		convs [][]data.Message
	}{{chatfmt.Qwen25, qwenSrc, convs}, {chatfmt.Gemma, gemmaSrc, convs[1:]}} {
		jinja, err := chatfmt.NewJinjaTemplate(c.src, chatfmt.JinjaOptions{BOSToken: "<bos>", EOSToken: "<|im_end|>", AddsBOS: tok.Vocab().AddBOS})
		require.NoError(t, err)
		for i, conv := range c.convs {
			wantIDs, wantKept, err := renderChat(c.named, tok, conv)
			require.NoError(t, err)
			ids, kept, err := renderChat(jinja, tok, conv)
			require.NoError(t, err)
			assert.Equal(t, wantIDs, ids, "%s, conversation %d", c.named.Name, i)
			assert.Equal(t, wantKept, kept, "%s, conversation %d", c.named.Name, i)
			assert.Contains(t, kept, true)
		}
	}
}
