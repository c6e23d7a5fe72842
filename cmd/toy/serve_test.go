package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServe starts toy serve on a loopback port, waits for it to be ready, asks it for a
// completion, checks that a page from elsewhere may not call it, and stops it with SIGTERM.
func TestServe(t *testing.T) {
	model := tinyCheckpoint(t)
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runServe([]string{"-m", model, "-addr", "127.0.0.1:0", "-parallel", "2", "-t", "1", "-template", "chatml"}, io.Discard, pw)
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

	resp, err = http.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"model":"tiny","prompt":"func main","max_tokens":4,"temperature":0}`))
	require.NoError(t, err)
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
		req, err := http.NewRequest("GET", url+"/v1/models", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
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
