package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/transformer/transformertest"
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
	noBOS := transformertest.EditGGUF(t, good, filepath.Join(dir, "nobos.gguf"), clitest.SetKV(tokenizer.KeyAddBOS, false), nil)
	yesBOS := transformertest.EditGGUF(t, good, filepath.Join(dir, "bos.gguf"), clitest.SetKV(tokenizer.KeyAddBOS, true), nil)
	silent := transformertest.EditGGUF(t, good, filepath.Join(dir, "silent.gguf"), clitest.DropKV(tokenizer.KeyAddBOS), nil)
	ownTmpl := transformertest.EditGGUF(t, noBOS, filepath.Join(dir, "tmpl.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: chatml})
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
	broken := transformertest.EditGGUF(t, noBOS, filepath.Join(dir, "broken.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: "{% for m in messages %}\n{{ m.content }}\n{% frobnicate %}{% endfor %}"})
	_, errOut, code := runToy("generate", "-m", broken, "-p", "hi", "-chat", "-n", "2", "-t", "1")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "broken.gguf (tokenizer.chat_template): chat template line 3:")
	_, errOut, code = runToy("generate", "-m", broken, "-p", "hi", "-chat", "-n", "2", "-t", "1", "--temp", "0", "-template", "chatml")
	assert.Equal(t, 0, code, "-template overrides the file's template: %s", errOut)
	refuses := transformertest.EditGGUF(t, noBOS, filepath.Join(dir, "refuses.gguf"), nil, nil, gguffile.KV{Key: "tokenizer.chat_template", Value: "{% if messages[0].role == 'system' %}\n{{ raise_exception('System role not supported') }}{% endif %}{{ messages[-1].content }}"})
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
		"-runs", t.TempDir()}, clitest.TinyViTFlags...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, fmt.Sprintf("; %d threads;", perCore))
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
