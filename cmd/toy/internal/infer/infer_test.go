package infer

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/internal/gguffile"
)

// TestGenerateEndOfContext checks that generation that reaches the end of the context stops
// cleanly: status 0, the text ended by a newline, a note on stderr, as llama.cpp does; -n -1
// generates until then.
func TestGenerateEndOfContext(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	for _, n := range []string{"-1", "100"} {
		out, errOut, code := runToy("generate", "-m", model, "-p", "func main", "-c", "16", "-n", n, "-t", "1", "--temp", "0")
		require.Equal(t, 0, code, errOut)
		assert.True(t, strings.HasPrefix(out, "func main") && strings.HasSuffix(out, "\n"), "%q", out)
		assert.Contains(t, errOut, "the context of 16 tokens is full: stopped", "-n %s", n)
		assert.NotContains(t, out, "context")
	}
}

// TestGenerateSeed checks that without -seed each generation draws a seed and prints it, and
// that giving that seed repeats the generation.
func TestGenerateSeed(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	args := []string{"generate", "-m", model, "-p", "func", "-n", "16", "-t", "1", "--temp", "1.5", "--top-k", "0", "--min-p", "0", "--top-p", "1"}
	seedRe := regexp.MustCompile(`toy generate: seed (\d+) \(-seed \d+ repeats this generation\)`)
	out1, err1, code := runToy(args...)
	require.Equal(t, 0, code, err1)
	m1 := seedRe.FindStringSubmatch(err1)
	require.NotNil(t, m1, err1)
	_, err2, _ := runToy(args...)
	m2 := seedRe.FindStringSubmatch(err2)
	require.NotNil(t, m2, err2)
	assert.NotEqual(t, m1[1], m2[1], "two runs draw two seeds")

	again, errOut, code := runToy(append(args, "-seed", m1[1])...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, out1, again, "the printed seed repeats the generation")
	assert.NotContains(t, errOut, "seed", "an explicit seed is not announced")
	again2, _, _ := runToy(append(args, "-s", m1[1])...)
	assert.Equal(t, out1, again2)
	// OpenAI's penalties are accepted at the ends of their range (the sampler's tests check what they do).
	_, errOut, code = runToy(append(args, "-seed", m1[1], "--frequency-penalty", "2", "--presence-penalty", "-2")...)
	require.Equal(t, 0, code, errOut)
	// The weights mapped instead of read (and llama.cpp's -no-mmap, the default) change nothing.
	for _, load := range []string{"-mmap", "-no-mmap", "-no-mmap=false"} {
		again, errOut, code := runToy(append(args, "-seed", m1[1], load)...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, out1, again, load)
	}

	_, errOut, _ = runToy("generate", "-m", model, "-p", "func", "-n", "2", "-t", "1", "--temp", "0")
	assert.NotContains(t, errOut, "seed", "greedy decoding draws no seed")
}

// TestGenerateLogitBias: a bias of +100 on a token makes greedy decoding repeat it; bad biases
// and ids past the vocabulary are refused (exit 2).
func TestGenerateLogitBias(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	m, err := decoding.OpenModel(model, decoding.ModelOptions{Threads: 1})
	require.NoError(t, err)
	tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
	require.NoError(t, err)
	vocab := m.Arch.Vocab
	m.Close()
	x := tok.Encode("main", tokenizer.EncodeOptions{})[0]
	want, err := tok.Decode([]int32{x, x, x, x}, tokenizer.DecodeOptions{})
	require.NoError(t, err)
	args := []string{"generate", "-m", model, "-p", "func", "-n", "4", "-t", "1", "--temp", "0"}
	plain, errOut, code := runToy(args...)
	require.Equal(t, 0, code, errOut)
	out, errOut, code := runToy(append(args, "-logit-bias", fmt.Sprintf("%d+100", x), "-logit-bias", "0-5")...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "func"+want+"\n", out, "token %d four times", x)
	assert.NotEqual(t, plain, out)
	for _, bad := range []string{"abc", "5", "+5", "5+200", "5-nan", "x+1", fmt.Sprintf("%d+1", vocab)} {
		_, errOut, code := runToy(append(args, "-logit-bias", bad)...)
		assert.Equal(t, 2, code, "%s: %s", bad, errOut)
		assert.Contains(t, errOut, "logit-bias", bad)
	}
}

