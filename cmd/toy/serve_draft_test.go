package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/llama"
)

// TestServeDraft starts toy serve with -draft (the model's own file, so that the draft proposes
// what the target chooses) and without it (-draft-p-min 0: a random model gives no token 0.75), the ready line says the drafter, greedy replies are
// the same, and /metrics counts the proposals and acceptances; a bad -draft-n is a usage error.
func TestServeDraft(t *testing.T) {
	model := tinyCheckpoint(t)
	complete := func(url string) string {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"func main","max_tokens":12,"temperature":0}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Len(t, out.Choices, 1)
		return out.Choices[0].Text
	}
	url, stop := startServe(t, "-m", model, "-parallel", "2")
	want := complete(url)
	stop()

	url, lines, stop := startServeLog(t, "-addr", "127.0.0.1:0", "-m", model, "-parallel", "2", "-draft", model, "-draft-n", "3", "-draft-p-min", "0")
	defer stop()
	assert.Contains(t, strings.Join(lines, "\n"), "speculative: draft tiny.gguf (3 tokens a step, p-min 0)")
	assert.Equal(t, want, complete(url))
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^toy_draft_accepted_tokens_total (\d+)$`).FindSubmatch(page)
	require.NotNil(t, m, string(page))
	assert.NotEqual(t, "0", string(m[1]), "the model's own weights propose what it chooses")
	assert.Contains(t, string(page), `toy_slot_draft_proposed_tokens_total{slot="1"}`)

	require.ErrorContains(t, runServe([]string{"-m", model, "-draft", model, "-draft-n", "0"}, io.Discard, io.Discard), "-draft-n 0")
}

// TestServeDFlash starts toy serve -dflash on a model the kernel table's toy-demo entry pairs a
// DFlash drafter with (trained for 3 steps by toy train -recipe dflash): the ready line names
// the drafter with its block's proposals, greedy replies are the server's without it, /metrics
// counts its proposals, and a
// model the table pairs none with is refused, naming why.
func TestServeDFlash(t *testing.T) {
	dir := t.TempDir()
	model := checkpointOf(t, "demo", filepath.Join(dir, "model.gguf"), llama.KV{Key: "general.name", Value: "toy test-run"})
	text := filepath.Join(dir, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("func main() { return nil }\nif err != nil { return err }\n", 40)), 0o644))
	_, errOut, code := runToy("train", "-recipe", "dflash", "-target", model, "-data", text, "-steps", "3", "-seqs", "1", "-seq", "32", "-anchors", "4", "-t", "1")
	require.Equal(t, 0, code, errOut)
	complete := func(url string) string {
		resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"func main","max_tokens":16,"temperature":0}`))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out struct {
			Choices []struct{ Text string } `json:"choices"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Len(t, out.Choices, 1)
		return out.Choices[0].Text
	}
	url, stop := startServe(t, "-m", model, "-parallel", "2")
	want := complete(url)
	stop()
	url, lines, stop := startServeLog(t, "-addr", "127.0.0.1:0", "-m", model, "-parallel", "2", "-dflash")
	defer stop()
	assert.Contains(t, strings.Join(lines, "\n"), "speculative: dflash toy-demo-dflash.gguf (7 tokens a step, p-min 0)")
	assert.Equal(t, want, complete(url))
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^toy_draft_proposed_tokens_total (\d+)$`).FindSubmatch(page)
	require.NotNil(t, m, string(page))
	assert.NotEqual(t, "0", string(m[1]), "the drafter proposed")

	err = runServe([]string{"-m", tinyCheckpoint(t), "-dflash"}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "pairs no DFlash drafter")
}
