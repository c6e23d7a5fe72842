package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe starts toy serve on a loopback port, waits for it to be ready, asks it for a
// completion with one of its API keys, checks that no key and a page from elsewhere may not
// call it, and stops it with SIGTERM.
func TestServe(t *testing.T) {
	model := tinyCheckpoint(t)
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("# the team's\n\n  file-key  \n"), 0o600))
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe([]string{"-m", model, "-addr", "127.0.0.1:0", "-parallel", "2", "-t", "1", "-template", "chatml",
			"-api-key", "flag-key", "-api-key-file", keys}, io.Discard, pw)
		pw.Close()
	}()
	sc := bufio.NewScanner(pr)
	var url string
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
			url = m[1]
		}
		if strings.Contains(sc.Text(), "toy serve: ready") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	require.NotEmpty(t, url, strings.Join(lines, "\n"))
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	var h map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&h))
	resp.Body.Close()
	assert.Equal(t, "ok", h["status"])
	assert.Equal(t, "tiny", h["model"])

	request := func(method, path, key, origin, body string) *http.Response {
		req, err := http.NewRequest(method, url+path, strings.NewReader(body))
		require.NoError(t, err)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	// Either key opens the API; no key does not.
	for key, status := range map[string]int{"": 401, "flag-key": 200, "file-key": 200, "# the team's": 401} {
		resp := request("GET", "/v1/models", key, "", "")
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, "key %q", key)
	}

	resp = request("POST", "/v1/completions", "file-key", "", `{"model":"tiny","prompt":"func main","max_tokens":4,"temperature":0}`)
	var out struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	require.Len(t, out.Choices, 1)
	assert.Equal(t, "length", out.Choices[0].FinishReason)
	assert.Equal(t, 4, out.Usage.CompletionTokens)

	// A browser's page elsewhere is refused by default; one served from this machine is not.
	for origin, status := range map[string]int{"https://elsewhere.example": 403, "http://localhost:3000": 200} {
		resp := request("GET", "/v1/models", "flag-key", origin, "")
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, origin)
		if status == 200 {
			assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"))
		}
	}

	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("toy serve did not stop on SIGTERM")
	}
}

// TestAPIKeyFlags reads -api-key and -api-key-file, and refuses a file that is missing or
// holds no key.
func TestAPIKeyFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	keys, err := apiKeys("k0", write("keys", "k1\r\n# not a key\n\n k2 \n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"k0", "k1", "k2"}, keys)
	keys, err = apiKeys("", "")
	require.NoError(t, err)
	assert.Empty(t, keys)
	_, err = apiKeys("k0", write("empty", "# only a comment\n\n"))
	assert.ErrorContains(t, err, "no key")
	_, err = apiKeys("", filepath.Join(dir, "absent"))
	assert.ErrorContains(t, err, "-api-key-file")
}
