package serve

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"

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

// TestHosts sends requests through Origins.Guard with the Host headers a browser sends: to the
// server's addresses and localhost names, which pass, and to names that a page's DNS could have
// pointed at this machine (DNS rebinding), which get 403 even with no Origin or an Origin equal
// to the Host (the page's own, as a rebound page's is) and are logged. Every host is tried with
// and without a port, in mixed case and with a trailing dot.
func TestHosts(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	variants := func(host string) []string {
		mixed := []rune(host)
		for i, r := range mixed {
			if rng.IntN(2) == 0 {
				mixed[i] = unicode.ToUpper(r)
			}
		}
		var out []string
		for _, h := range []string{host, strings.ToUpper(host), string(mixed)} {
			dotted := h + "."
			if strings.HasPrefix(h, "[") {
				dotted = h // an IPv6 address takes no dot
			}
			for _, port := range []string{"", ":8080", ":1", fmt.Sprintf(":%d", 1+rng.IntN(65535))} {
				out = append(out, h+port, dotted+port)
			}
		}
		return out
	}
	listed, err := ParseOrigins("localhost, https://Chat.Example.com:8443")
	require.NoError(t, err)
	var log strings.Builder
	listed.Log = &log
	reached := 0
	guard := listed.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached++ }))
	do := func(o http.Handler, host, origin string) int {
		req := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec := httptest.NewRecorder()
		o.ServeHTTP(rec, req)
		if rec.Code == http.StatusForbidden {
			assert.Contains(t, rec.Body.String(), `"type":"invalid_request_error"`)
		}
		return rec.Code
	}
	ours := []string{"127.0.0.1", "127.8.9.10", "10.1.2.3", "0.0.0.0", "[::1]", "[::]", "[fe80::1%25eth0]", "[::ffff:127.0.0.1]",
		"[2001:db8::7]", "localhost", "app.localhost", "chat.example.com"}
	rebound := []string{"evil.example", "127.0.0.1.nip.io", "localhost.evil.example", "evil-localhost", "7f000001.rbndr.us",
		"my-machine", "example.com", "chat.example.com.evil.example", "localhostx"}
	tried := 0
	for _, h := range ours {
		for _, v := range variants(h) {
			assert.Equal(t, http.StatusOK, do(guard, v, ""), "host %q", v)
			tried++
		}
	}
	assert.Equal(t, tried, reached, "every request to the server's own names reached the handler")
	for _, h := range rebound {
		for _, v := range variants(h) {
			before := reached
			assert.Equal(t, http.StatusForbidden, do(guard, v, ""), "host %q, no origin", v)
			assert.Equal(t, http.StatusForbidden, do(guard, v, "http://"+v), "host %q, the rebound page's own origin", v)
			assert.Equal(t, before, reached, "host %q reached the handler", v)
			tried += 2
		}
	}
	assert.Equal(t, http.StatusOK, do(guard, "", ""), "no Host: not a browser")
	tried++
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	assert.Equal(t, tried-reached, len(lines), "one line per refusal")
	assert.Contains(t, "\n"+log.String(), "\ntoy serve: POST /v1/chat/completions 403: host evil.example:8080 is not a name of this server (a page whose name was made to point here, DNS rebinding, could use it): "+
		"a request must be sent to an IP address, localhost, or the host of an origin toy serve -allow-origin lists\n")

	// With every origin let through, every host is: a page anywhere may call the server.
	anyOrigin, err := ParseOrigins("*")
	require.NoError(t, err)
	for _, h := range rebound {
		assert.Equal(t, http.StatusNotFound, do(anyOrigin.Guard(http.NotFoundHandler()), h, "http://"+h), "%s: reached the handler", h)
	}

	// Over a real connection: a rebound name in the Host header, with the page's own origin.
	ts := httptest.NewServer(listed.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })))
	defer ts.Close()
	for host, want := range map[string]int{"evil.example:80": 403, "LOCALHOST.:80": 418, strings.TrimPrefix(ts.URL, "http://"): 418, "[::1]:9": 418} {
		req, err := http.NewRequest("POST", ts.URL+"/v1/completions", strings.NewReader(`{"prompt":"hi"}`))
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode, host)
	}
}
