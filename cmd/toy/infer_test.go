package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/cmd/toy/internal/infer"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// TestBehaviourFileWins checks that a GGUF's own tokenizer metadata decides BOS and chat
// template, that a table entry fills only what the file lacks, and only when it names the
// model.
func TestBehaviourFileWins(t *testing.T) {
	good := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	chatml := "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
	noBOS := clitest.EditGGUF(t, good, filepath.Join(dir, "nobos.gguf"), clitest.SetKV(tokenizer.KeyAddBOS, false), nil)
	yesBOS := clitest.EditGGUF(t, good, filepath.Join(dir, "bos.gguf"), clitest.SetKV(tokenizer.KeyAddBOS, true), nil)
	silent := clitest.EditGGUF(t, good, filepath.Join(dir, "silent.gguf"), clitest.DropKV(tokenizer.KeyAddBOS), nil)
	ownTmpl := clitest.EditGGUF(t, noBOS, filepath.Join(dir, "tmpl.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: chatml})
	entry := &kernels.Model{Name: "named", Behaviour: &kernels.Behaviour{AddBOS: true, ChatTemplate: "gemma", Stop: []string{"<end_of_turn>"}}}
	open := func(path string) (*decoding.GGUFModel, *tokenizer.Tokenizer) {
		m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		tok, err := tokenizer.FromGGUF(func(k string) (any, bool) { v, ok := m.Meta[k]; return v, ok })
		require.NoError(t, err)
		return m, tok
	}

	m, tok := open(noBOS)
	for _, named := range []bool{false, true} {
		b := cli.ModelBehaviour(m, tok, entry, named)
		assert.False(t, b.AddBOS, "add_bos false in the file wins (named %v)", named)
	}
	b := cli.ModelBehaviour(m, tok, entry, false)
	assert.Empty(t, b.Template, "an entry that does not name the model imposes no template")
	assert.Empty(t, b.Stops)
	b = cli.ModelBehaviour(m, tok, entry, true)
	assert.Equal(t, "gemma", b.Template, "the file has none: a named entry fills it")
	assert.Equal(t, []string{"<end_of_turn>"}, b.Stops)

	m, tok = open(yesBOS)
	assert.True(t, cli.ModelBehaviour(m, tok, &kernels.Model{Behaviour: &kernels.Behaviour{AddBOS: false}}, true).AddBOS, "add_bos true in the file wins")

	m, tok = open(silent)
	def := tok.Vocab().AddBOS
	assert.Equal(t, def, cli.ModelBehaviour(m, tok, entry, false).AddBOS, "the file silent, no named entry: the tokenizer's default")
	assert.Equal(t, true, cli.ModelBehaviour(m, tok, entry, true).AddBOS, "the file silent: a named entry fills it")
	assert.Equal(t, false, cli.ModelBehaviour(m, tok, &kernels.Model{Behaviour: &kernels.Behaviour{AddBOS: false}}, true).AddBOS)

	m, tok = open(ownTmpl)
	b = cli.ModelBehaviour(m, tok, entry, true)
	assert.Empty(t, b.Template, "the file's template wins over the entry's")
	tmpl, err := cli.ChatTemplate(m, tok, b.Template, false)
	require.NoError(t, err)
	assert.Equal(t, "jinja", tmpl.Name, "the file's own template is rendered as Jinja")
	conv := []sample.Message{{Role: sample.RoleSystem, Content: "s"}, {Role: sample.RoleUser, Content: "u"}}
	got, err := tmpl.Apply(conv, false)
	require.NoError(t, err)
	want, err := sample.ChatML.Apply(conv, false)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Through the command: the file's template serves -chat; none at all is the documented error.
	// A file's template that does not compile, or refuses the conversation, is an error naming
	// the file and the template's line; no named template stands in for it.
	broken := clitest.EditGGUF(t, noBOS, filepath.Join(dir, "broken.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: "{% for m in messages %}\n{{ m.content }}\n{% frobnicate %}{% endfor %}"})
	_, errOut, code := runToy("generate", "-m", broken, "-p", "hi", "-chat", "-n", "2", "-t", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "broken.gguf (tokenizer.chat_template): chat template line 3:")
	_, errOut, code = runToy("generate", "-m", broken, "-p", "hi", "-chat", "-n", "2", "-t", "1", "--temp", "0", "-template", "chatml")
	assert.Equal(t, 0, code, "-template overrides the file's template: %s", errOut)
	refuses := clitest.EditGGUF(t, noBOS, filepath.Join(dir, "refuses.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: "{% if messages[0].role == 'system' %}\n{{ raise_exception('System role not supported') }}{% endif %}{{ messages[-1].content }}"})
	_, errOut, code = runToy("generate", "-m", refuses, "-p", "hi", "-system", "be brief", "-chat", "-n", "2", "-t", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "refuses.gguf (tokenizer.chat_template): chat template line 2 refuses the conversation: System role not supported")
	_, errOut, code = runToy("serve", "-m", broken, "-t", "1", "-addr", "127.0.0.1:0")
	assert.Equal(t, 1, code, "serve refuses a template that does not compile")
	assert.Contains(t, errOut, "broken.gguf (tokenizer.chat_template): chat template line 3:")

	_, errOut, code = runToy("generate", "-m", ownTmpl, "-p", "hi", "-chat", "-n", "2", "-t", "1", "--temp", "0")
	assert.Equal(t, 0, code, errOut)
	out, errOut, code := runToy("generate", "-m", noBOS, "-p", "hi", "-chat", "-n", "2", "-t", "1")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "the model has no chat template")

	// The compiled table's llama entry names every llama model (its match name is "llama") but
	// declares no behaviour: nothing is imposed on toy's checkpoints.
	for _, tg := range kernels.Compiled() {
		if string(tg.Backend) != ggml.BackendKind {
			continue
		}
		for _, mdl := range tg.Models {
			if mdl.Name == "llama" {
				assert.Nil(t, mdl.Behaviour)
			}
		}
	}
}

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

// TestThreadsZeroIsOnePerCore: -t 0 is one thread per usable core in every command that takes
// it (the Compute group's help says so): cli.UsableThreads turns it into that number without a
// note, toy bench model (which refused it) measures with and reports that many, and toy train
// -arch vit (which computed with one) trains with that many.
func TestThreadsZeroIsOnePerCore(t *testing.T) {
	perCore, _ := ggml.UsableThreads(0)
	threads, note := 0, &strings.Builder{}
	require.NoError(t, cli.UsableThreads(note, "generate", &threads))
	if ggml.BackendKind == "cpu" {
		assert.Equal(t, perCore, threads)
	}
	assert.Empty(t, note.String())
	assert.Contains(t, config.ComputeOptions()[0].Usage, "0: one per core")

	model := clitest.TinyCheckpoint(t)
	out, errOut, code := runToy("bench", "model", "-m", model, "-p", "4", "-n", "2", "-r", "1", "-t", "0")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, fmt.Sprintf(", %d threads,", perCore))

	shapes := filepath.Join(t.TempDir(), "shapes")
	require.NoError(t, data.WriteShapesFolder(shapes, 60, 16, 1))
	out, errOut, code = runToy(append([]string{"train-vit", "-data", shapes, "-steps", "1", "-warmup", "0", "-t", "0",
		"-runs", t.TempDir()}, tinyViTFlags...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, fmt.Sprintf("; %d threads;", perCore))
}

// TestInspectEscapes checks that control characters from a file never reach the terminal raw.
func TestInspectEscapes(t *testing.T) {
	good := clitest.TinyCheckpoint(t)
	evil := clitest.EditGGUF(t, good, filepath.Join(t.TempDir(), "evil.gguf"), nil, nil,
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
	assert.Equal(t, "x", infer.EscapeText("x"))
	assert.Equal(t, `\x00é\u200b`, infer.EscapeText("\x00é\u200b"))
}

// TestOverwrite checks the output rules: -force replaces a file of the same kind; plot
// replaces its own default loss.png; the write is whole (temp + rename).
func TestOverwrite(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("if err != nil { return err }\nfunc main() {}\n", 30)), 0o644))
	tok := filepath.Join(dir, "tok.gguf")
	_, errOut, code := runToy("tokenizer", "train", "-vocab", "270", "-o", tok, text)
	require.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("tokenizer", "train", "-vocab", "270", "-o", tok, text)
	require.Equal(t, 1, code)
	assert.Contains(t, errOut, "-force replaces it")
	_, errOut, code = runToy("tokenizer", "train", "-vocab", "270", "-force", "-o", tok, text)
	require.Equal(t, 0, code, errOut)

	// Fewer tokens than asked: said on stderr.
	_, errOut, code = runToy("tokenizer", "train", "-vocab", "60000", "-o", filepath.Join(dir, "big.gguf"), text)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "of the 60000 asked for")

	corpus := filepath.Join(dir, "c.tok")
	_, errOut, code = runToy("tokenize", "-tokenizer", tok, "-o", corpus, text)
	require.Equal(t, 0, code, errOut)
	_, errOut, code = runToy("tokenize", "-tokenizer", tok, "-force", "-o", corpus, text)
	require.Equal(t, 0, code, errOut)
	empty := filepath.Join(dir, "empty.tok")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, errOut, code = runToy("tokenize", "-tokenizer", tok, "-force", "-o", empty, text)
	require.Equal(t, 0, code, errOut)

	run := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(run, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(run, "events.jsonl"), []byte(`{"schema":"toy/v1","type":"run_start","run_id":"r","time":"2026-01-02T03:04:05Z","backend":{"kind":"cpu"},"model":{},"config":null,"seeds":{"init":7,"data":7}}`+"\n"+`{"type":"step","step":1,"loss":2.5,"lr":0.001,"tokens_per_s":100,"time":"2026-01-02T03:04:06Z"}`+"\n"), 0o644))
	for range 2 {
		_, errOut, code = runToy("plot", run)
		require.Equal(t, 0, code, "the default loss.png is replaced: %s", errOut)
	}
	png := filepath.Join(dir, "p.png")
	_, errOut, code = runToy("plot", "-o", png, run)
	require.Equal(t, 0, code, errOut)
	_, _, code = runToy("plot", "-o", png, run)
	require.Equal(t, 1, code)
	_, errOut, code = runToy("plot", "-force", "-o", png, run)
	require.Equal(t, 0, code, errOut)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.Contains(e.Name(), ".tmp"), "a temporary file left: %s", e.Name())
	}
}

// withStdin makes text toy's standard input for the rest of the test.
func withStdin(t *testing.T, r io.Reader) {
	prev := infer.Stdin
	infer.Stdin = r
	t.Cleanup(func() { infer.Stdin = prev })
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

// TestBenchSaveRandom keeps bench model's random model: the file holds the preset's shape with
// a synthetic tokenizer of its vocabulary, so that it loads as any model does (toy generate
// runs it; llama.cpp's llama-bench runs the same file). -save-random needs -random.
func TestBenchSaveRandom(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "demo-q8.gguf")
	_, errOut, code := runToy("bench", "model", "-random", "demo", "-random-type", "q8_0", "-save-random", saved, "-p", "4", "-n", "2", "-r", "1", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "saved as "+saved)
	out, errOut, code := runToy("generate", "-m", saved, "-p", "ab", "-n", "3", "--temp", "0", "-t", "1")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "ab"), out)
	out, _, code = runToy("inspect", saved)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "q8_0")
	assert.Contains(t, out, "tokenizer.ggml.model")
	_, errOut, code = runToy("bench", "model", "-m", saved, "-save-random", saved)
	assert.Equal(t, 2, code, errOut)
}
