package main

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/internal/gguffile"
)

// fillF32 returns an editTensor that sets every value of tensor name (f32) to v.
func fillF32(name string, v float32) func(ti gguffile.TensorInfo, data []byte) (gguffile.TensorInfo, []byte, bool) {
	return func(ti gguffile.TensorInfo, data []byte) (gguffile.TensorInfo, []byte, bool) {
		if ti.Name == name && ti.Type == gguffile.TypeF32 {
			for i := 0; i+4 <= len(data); i += 4 {
				binary.LittleEndian.PutUint32(data[i:], math.Float32bits(v))
			}
		}
		return ti, data, true
	}
}

// hashTree hashes every regular file under dir (FIFOs and the like by their mode).
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			out[p] = info.Mode().String()
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	}))
	return out
}

// TestBadInput runs toy as a user does on a corpus of bad input made here: malformed and
// poisoned GGUF files, FIFOs and directories where files belong, degenerate flags and
// overwrite attempts. Every case must fail with its exit status (1: the command failed, 2: a
// bad invocation) and a message on stderr, write nothing to stdout, change no file, and finish
// within a deadline: no crash, no hang, no silent wrong result.
func TestBadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a model and a tokenizer")
	}
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	write := func(name string, data []byte) string {
		require.NoError(t, os.WriteFile(p(name), data, 0o644))
		return p(name)
	}
	fifo := func(name string) string {
		require.NoError(t, syscall.Mkfifo(p(name), 0o644))
		return p(name)
	}

	good := clitest.TinyCheckpoint(t)
	raw, err := os.ReadFile(good)
	require.NoError(t, err)
	model := write("model.gguf", raw)
	text := write("text.txt", []byte(strings.Repeat("if err != nil { return err }\nfunc main() { return nil }\n", 20)))
	require.NoError(t, os.Mkdir(p("adir"), 0o755))

	// Malformed files: no command that reads a GGUF may crash on them.
	malformed := map[string]string{
		"empty":       write("empty.gguf", nil),
		"garbage":     write("garbage.gguf", []byte(strings.Repeat("\x00\xffnot a gguf", 100))),
		"magic only":  write("magic.gguf", []byte("GGUF")),
		"trunc 1%":    write("trunc1.gguf", raw[:len(raw)/100]),
		"trunc 50%":   write("trunc50.gguf", raw[:len(raw)/2]),
		"trunc -1":    write("trunc99.gguf", raw[:len(raw)-1]),
		"version 99":  write("v99.gguf", append([]byte("GGUF\x63\x00\x00\x00"), raw[8:]...)),
		"huge counts": write("huge.gguf", append([]byte("GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x7f"), raw[16:]...)),
		"directory":   p("adir"),
		"not gguf":    write("text.gguf", []byte("hello\n")),
		"fifo":        fifo("fifo.gguf"),
		"missing":     p("none.gguf"),
	}
	// Well-formed files whose contents are wrong: a model command must refuse them.
	poisoned := map[string]string{
		"nan weights":   transformertest.EditGGUF(t, good, p("nan.gguf"), nil, fillF32("output_norm.weight", float32(math.NaN()))),
		"inf weights":   transformertest.EditGGUF(t, good, p("inf.gguf"), nil, fillF32("token_embd.weight", float32(math.Inf(1)))),
		"nan rope base": transformertest.EditGGUF(t, good, p("nanrope.gguf"), clitest.SetKV("llama.rope.freq_base", float32(math.NaN())), nil),
		"negative eps":  transformertest.EditGGUF(t, good, p("negeps.gguf"), clitest.SetKV("llama.attention.layer_norm_rms_epsilon", float32(-1e-5)), nil),
		"nan eps":       transformertest.EditGGUF(t, good, p("naneps.gguf"), clitest.SetKV("llama.attention.layer_norm_rms_epsilon", float32(math.NaN())), nil),
		"zero heads":    transformertest.EditGGUF(t, good, p("heads0.gguf"), clitest.SetKV("llama.attention.head_count", uint32(0)), nil),
		"unknown arch":  transformertest.EditGGUF(t, good, p("arch.gguf"), clitest.SetKV("general.architecture", "frobnitz"), nil),
		"missing tensor": transformertest.EditGGUF(t, good, p("notensor.gguf"), nil, func(ti gguffile.TensorInfo, d []byte) (gguffile.TensorInfo, []byte, bool) {
			return ti, d, ti.Name != "output_norm.weight"
		}),
		"misshapen tensor": transformertest.EditGGUF(t, good, p("shape.gguf"), nil, func(ti gguffile.TensorInfo, d []byte) (gguffile.TensorInfo, []byte, bool) {
			if ti.Name == "output_norm.weight" {
				ti.Ne[0] /= 2
				d = d[:len(d)/2]
			}
			return ti, d, true
		}),
	}
	noTok := transformertest.EditGGUF(t, good, p("notok.gguf"), clitest.DropKV("tokenizer."), nil)
	noTmpl := model // toy's checkpoints carry no chat template

	// Files that outputs must not replace.
	png := write("loss.png", []byte("\x89PNG\r\n\x1a\nnot really"))
	corpus := write("corpus.tok", []byte("TOYTOKS\n\x01\x00\x00\x00"))
	tokGGUF := p("tok.gguf")
	_, errOut, code := runToy("tokenizer", "train", "-vocab", "280", "-o", tokGGUF, text)
	require.Equal(t, 0, code, errOut)
	runDir := p("run")
	require.NoError(t, os.Mkdir(runDir, 0o755))
	write("run/events.jsonl", []byte(`{"schema":"toy/v1","type":"run_start","run_id":"r","time":"2026-01-02T03:04:05Z","backend":{"kind":"cpu"},"model":{},"config":null,"seeds":{"init":7,"data":7}}`+"\n"+`{"type":"step","step":1,"loss":2.5,"lr":0.001,"tokens_per_s":100,"time":"2026-01-02T03:04:06Z"}`+"\n"))
	badRun := p("badrun")
	require.NoError(t, os.Mkdir(badRun, 0o755))
	write("badrun/events.jsonl", []byte("not json\n"))
	textFifo := fifo("text.fifo")
	emptyText := write("empty.txt", nil)

	type tc struct {
		name string
		args []string
		code int
		msg  string // a substring of stderr ("" : any message)
	}
	var cases []tc
	gen := func(m string, extra ...string) []string {
		return append([]string{"generate", "-m", m, "-p", "func", "-n", "4", "-t", "1"}, extra...)
	}
	ppl := func(m string, extra ...string) []string {
		return append([]string{"perplexity", "-m", m, "-f", text, "-c", "16", "-t", "1"}, extra...)
	}
	bench := func(m string) []string {
		return []string{"bench", "model", "-m", m, "-p", "4", "-n", "2", "-r", "1", "-t", "1"}
	}
	for name, f := range malformed {
		cases = append(cases,
			tc{"generate " + name, gen(f), 1, ""},
			tc{"perplexity " + name, ppl(f), 1, ""},
			tc{"bench model " + name, bench(f), 1, ""},
			tc{"inspect " + name, []string{"inspect", f}, 1, ""},
			tc{"kernels " + name, []string{"kernels", f}, 1, ""},
			tc{"tokenize -tokenizer " + name, []string{"tokenize", "-tokenizer", f, "-o", p("out.tok"), text}, 1, ""},
			tc{"generate -lora " + name, gen(model, "-lora", f), 1, ""},
		)
	}
	for name, f := range poisoned {
		cases = append(cases,
			tc{"generate " + name, gen(f), 1, ""},
			tc{"perplexity " + name, ppl(f), 1, ""},
		)
	}
	cases = append(cases,
		tc{"generate without a tokenizer", gen(noTok), 1, "tokenizer"},
		tc{"perplexity without a tokenizer", ppl(noTok), 1, "tokenizer"},
		tc{"generate -chat without a template", gen(noTmpl, "-chat"), 1, "no chat template"},
		tc{"generate -template unknown", gen(model, "-chat", "-template", "vicuna"), 1, "vicuna"},
		tc{"generate -n -2", gen(model, "-n", "-2"), 2, "-n -2"},
		tc{"generate -t -1", gen(model, "-t", "-1"), 2, "-t -1"},
		tc{"generate -c -5", gen(model, "-c", "-5"), 2, "-c -5"},
		tc{"generate -b -1", gen(model, "-b", "-1"), 2, "-b -1"},
		tc{"generate -kv-type q8_0 without -fa", gen(model, "-kv-type", "q8_0"), 1, "flash attention"},
		tc{"generate -ctx-full wrap", gen(model, "-ctx-full", "wrap"), 2, "wrap"},
		tc{"generate --temp NaN", gen(model, "--temp", "NaN"), 2, ""},
		tc{"generate --top-p 2", gen(model, "--top-p", "2"), 2, ""},
		tc{"generate --frequency-penalty 3", gen(model, "--frequency-penalty", "3"), 2, "frequency penalty"},
		tc{"generate --presence-penalty NaN", gen(model, "--presence-penalty", "NaN"), 2, "presence penalty"},
		tc{"generate --seed x", gen(model, "--seed", "x"), 2, "-seed"},
		tc{"generate prompt beyond the context", gen(model, "-p", strings.Repeat("func main ", 40), "-c", "8"), 1, "context"},
		tc{"generate empty prompt without BOS", gen(model, "-p", ""), 1, "no tokens"},
		tc{"generate -lora a model", gen(model, "-lora", model), 1, ""},
		tc{"perplexity -c 1", ppl(model, "-c", "1"), 2, "at least 3"},
		tc{"perplexity -c 2", ppl(model, "-c", "2"), 2, "at least 3"},
		tc{"perplexity -chunks -1", ppl(model, "-chunks", "-1"), 2, "-chunks -1"},
		tc{"perplexity text too short", ppl(model, "-c", "64", "-f", write("short.txt", []byte("func"))), 1, "fewer than one chunk"},
		tc{"perplexity -f missing", []string{"perplexity", "-m", model, "-f", p("none.txt")}, 1, "none.txt"},
		tc{"perplexity -f directory", []string{"perplexity", "-m", model, "-f", p("adir")}, 1, "adir"},
		tc{"perplexity -f FIFO", []string{"perplexity", "-m", model, "-f", textFifo}, 1, "text.fifo"},
		tc{"perplexity -f empty", []string{"perplexity", "-m", model, "-f", emptyText, "-c", "16"}, 1, "fewer than one chunk"},
		tc{"bench model -t -1", []string{"bench", "model", "-m", model, "-t", "-1"}, 2, "-t -1"},
		tc{"bench model -d -1", []string{"bench", "model", "-m", model, "-d", "-1"}, 2, "-d -1"},
		tc{"bench model -d with -draft", []string{"bench", "model", "-m", model, "-d", "8", "-draft", model}, 2, "without -draft"},
		tc{"bench model -d past the context", []string{"bench", "model", "-m", model, "-d", "100000", "-p", "4", "-n", "2", "-r", "1", "-t", "1"}, 1, "do not fit"},
		tc{"bench model -random -d past the context", []string{"bench", "model", "-random", "smollm2-135m", "-d", "100000"}, 2, "smollm2-135m's context"},
		tc{"inspect two files", []string{"inspect", model, model}, 2, "name one GGUF file"},
		// Overwrite attempts.
		tc{"tokenizer train -o a model", []string{"tokenizer", "train", "-vocab", "280", "-o", model, text}, 1, "-force"},
		tc{"tokenizer train -o a model -force", []string{"tokenizer", "train", "-vocab", "280", "-force", "-o", model, text}, 1, "GGUF model"},
		tc{"tokenizer train -o a tokenizer", []string{"tokenizer", "train", "-vocab", "280", "-o", tokGGUF, text}, 1, "-force"},
		tc{"tokenizer train -o a PNG -force", []string{"tokenizer", "train", "-vocab", "280", "-force", "-o", png, text}, 1, "PNG image"},
		tc{"tokenizer train -o a directory", []string{"tokenizer", "train", "-vocab", "280", "-force", "-o", p("adir"), text}, 1, "directory"},
		tc{"tokenizer train -o a FIFO", []string{"tokenizer", "train", "-vocab", "280", "-force", "-o", fifo("out.fifo"), text}, 1, "not a regular file"},
		tc{"tokenizer train -o the text", []string{"tokenizer", "train", "-vocab", "280", "-force", "-o", text, text}, 1, "another kind"},
		tc{"tokenizer train -vocab 0", []string{"tokenizer", "train", "-vocab", "0", "-o", p("t0.gguf"), text}, 2, "-vocab 0"},
		tc{"tokenizer train on a FIFO", []string{"tokenizer", "train", "-o", p("t1.gguf"), textFifo}, 1, ""},
		tc{"tokenizer train on nothing", []string{"tokenizer", "train", "-o", p("t2.gguf"), p("none.txt")}, 1, ""},
		tc{"tokenize -o a model", []string{"tokenize", "-tokenizer", tokGGUF, "-o", model, text}, 1, "-force"},
		tc{"tokenize -o a model -force", []string{"tokenize", "-tokenizer", tokGGUF, "-force", "-o", model, text}, 1, "GGUF model"},
		tc{"tokenize -o a corpus", []string{"tokenize", "-tokenizer", tokGGUF, "-o", corpus, text}, 1, "-force"},
		tc{"tokenize -o the text -force", []string{"tokenize", "-tokenizer", tokGGUF, "-force", "-o", text, text}, 1, "another kind"},
		tc{"tokenize -tokenizer without one", []string{"tokenize", "-tokenizer", noTok, "-o", p("x.tok"), text}, 1, ""},
		tc{"tokenize -max-text-bytes -1", []string{"tokenize", "-tokenizer", tokGGUF, "-max-text-bytes", "-1", "-o", p("y.tok"), text}, 2, "negative"},
		tc{"plot -o a model", []string{"plot", "-o", model, runDir}, 1, "-force"},
		tc{"plot -o a model -force", []string{"plot", "-force", "-o", model, runDir}, 1, "GGUF model"},
		tc{"plot -o a PNG", []string{"plot", "-o", png, runDir}, 1, "-force"},
		tc{"plot -o a corpus -force", []string{"plot", "-force", "-o", corpus, runDir}, 1, "token corpus"},
		tc{"plot -o a directory", []string{"plot", "-o", p("adir"), runDir}, 1, "directory"},
		tc{"plot a missing run", []string{"plot", "-o", p("new.png"), p("norun")}, 1, "norun"},
		tc{"plot a bad event log", []string{"plot", "-o", p("new.png"), badRun}, 1, "events.jsonl"},
		tc{"plot a file as a run", []string{"plot", "-o", p("new.png"), model}, 1, ""},
	)
	require.GreaterOrEqual(t, len(cases), 80)

	before := hashTree(t, dir)
	for _, c := range cases {
		type result struct {
			out, errOut string
			code        int
		}
		done := make(chan result, 1)
		go func() {
			o, e, code := runToy(c.args...)
			done <- result{o, e, code}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: hung (toy %s)", c.name, strings.Join(c.args, " "))
		}
		if r.code != c.code || r.out != "" || !strings.HasPrefix(r.errOut, "toy ") || !strings.Contains(r.errOut, c.msg) {
			t.Errorf("%s: toy %s\n  exit %d (want %d), stdout %q\n  stderr %q (want a message with %q)",
				c.name, strings.Join(c.args, " "), r.code, c.code, r.out, r.errOut, c.msg)
		}
		if after := hashTree(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			for k, v := range after {
				if before[k] != v {
					t.Errorf("%s: %s changed or appeared", c.name, k)
				}
			}
			for k := range before {
				if _, ok := after[k]; !ok {
					t.Errorf("%s: %s disappeared", c.name, k)
				}
			}
			before = after
		}
	}
	t.Logf("%d bad-input cases", len(cases))
	if os.Getenv("TOY_BADINPUT_VERBOSE") != "" {
		for _, c := range cases {
			_, e, code := runToy(c.args...)
			t.Logf("%s: %d %s", c.name, code, strings.TrimSpace(e))
		}
	}
}
