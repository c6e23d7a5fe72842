package serve

import (
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestLogQuotes sends requests whose paths are made of pieces that would forge or
// garble a log line (newlines, carriage returns, NULs, a terminal's escape sequence, Unicode's
// line separators, invalid UTF-8, blanks, quotes, and a whole fake log line) and checks that
// the request log still has exactly one line per request, each of which gives back the path
// that was sent.
func TestRequestLogQuotes(t *testing.T) {
	var log logBuffer
	_, ts := newServer(t, 1, 4, 64, func(c *Config) { c.LogRequests, c.Log = true, &log })
	pieces := []string{"a", "v1", "\n", "\r\n", "\x00", "\x1b[2J", " ", `"`, "\u2028", "\u0085", "\xff", "\t", "é",
		"\ntoy serve: POST /v1/completions 200 in 1ms: prompt tokens 1 (cached 0), generated 1, finish stop\n"}
	rng := rand.New(rand.NewPCG(4, 41))
	var sent []string
	for i := 0; i < 40; i++ {
		var b strings.Builder
		for n := 1 + rng.IntN(6); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		path := "/v1/" + b.String()
		if i == 0 {
			path = "/v1/plain"
		}
		req, err := http.NewRequest("GET", ts.URL+"/v1/"+url.PathEscape(strings.TrimPrefix(path, "/v1/")), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "%q", path)
		sent = append(sent, path)
	}
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	require.Len(t, lines, len(sent), "one line per request:\n%s", log.String())
	line := regexp.MustCompile(`^toy serve: GET ("(?:[^"\\]|\\.)*"|[^\s"]+) 404 in \S+: (.*)$`)
	for i, l := range lines {
		m := line.FindStringSubmatch(l)
		if !assert.NotNil(t, m, "line %d: %q", i, l) {
			continue
		}
		path, note := m[1], m[2]
		if strings.HasPrefix(path, `"`) {
			var err error
			path, err = strconv.Unquote(path)
			require.NoError(t, err, l)
		}
		assert.Equal(t, sent[i], path, "line %d: %q", i, l)
		if strings.HasPrefix(note, `"`) {
			var err error
			note, err = strconv.Unquote(note)
			require.NoError(t, err, l)
		}
		assert.Equal(t, "no such endpoint: "+sent[i], note, "line %d", i)
	}
	assert.Equal(t, "toy serve: GET /v1/plain 404", lines[0][:len("toy serve: GET /v1/plain 404")], "a plain path is written as it is")
}

// TestLogField: what logField and logText leave as they are and what they quote.
func TestLogField(t *testing.T) {
	for s, want := range map[string]string{
		"/v1/chat/completions": "/v1/chat/completions",
		"/v1/é":                "/v1/é",
		"":                     `""`,
		"/a b":                 `"/a b"`,
		`/a"b`:                 `"/a\"b"`,
		"/a\nb":                `"/a\nb"`,
		"/a\x00":               `"/a\x00"`,
		"/\xff":                `"/\xff"`,
		"/\u2028":              `"/\u2028"`,
	} {
		assert.Equal(t, want, logField(s), "%q", s)
	}
	assert.Equal(t, "max_tokens = 0: want at least 1", logText("max_tokens = 0: want at least 1"))
	assert.Equal(t, `"no such endpoint: /\r\ntoy serve: forged"`, logText("no such endpoint: /\r\ntoy serve: forged"))
}
