package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/data"
	"github.com/toyml/toy/engines/training"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/ggml"
)

// intFlag matches an integer flag in a command's -h, "  -name int", and its usage line.
var intFlag = regexp.MustCompile(`(?m)^  -([a-zA-Z0-9-]+) (?:int|int64|uint|uint64)\n\s+(.*)$`)

// intFlags lists the integer flags of the command args (e.g. "bench", "model") as its -h prints
// them — what a new flag adds is covered without a change here — each with the names an error
// about it may use: -name, its spec field (d_model for -d-model) and what it is an alias of.
func intFlags(t *testing.T, args ...string) map[string][]string {
	_, errOut, code := runToy(append(append([]string(nil), args...), "-h")...)
	require.Equal(t, 0, code, "%s -h: %s", strings.Join(args, " "), errOut)
	flags := map[string][]string{}
	for _, m := range intFlag.FindAllStringSubmatch(errOut, -1) {
		names := []string{"-" + m[1], strings.ReplaceAll(m[1], "-", "_") + " "}
		if alias, ok := strings.CutPrefix(m[2], "alias of -"); ok {
			field := strings.Fields(alias)[0]
			names = append(names, "-"+field, strings.ReplaceAll(field, "-", "_")+" ")
		}
		flags[m[1]] = names
	}
	return flags
}

// withFlag returns args with -name set to value: replaced where args give it, else added
// after the command's words (the first `words` arguments).
func withFlag(args []string, words int, name, value string) []string {
	out := append([]string(nil), args...)
	for i := words; i+1 < len(out); i++ {
		if out[i] == "-"+name {
			out[i+1] = value
			return out
		}
	}
	return slices.Insert(out, words, "-"+name, value)
}

// tinyViTCheckpoint saves a small random ViT classifier of 16×16 grey images and returns its
// path.
func tinyViTCheckpoint(t *testing.T) string {
	c := config.DefaultVit()
	c.ImageSize, c.PatchSize, c.Channels, c.DModel, c.NHeads, c.DFF, c.NLayers, c.Classes = 16, 4, 1, 16, 2, 32, 1, 3
	be, err := ggml.NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	m, err := training.NewViT(c, be)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Init())
	p := filepath.Join(t.TempDir(), "vit.gguf")
	require.NoError(t, m.Save(p, nil))
	return p
}

// writePNG writes a w×h grey gradient image.
func writePNG(t *testing.T, path string, w, h int) string {
	img := image.NewGray(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.SetGray(x, y, color.Gray{Y: uint8(x*7 + y*3)})
		}
	}
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, png.Encode(f, img))
	require.NoError(t, f.Close())
	return path
}

