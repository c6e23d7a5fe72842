package serve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOrigins sends requests with and without an Origin header through Origins.Guard: the
// server's own page, localhost pages, listed and unlisted origins, preflights and "*".
func TestOrigins(t *testing.T) {
	reached := 0
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		w.WriteHeader(http.StatusOK)
	})
	parse := func(list string) Origins {
		o, err := ParseOrigins(list)
		require.NoError(t, err, list)
		return o
	}
	type result struct {
		status              int
		allowOrigin, method string
		reached             bool
	}
	do := func(o Origins, method, host, origin string, preflight bool) result {
		req := httptest.NewRequest(method, "http://"+host+"/v1/chat/completions", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if preflight {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "content-type, authorization")
		}
		before := reached
		rec := httptest.NewRecorder()
		o.Guard(inner).ServeHTTP(rec, req)
		return result{rec.Code, rec.Header().Get("Access-Control-Allow-Origin"), rec.Header().Get("Access-Control-Allow-Methods"), reached > before}
	}
	def := parse("localhost")
	for _, c := range []struct {
		name         string
		o            Origins
		method, host string
		origin       string
		preflight    bool
		want         result
	}{
		{"no origin: curl, the openai packages", def, "POST", "127.0.0.1:8080", "", false, result{200, "", "", true}},
		{"the server's own page", def, "POST", "127.0.0.1:8080", "http://127.0.0.1:8080", false, result{200, "http://127.0.0.1:8080", "", true}},
		{"its own page on a public address", parse("none"), "POST", "10.1.2.3:8080", "http://10.1.2.3:8080", false, result{200, "http://10.1.2.3:8080", "", true}},
		{"a localhost page on another port", def, "POST", "127.0.0.1:8080", "http://localhost:3000", false, result{200, "http://localhost:3000", "", true}},
		{"a loopback page", def, "POST", "127.0.0.1:8080", "https://[::1]:5173", false, result{200, "https://[::1]:5173", "", true}},
		{"its preflight", def, "OPTIONS", "127.0.0.1:8080", "http://localhost:3000", true, result{204, "http://localhost:3000", "GET, POST, OPTIONS", false}},
		{"a site elsewhere", def, "POST", "127.0.0.1:8080", "https://evil.example", false, result{403, "", "", false}},
		{"its preflight", def, "OPTIONS", "127.0.0.1:8080", "https://evil.example", true, result{403, "", "", false}},
		{"a localhost-like name", def, "POST", "127.0.0.1:8080", "http://localhost.evil.example", false, result{403, "", "", false}},
		{"a file or sandboxed frame", def, "POST", "127.0.0.1:8080", "null", false, result{403, "", "", false}},
		{"localhost not listed", parse("none"), "POST", "127.0.0.1:8080", "http://localhost:3000", false, result{403, "", "", false}},
		{"a listed origin", parse("https://chat.example.com, localhost"), "POST", "127.0.0.1:8080", "https://chat.example.com", false, result{200, "https://chat.example.com", "", true}},
		{"the listed origin on another port", parse("https://chat.example.com"), "POST", "127.0.0.1:8080", "https://chat.example.com:8443", false, result{403, "", "", false}},
		{"any", parse("*"), "POST", "127.0.0.1:8080", "https://evil.example", false, result{200, "https://evil.example", "", true}},
	} {
		assert.Equal(t, c.want, do(c.o, c.method, c.host, c.origin, c.preflight), "%s: %s from %q", c.name, c.method, c.origin)
	}
	logged := def
	var log strings.Builder
	logged.Log = &log
	do(logged, "POST", "127.0.0.1:8080", "https://evil.example", false)
	do(logged, "POST", "127.0.0.1:8080", "http://localhost:3000", false)
	assert.Equal(t, "toy serve: POST /v1/chat/completions 403: origin https://evil.example may not call this server from a browser (toy serve -allow-origin lists the pages that may)\n", log.String(), "a refusal, and only it, in the log")
	for _, bad := range []string{"chat.example.com", "ftp://x", "https://x/path", "https://", "http://u@x"} {
		_, err := ParseOrigins(bad)
		assert.Error(t, err, bad)
	}
}
