package bench

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchServe runs toy bench serve on random weights of the demo preset: one client, then
// three, each sending two streamed requests of five tokens, and checks the table's counts
// (a random model has no end of text, so every request generates all its tokens).
func TestBenchServe(t *testing.T) {
	var out bytes.Buffer
	prof := filepath.Join(t.TempDir(), "serve")
	require.NoError(t, runBenchServe([]string{"-random", "demo", "-streams", "3", "-requests", "2", "-n", "5", "-t", "1", "-c", "768", "-profile", prof}, &out, io.Discard))
	for _, name := range []string{"cpu", "block", "mutex"} {
		b, err := os.ReadFile(prof + "." + name + ".pprof")
		require.NoError(t, err)
		require.Greater(t, len(b), 2, name)
		assert.Equal(t, []byte{0x1f, 0x8b}, b[:2], "%s: a profile is gzipped protocol buffers", name)
	}
	rows := regexp.MustCompile(`(?m)^\|\s+(\d+) \|\s+(\d+) \|\s+(\d+) \|\s+([\d.]+) \|\s+([\d.]+) \|\s+([\d.]+) \|`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, rows, 2, out.String())
	for i, want := range [][3]int{{1, 2, 10}, {3, 6, 30}} {
		for j := range want {
			got, err := strconv.Atoi(rows[i][j+1])
			require.NoError(t, err)
			assert.Equal(t, want[j], got, "row %d column %d:\n%s", i, j, out.String())
		}
	}
	assert.Equal(t, "1.00", rows[0][6])
}

func TestBenchServeRefuses(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"-random", "demo", "-m", "x.gguf"},
		{"-url", "http://127.0.0.1:1", "-random", "demo"},
		{"-random", "demo", "-streams", "0"},
		{"-random", "demo", "-requests", "0"},
		{"-random", "demo", "-n", "0"},
		{"-random", "tiny"}, // 64 tokens: too few for a byte-level tokenizer
		{"-random", "nope"},
	} {
		err := runBenchServe(args, io.Discard, io.Discard)
		assert.Error(t, err, "%v", args)
	}
}

// TestBenchServeDraftSelf: toy bench serve -draft self drafts with the served model's own
// file: the same token counts, and the drafter's proposals, nearly all accepted, reported
// after the table.
func TestBenchServeDraftSelf(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, runBenchServe([]string{"-random", "demo", "-streams", "2", "-requests", "1", "-n", "6", "-t", "1", "-c", "512", "-draft", "self", "-draft-p-min", "0"}, &out, io.Discard))
	m := regexp.MustCompile(`the drafter proposed (\d+) tokens, the target accepted (\d+) `).FindStringSubmatch(out.String())
	require.NotNil(t, m, out.String())
	proposed, _ := strconv.Atoi(m[1])
	accepted, _ := strconv.Atoi(m[2])
	assert.Positive(t, proposed)
	assert.Greater(t, accepted, proposed*9/10, "the model's own weights propose its choices")
	assert.Regexp(t, `(?m)^\|\s+2 \|\s+2 \|\s+12 \|`, out.String())
}
