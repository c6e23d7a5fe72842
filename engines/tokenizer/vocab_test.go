package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/internal/gguffile"
)

// vocabDir is llama.cpp's vocabulary test folder, beside the checkout.
const vocabDir = "../../../shared/testdata/vocab"

// readVocabCases reads a .inp/.out pair of llama.cpp's test-tokenizer-0.
func readVocabCases(t *testing.T, base string) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	require.NoError(t, err)
	out, err := os.ReadFile(base + ".out")
	require.NoError(t, err)
	inputs = strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	require.Equal(t, "", inputs[len(inputs)-1], "the .inp file ends with a separator")
	inputs = inputs[:len(inputs)-1]
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, len(inputs), "one .out line per input")
	for _, l := range lines {
		var ids []int32
		for _, f := range strings.Fields(l) {
			n, err := strconv.ParseInt(f, 10, 32)
			require.NoError(t, err)
			ids = append(ids, int32(n))
		}
		want = append(want, ids)
	}
	return inputs, want
}

func loadVocab(t *testing.T, path string) *Tokenizer {
	t.Helper()
	f, err := gguffile.ReadFile(path)
	require.NoError(t, err)
	tok, err := FromGGUF(f.Get)
	require.NoError(t, err)
	return tok
}

// TestLlamaCppVocabs encodes llama.cpp's test strings with its gpt2-model
// vocabularies and compares with the ids llama.cpp produced, then decodes
// them back.
func TestLlamaCppVocabs(t *testing.T) {
	if _, err := os.Stat(vocabDir); err != nil {
		t.Skipf("llama.cpp vocabulary test files not found at %s (they lie beside the checkout): %v", vocabDir, err)
	}
	for _, name := range []string{"ggml-vocab-gpt-2.gguf", "ggml-vocab-starcoder.gguf"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(vocabDir, name)
			tok := loadVocab(t, path)
			inputs, want := readVocabCases(t, path)
			pass := 0
			for i, in := range inputs {
				got := tok.Encode(in, EncodeOptions{})
				dec, err := tok.Decode(got, DecodeOptions{})
				require.NoError(t, err)
				okEnc := slices.Equal(got, want[i])
				if !okEnc {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, in, got, want[i])
				}
				if dec != in {
					t.Errorf("case %d %q: decodes to %q", i, in, dec)
				}
				if okEnc && dec == in {
					pass++
				}
			}
			t.Logf("%s (pre %q, %d tokens, %d merges): %d/%d cases pass", name, tok.Pre(),
				tok.VocabSize(), len(tok.Vocab().Merges), pass, len(inputs))
		})
	}
}

// TestLlamaCppPublishedVectors encodes llama.cpp's test strings with its falcon, deepseek-llm,
// deepseek-coder and bert-bge vocabularies (models/ggml-vocab-*.gguf and their .inp/.out,
// which the Hugging Face tokenizers wrote) and compares with the published ids. The shared test
// data does not hold these files yet: each is skipped when missing.
func TestLlamaCppPublishedVectors(t *testing.T) {
	for _, name := range []string{"falcon", "deepseek-llm", "deepseek-coder", "bert-bge"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(vocabDir, "ggml-vocab-"+name+".gguf")
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s not found (llama.cpp's models folder has it): %v", path, err)
			}
			tok := loadVocab(t, path)
			inputs, want := readVocabCases(t, path)
			pass := 0
			for i, in := range inputs {
				got := tok.Encode(in, EncodeOptions{})
				if slices.Equal(got, want[i]) {
					pass++
				} else {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, in, got, want[i])
				}
			}
			t.Logf("%s (%s, pre %q, %d tokens): %d/%d cases pass", name, tok.Model(), tok.Pre(), tok.VocabSize(), pass, len(inputs))
		})
	}
}
