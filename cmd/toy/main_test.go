package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/cmd/toy/internal/serve"
)

// runToy runs toy with args and returns what it wrote to standard output and standard error,
// and its exit status.
func runToy(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// startServe runs toy serve with args until it is ready (clitest.StartServe).
func startServe(t *testing.T, args ...string) (url string, stop func()) {
	return clitest.StartServe(t, serve.Run, args...)
}

// startServeLog is startServe without the -addr, also returning what toy serve wrote to
// stderr until it was ready (clitest.StartServeLog).
func startServeLog(t *testing.T, args ...string) (url string, lines []string, stop func()) {
	return clitest.StartServeLog(t, serve.Run, args...)
}

// TestUsageErrors checks that a bad invocation exits with status 2 and says what is wrong once,
// on standard error, with nothing on standard output.
func TestUsageErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.gguf")
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"train", "-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"train", "-steps", "many"}, `invalid value "many" for flag -steps`},
		{[]string{"train", "extra"}, `unexpected argument "extra"`},
		{[]string{"train", "-preset", "huge"}, "huge"},
		{[]string{"train", "-rope-scaling", "ntk"}, `rope_scaling "ntk" is not one of none, linear, yarn`},
		{[]string{"train", "-n-heads", "5"}, "d_model 192 is not a multiple of n_heads 5"},
		{[]string{"train", "-preset", "tiny", "-c", "0"}, "context 0 is below the minimum 1"},
		{[]string{"generate", "-p", "hi"}, "-m MODEL is required"},
		{[]string{"generate", "-m", missing, "-kv-type", "f8"}, `-kv-type "f8"`},
		{[]string{"generate", "-m", missing, "stray"}, `unexpected argument "stray"`},
		{[]string{"perplexity", "-m", missing}, "-f TEXT is required"},
		{[]string{"inspect"}, "name one GGUF file"},
		{[]string{"inspect", "a.gguf", "b.gguf"}, "name one GGUF file"},
		{[]string{"tokenizer"}, "usage: toy tokenizer train"},
		{[]string{"tokenizer", "train", "-vocab"}, "flag needs an argument: -vocab"},
		{[]string{"tokenize"}, "-tokenizer is required"},
		{[]string{"plot"}, "name one run directory"},
		{[]string{"kernels", "a.gguf", "b.gguf"}, "at most one GGUF file"},
		{[]string{"kernels", "-compute-capability", "nine"}, "-compute-capability"},
		{[]string{"version", "now"}, `unexpected argument "now"`},
		{[]string{"bench", "gpu"}, `unknown benchmark "gpu"`},
		{[]string{"bench", "-m", "model.gguf"}, `unknown benchmark "-m"`},
		{[]string{"bench", "matmul", "-t", "0"}, "-t 0"},
		{[]string{"bench", "matmul", "-types", "f7"}, `unknown weight type "f7"`},
		{[]string{"bench", "model"}, "give -m MODEL or -random PRESET"},
		{[]string{"bench", "model", "-m", "x.gguf", "-random", "tiny"}, "exclude each other"},
		{[]string{"bench", "train", "-preset", "tiny", "-seq", "4096"}, "-seq 4096"},
		{[]string{"bench", "train", "-bogus"}, "flag provided but not defined: -bogus"},
	} {
		name := strings.Join(c.args, " ")
		out, errOut, code := runToy(c.args...)
		assert.Equal(t, 2, code, "%s: %s", name, errOut)
		assert.Empty(t, out, name)
		assert.Equal(t, 1, strings.Count(errOut, c.msg), "%s: the message once in %q", name, errOut)
		assert.True(t, strings.HasPrefix(errOut, "toy "+c.args[0]+": "), "%s: %q", name, errOut)
		assert.NotContains(t, errOut, "Flags:", "%s: no usage dump", name)
	}

	// The hint names the subcommand whose flags were wrong.
	_, errOut, _ := runToy("bench", "train", "-bogus")
	assert.Contains(t, errOut, "Run 'toy bench train -h' for usage.")

	_, errOut, code := runToy("frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unknown command "frobnicate"`)
}

// TestHelp checks that -h prints a command's usage to standard error and succeeds, and that
// plain toy and plain toy bench list what there is on standard output.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"train", "-h"}, {"generate", "-h"}, {"chat", "-h"}, {"perplexity", "--help"}, {"inspect", "-h"},
		{"tokenizer", "train", "-h"}, {"tokenize", "-h"}, {"plot", "-h"}, {"kernels", "-h"}, {"version", "-h"},
		{"bench", "matmul", "-h"}, {"bench", "model", "-h"}, {"bench", "train", "-h"}} {
		name := strings.Join(args, " ")
		out, errOut, code := runToy(args...)
		assert.Equal(t, 0, code, name)
		assert.Empty(t, out, name)
		assert.Contains(t, errOut, "usage: toy "+strings.TrimSuffix(strings.TrimSuffix(name, " -h"), " --help"), name)
	}
	out, _, code := runToy()
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "Run 'toy <command> -h'")
	out, _, code = runToy("bench")
	assert.Equal(t, 0, code)
	for _, w := range []string{"matmul", "model", "train"} {
		assert.Contains(t, out, "\n  "+w+" ")
	}
	out, _, code = runToy("version")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "toy ")
}