// TestThreadsNote checks that -t above the usable cores is clamped with one note on stderr.
func TestThreadsNote(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	out, errOut, code := runToy("generate", "-m", model, "-p", "func", "-n", "2", "-t", "1000", "--temp", "0")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "func"))
	assert.Equal(t, 1, strings.Count(errOut, "-t 1000 is more than the"), errOut)
	_, errOut, code = runToy("generate", "-m", model, "-p", "func", "-n", "2", "-t", "1", "--temp", "0")
	require.Equal(t, 0, code)
	assert.NotContains(t, errOut, "cores")
}

// TestInspectEscapes checks that control characters from a file never reach the terminal raw.
func TestInspectEscapes(t *testing.T) {
	good := clitest.TinyCheckpoint(t)
	evil := transformertest.EditGGUF(t, good, filepath.Join(t.TempDir(), "evil.gguf"), nil, nil,
		gguffile.KV{Key: "evil.\x1b[2Jkey", Value: "a\x1b]0;pwned\x07b\rc"},
		gguffile.KV{Key: "evil.list", Value: []string{"x\x1b[31m", "\x00y"}},
		gguffile.KV{Key: "evil.bytes", Value: "\xff\xfe"})
	out, errOut, code := runToy("inspect", "-full", evil)
	require.Equal(t, 0, code, errOut)
	for _, r := range out {
		if r != '\n' && r < 0x20 || r == 0x7f {
			t.Fatalf("inspect printed control character %U: %q", r, out)
		}
	}
	assert.Contains(t, out, `evil.\x1b[2Jkey`)
	assert.Contains(t, out, `"a\x1b]0;pwned\ab\rc"`)
	assert.Contains(t, out, `"\xff\xfe"`)
	assert.Equal(t, "x", escapeText("x"))
	assert.Equal(t, `\x00é\u200b`, escapeText("\x00é\u200b"))
}

// TestGeneratePromptSources: -f FILE and -p - (standard input) give what -p gives with the same
// text (one trailing newline dropped); llama.cpp's --n-predict and --ctx-size are -n and -c;
// the timing summary is on stderr, on lines of its own after a blank one; contradictions and
// unreadable prompts are refused, naming the flag.
func TestGeneratePromptSources(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	base := []string{"generate", "-m", model, "-n", "6", "-t", "1", "--temp", "0"}
	want, errOut, code := runToy(append(base, "-p", "func main")...)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(want, "func main") && strings.HasSuffix(want, "\n"), want)
	assert.Regexp(t, `(?:^|\n)\ntoy generate: load \d+ ms\ntoy generate: prompt \d+ tokens in \d+ ms: [0-9.]+ tokens/s\ntoy generate: generated 6 tokens; 5 after the first in \d+ ms: [0-9.]+ tokens/s\n$`, errOut)
	assert.NotContains(t, want, "toy generate", "the summary goes to stderr")

	for name, text := range map[string]string{"plain": "func main", "newline": "func main\n", "crlf": "func main\r\n"} {
		file := filepath.Join(dir, name+".txt")
		require.NoError(t, os.WriteFile(file, []byte(text), 0o644))
		got, errOut, code := runToy(append(base, "-f", file)...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, want, got, "-f %q", text)
		got, errOut, code = runToy(append(base, "--file", file)...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, want, got, "--file %q", text)

		withStdin(t, strings.NewReader(text))
		got, errOut, code = runToy(append(base, "-p", "-")...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, want, got, "-p - with %q", text)
	}
	// Only one trailing newline goes: a blank line that ends the text is part of it.
	two := filepath.Join(dir, "two.txt")
	require.NoError(t, os.WriteFile(two, []byte("func main\n\n"), 0o644))
	got, errOut, code := runToy(append(base, "-f", two)...)
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(got, "func main\n"), got)

	got, errOut, code = runToy("generate", "-m", model, "--n-predict", "6", "-t", "1", "--temp", "0", "-p", "func main")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, want, got, "--n-predict is -n")
	for _, c := range []string{"-c", "--ctx-size"} {
		_, errOut, code = runToy("generate", "-m", model, "-n", "-1", "-t", "1", "--temp", "0", "-p", "func main", c, "16")
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, errOut, "the context of 16 tokens is full", c)
	}

	notUTF8 := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(notUTF8, []byte("func \xff\n"), 0o644))
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-p", "x", "-f", two}, 2, "-p and -f both give the prompt"},
		{[]string{"-f", filepath.Join(dir, "absent.txt")}, 1, "-f: "},
		{[]string{"-f", dir}, 1, "is a directory"},
		{[]string{"-f", notUTF8}, 1, "not UTF-8"},
	} {
		out, errOut, code := runToy(append(base, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, c.msg, c.args)
	}
}
