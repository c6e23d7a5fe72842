package main

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