// TestCountFlags runs every command with each of its integer flags (as its -h lists them) at
// -1 and at 0, from an invocation that otherwise runs quickly: each must be refused as a usage
// error (exit 2) whose message names the flag, or run validly (exit 0) — never panic, hang or
// fail later. toy serve, which would then serve forever, is given an address it cannot listen
// on: exit 1 with that error is its valid run.
func TestCountFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every command about a hundred and fifty times")
	}
	dir := t.TempDir()
	p := func(name string) string { return filepath.Join(dir, name) }
	model := clitest.TinyCheckpoint(t)
	vit := tinyViTCheckpoint(t)
	img := writePNG(t, p("img.png"), 16, 16)
	text := clitest.WriteCorpus(t, 5)
	one := filepath.Join(text, "f00.txt")
	shapes := p("shapes")
	require.NoError(t, data.WriteShapesFolder(shapes, 60, 16, 1))
	tok := p("tok.gguf")
	_, errOut, code := runToy("tokenizer", "train", "-vocab", "280", "-o", tok, one)
	require.Equal(t, 0, code, errOut)

	out := func(name string) string { return p("out-" + name) } // a fresh output each run
	n := 0
	fresh := func(ext string) string { n++; return out(fmt.Sprintf("%d%s", n, ext)) }
	trainFlags := []string{"-preset", "tiny", "-vocab", "300", "-c", "16", "-seq", "16", "-batch", "2", "-steps", "1",
		"-warmup", "0", "-eval-batches", "1", "-sample", "0", "-t", "1"}
	commands := []struct {
		words int // the command's words before its flags
		args  func() []string
		serve bool
	}{
		{1, func() []string { return []string{"classify", "-m", vit, img} }, false},
		{1, func() []string { return []string{"generate", "-m", model, "-p", "func", "-n", "2", "-t", "1"} }, false},
		{1, func() []string { return []string{"perplexity", "-m", model, "-f", one, "-c", "16", "-t", "1"} }, false},
		{1, func() []string {
			return []string{"serve", "-m", model, "-t", "1", "-addr", "256.256.256.256:1"}
		}, true},
		{2, func() []string { return []string{"tokenizer", "train", "-vocab", "280", "-o", fresh(".gguf"), one} }, false},
		{1, func() []string { return []string{"tokenize", "-tokenizer", tok, "-o", fresh(".tok"), one} }, false},
		{1, func() []string {
			return append([]string{"train", "-text", text, "-runs", fresh("")}, trainFlags...)
		}, false},
		{1, func() []string {
			return append([]string{"train-vit", "-data", shapes, "-steps", "1", "-t", "1", "-runs", fresh("")}, clitest.TinyViTFlags...)
		}, false},
		{3, func() []string {
			return []string{"train", "-recipe", "dflash", "-target", model, "-data", one, "-steps", "1", "-seqs", "1", "-seq", "16",
				"-anchors", "2", "-t", "1", "-o", fresh(".gguf")}
		}, false},
		{1, func() []string {
			return []string{"finetune", "-m", model, "-data", text, "-steps", "1", "-batch", "2", "-seq", "16", "-t", "1",
				"-eval-batches", "1", "-runs", fresh("")}
		}, false},
		{2, func() []string {
			return []string{"bench", "matmul", "-t", "1", "-types", "f32", "-shapes", "64x64x64", "-time", "1ms", "-nodes", "10"}
		}, false},
		{2, func() []string {
			return []string{"bench", "model", "-m", model, "-p", "4", "-n", "2", "-r", "1", "-t", "1"}
		}, false},
		{2, func() []string {
			return []string{"bench", "train", "-preset", "tiny", "-seq", "16", "-steps", "1", "-t", "1", "-ceiling=false"}
		}, false},
		{2, func() []string {
			return []string{"bench", "finetune", "-preset", "tiny", "-mode", "lora-f16", "-base", model, "-seq", "8", "-steps", "1", "-t", "1"}
		}, false},
		{2, func() []string {
			return []string{"bench", "serve", "-random", "demo", "-n", "2", "-streams", "2", "-requests", "1", "-t", "1"}
		}, false},
	}
	cases := 0
	for _, c := range commands {
		base := c.args()
		name := strings.Join(base[:c.words], " ")
		flags := intFlags(t, base[:c.words]...)
		require.NotEmpty(t, flags, name)
		// The invocation itself runs.
		o, e, code := runGuarded(t, base)
		if c.serve {
			require.Equal(t, 1, code, "%s: %s", name, e)
		} else {
			require.Equal(t, 0, code, "toy %s\n%s%s", strings.Join(base, " "), o, e)
		}
		for _, flag := range slices.Sorted(maps.Keys(flags)) {
			if flag == "seed" || flag == "lora-seed" || flag == "s" {
				continue // a seed is any number
			}
			for _, v := range []string{"-1", "0"} {
				cases++
				args := withFlag(c.args(), c.words, flag, v)
				_, errOut, code := runGuarded(t, args)
				cmdline := "toy " + strings.Join(args, " ")
				switch {
				case code == 2:
					if !slices.ContainsFunc(flags[flag], func(name string) bool { return strings.Contains(errOut, name) }) {
						t.Errorf("%s: exit 2 without naming -%s: %q", cmdline, flag, errOut)
					}
				case code == 0:
				case code == 1 && c.serve && strings.Contains(errOut, "256.256.256.256"):
				default:
					t.Errorf("%s: exit %d: %q (want 2 naming -%s, or a valid run)", cmdline, code, errOut, flag)
				}
			}
		}
	}
	t.Logf("%d commands, %d flag values", len(commands), cases)
}

// runGuarded runs toy in-process with a deadline and turns a panic into a test failure.
func runGuarded(t *testing.T, args []string) (stdout, stderr string, code int) {
	type result struct {
		out, errOut string
		code        int
		panicked    any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panicked: r}
			}
		}()
		o, e, c := runToy(args...)
		done <- result{out: o, errOut: e, code: c}
	}()
	select {
	case r := <-done:
		if r.panicked != nil {
			t.Errorf("toy %s: panic: %v", strings.Join(args, " "), r.panicked)
			return "", "", -1
		}
		return r.out, r.errOut, r.code
	case <-time.After(2 * time.Minute):
		t.Fatalf("toy %s: hung", strings.Join(args, " "))
	}
	return "", "", -1
}

// TestClassifyArguments: toy classify shows every class for a -k beyond the model's classes,
// and refuses at once, naming the file, an image that is a FIFO (it blocked forever), a
// directory, or a file whose header claims 20000×20000 pixels (it decoded to gigabytes).
func TestClassifyArguments(t *testing.T) {
	dir := t.TempDir()
	vit := tinyViTCheckpoint(t)
	img := writePNG(t, filepath.Join(dir, "img.png"), 16, 16)
	out, errOut, code := runGuarded(t, []string{"classify", "-m", vit, "-k", "100", img})
	require.Equal(t, 0, code, errOut)
	assert.Len(t, strings.Fields(strings.TrimPrefix(strings.TrimSpace(out), img+":")), 2*3, "the model's three classes, each with its probability: %s", out)

	fifo := filepath.Join(dir, "pipe.png")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	raw, err := os.ReadFile(img)
	require.NoError(t, err)
	huge := filepath.Join(dir, "huge.png")
	binary.BigEndian.PutUint32(raw[16:], 20000) // IHDR's width and height, and its checksum
	binary.BigEndian.PutUint32(raw[20:], 20000)
	binary.BigEndian.PutUint32(raw[29:], crc32.ChecksumIEEE(raw[12:29]))
	require.NoError(t, os.WriteFile(huge, raw, 0o644))
	for path, msg := range map[string]string{fifo: "named pipe", dir: "directory", huge: "claims 20000×20000 pixels"} {
		out, errOut, code := runGuarded(t, []string{"classify", "-m", vit, img, path})
		assert.Equal(t, 1, code, "%s: %s", path, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, path)
		assert.Contains(t, errOut, msg)
	}
}
