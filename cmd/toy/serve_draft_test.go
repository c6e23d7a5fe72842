package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/cmd/toy/internal/serve"
	"github.com/toyml/toy/engines/transformer"
)

// TestServeDraft starts toy serve with -draft (the model's own file, so that the draft proposes
// what the target chooses) and without it (-draft-p-min 0: a random model gives no token 0.75), the ready line says the drafter, greedy replies are
// the same, and /metrics counts the proposals and acceptances; a bad -draft-n is a usage error.
func TestServeDraft(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	complete := func(url string) string { return greedyCompletion(t, url, 12) }
	url, stop := startServe(t, "-m", model, "-parallel", "2")
	want := complete(url)
	stop()

	url, lines, stop := startServeLog(t, "-addr", "127.0.0.1:0", "-m", model, "-parallel", "2", "-draft", model, "-draft-n", "3", "-draft-p-min", "0")
	defer stop()
	assert.Contains(t, strings.Join(lines, "\n"), "speculative: draft tiny.gguf (3 tokens a step, p-min 0)")
	assert.Equal(t, want, complete(url))
	page := metricsPage(t, url)
	assert.NotEqual(t, "0", metric(t, page, "toy_draft_accepted_tokens_total"), "the model's own weights propose what it chooses")
	assert.Contains(t, page, `toy_slot_draft_proposed_tokens_total{slot="1"}`)

	require.ErrorContains(t, serve.Run([]string{"-m", model, "-draft", model, "-draft-n", "0"}, io.Discard, io.Discard), "-draft-n 0")
}

// TestServeDFlash starts toy serve -dflash on a model the kernel table's toy-demo entry pairs a
// DFlash drafter with (trained for 3 steps by toy train -recipe dflash): the ready line names
// the drafter with its block's proposals, greedy replies are the server's without it, /metrics
// counts its proposals, and a
// model the table pairs none with is refused, naming why.
func TestServeDFlash(t *testing.T) {
	dir := t.TempDir()
	model := clitest.CheckpointOf(t, "demo", filepath.Join(dir, "model.gguf"), transformer.KV{Key: "general.name", Value: "toy test-run"})
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)), 0o644))
	_, errOut, code := runToy("train", "-recipe", "dflash", "-target", model, "-data", text, "-steps", "3", "-seqs", "1", "-seq", "32", "-anchors", "4", "-t", "1")
	require.Equal(t, 0, code, errOut)
	complete := func(url string) string { return greedyCompletion(t, url, 16) }
	url, stop := startServe(t, "-m", model, "-parallel", "2")
	want := complete(url)
	stop()
	url, lines, stop := startServeLog(t, "-addr", "127.0.0.1:0", "-m", model, "-parallel", "2", "-dflash")
	defer stop()
	assert.Contains(t, strings.Join(lines, "\n"), "speculative: dflash toy-demo-dflash.gguf (7 tokens a step, p-min 0)")
	assert.Equal(t, want, complete(url))
	assert.NotEqual(t, "0", metric(t, metricsPage(t, url), "toy_draft_proposed_tokens_total"), "the drafter proposed")

	err := serve.Run([]string{"-m", clitest.TinyCheckpoint(t), "-dflash"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "pairs no DFlash drafter")
}

// greedyCompletion is the text of a greedy completion of "func main" of up to n tokens from the
// server at url.
func greedyCompletion(t *testing.T, url string, n int) string {
	t.Helper()
	body := fmt.Sprintf(`{"prompt":"func main","max_tokens":%d,"temperature":0}`, n)
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Len(t, out.Choices, 1)
	return out.Choices[0].Text
}

// metricsPage is the server's /metrics page.
func metricsPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(page)
}

// metric is the value of the unlabelled metric name on a /metrics page, which must have it.
func metric(t *testing.T, page, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindStringSubmatch(page)
	require.NotNil(t, m, page)
	return m[1]
}
