// Package clitest is the kit the tests of toy's commands share, in cmd/toy and in its rooms
// (cmd/toy/internal/...): running a room's commands as toy runs them (exit status and all),
// small checkpoints and corpora to run them on, GGUF files edited into bad ones, the kernel
// gate's targets swapped, and toy serve started in-process. It imports cli and no room, so
// that every room's tests may import it.
package clitest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/engines/tokenizer"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/kernelrt"
)

// Command is a command's entry, as main.go's table names it (infer.RunGenerate, serve.Run).
type Command func(args []string, stdout, stderr io.Writer) error

// Run runs the command args[0] of cmds on the rest of args as toy's main does, writing to
// stdout and stderr, and returns its exit status (cli.Exit). A name cmds lacks fails the test
// run: a room's tests run its own commands.
func Run(cmds map[string]Command, args []string, stdout, stderr io.Writer) int {
	run, ok := cmds[args[0]]
	if !ok {
		panic(fmt.Sprintf("clitest: no command %q among this test's", args[0]))
	}
	return cli.Exit(args[0], run(args[1:], stdout, stderr), stderr)
}

// Toy is Run that returns what the command wrote to standard output and standard error, and
// its exit status.
func Toy(cmds map[string]Command, args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(cmds, args, &out, &errb)
	return out.String(), errb.String(), code
}

// TinyViTFlags shape a ViT small enough for a command test.
var TinyViTFlags = []string{"-held", "30", "-batch", "8", "-eval-every", "10", "-image-size", "16", "-patch-size", "4",
	"-channels", "1", "-d-model", "16", "-n-heads", "2", "-d-ff", "32", "-n-layers", "1", "-classes", "3"}

// Swap sets *p to v for the rest of the test (a package's standard input, say).
func Swap[T any](t *testing.T, p *T, v T) {
	prev := *p
	*p = v
	t.Cleanup(func() { *p = prev })
}

// TinyCheckpoint saves a small random llama model with a trained tokenizer, as toy train does.
func TinyCheckpoint(t *testing.T) string {
	return CheckpointOf(t, "tiny", filepath.Join(t.TempDir(), "tiny.gguf"))
}

// CheckpointOf saves a random llama model of preset's shape (a context of 64) with a tokenizer
// trained on Go-like text at path, with the extra metadata kvs (which replace the tokenizer's
// keys of the same name).
func CheckpointOf(t *testing.T, preset, path string, kvs ...transformer.KV) string {
	return CheckpointWithContext(t, preset, path, 64, kvs...)
}

// CheckpointWithContext is CheckpointOf with a context of ctx positions.
func CheckpointWithContext(t *testing.T, preset, path string, ctx int, kvs ...transformer.KV) string {
	text := strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)
	tok, err := tokenizer.Train(slices.Values([][]byte{[]byte(text)}), 300, tokenizer.TrainOptions{})
	require.NoError(t, err)
	c, err := config.LlamaPreset(preset)
	require.NoError(t, err)
	c.Vocab, c.Context = tok.VocabSize(), ctx
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.New(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	given := map[string]bool{}
	for _, kv := range kvs {
		given[kv.Key] = true
	}
	for _, kv := range tok.GGUF() {
		if !given[kv.Key] { // the caller's metadata wins over the tokenizer's own
			kvs = append(kvs, transformer.KV{Key: kv.Key, Value: kv.Value})
		}
	}
	require.NoError(t, m.Save(path, kvs))
	return path
}

// WriteCorpus makes a directory of 20 small Go-like text files, seeded, for toy train.
func WriteCorpus(t *testing.T, seed uint64) string {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, seed+1))
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "go", "x", "y"}
	for f := 0; f < 20; f++ {
		var b bytes.Buffer
		for l := 0; l < 40; l++ {
			fmt.Fprintf(&b, "%s %s := %d\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(100))
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.txt", f)), b.Bytes(), 0o644))
	}
	return dir
}

// BuildCPU is the cpu kernel table's target this build compiled (kernelrt.BuildTarget): cpu in
// the default build, cpu-x86-64-v3 or cpu-arm64 in a portable one (make portable=1), whose
// kernels.CPU() answers kernels.ErrOtherCPUTarget. A test that checks what a command says of the
// cpu target names it by this target's Name.
func BuildCPU(t *testing.T) *kernels.Target {
	t.Helper()
	cpu := kernelrt.BuildTarget(kernels.BackendCPU)
	require.NotNil(t, cpu, "this build compiled no cpu kernel table")
	return cpu
}

// WithTarget makes the gate audit t for the rest of the test.
func WithTarget(t *testing.T, target *kernels.Target) {
	saved := cli.BuildTarget
	cli.BuildTarget = func() *kernels.Target { return target }
	t.Cleanup(func() { cli.BuildTarget = saved })
}

// WithCPUTarget makes the gate audit toy's CPU operations against t for the rest of the test.
func WithCPUTarget(t *testing.T, target *kernels.Target) {
	saved := cli.CPUTarget
	cli.CPUTarget = func() *kernels.Target { return target }
	t.Cleanup(func() { cli.CPUTarget = saved })
}

// WithoutModules is t with every model's modules but those named: a table whose entries lack
// them.
func WithoutModules(t *kernels.Target, drop ...kernels.ModuleID) *kernels.Target {
	out := *t
	out.Models = nil
	for _, m := range t.Models {
		var mods []kernels.ModuleID
		for _, id := range m.Modules {
			if !slices.Contains(drop, id) {
				mods = append(mods, id)
			}
		}
		m.Modules = mods
		out.Models = append(out.Models, m)
	}
	return &out
}

// SetKV returns an editKV that replaces key's value.
func SetKV(key string, value any) func(kv gguffile.KV) (gguffile.KV, bool) {
	return func(kv gguffile.KV) (gguffile.KV, bool) {
		if kv.Key == key {
			kv.Value = value
		}
		return kv, true
	}
}

// DropKV returns an editKV that drops the keys with prefix.
func DropKV(prefix string) func(kv gguffile.KV) (gguffile.KV, bool) {
	return func(kv gguffile.KV) (gguffile.KV, bool) { return kv, !strings.HasPrefix(kv.Key, prefix) }
}

// StartServe runs toy serve (run, serve.Run) with args (and -addr 127.0.0.1:0 -t 1) until it is ready, and
// returns its address and a func that stops it with SIGTERM and checks that it exits cleanly.
func StartServe(t *testing.T, run Command, args ...string) (url string, stop func()) {
	url, _, stop = StartServeLog(t, run, append([]string{"-addr", "127.0.0.1:0"}, args...)...)
	return url, stop
}

// StartServeLog is StartServe without the -addr, also returning what toy serve wrote to
// stderr until it was ready.
func StartServeLog(t *testing.T, run Command, args ...string) (url string, lines []string, stop func()) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(append([]string{"-t", "1"}, args...), io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`listening on (https?://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		if strings.Contains(sc.Text(), "toy serve: ready") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	require.NotEmpty(t, url, strings.Join(lines, "\n"))
	return url, lines, func() {
		require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("toy serve did not stop on SIGTERM")
		}
	}
}
