package serve

import (
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBearerScheme: the Authorization scheme is matched without case (RFC 7235), with one or
// more blanks before the key; a wrong key, no key, another scheme or a scheme run into the key
// are refused whatever their case.
func TestBearerScheme(t *testing.T) {
	var cfg Config
	_, ts := newServer(t, 1, 4, 64, func(c *Config) { c.APIKeys = []string{"k-1", "second key"}; cfg = *c })
	rng := rand.New(rand.NewPCG(7, 235))
	anyCase := func(s string) string {
		r := []rune(s)
		for i := range r {
			if rng.IntN(2) == 0 {
				r[i] = unicode.ToUpper(r[i])
			} else {
				r[i] = unicode.ToLower(r[i])
			}
		}
		return string(r)
	}
	status := func(auth string) int {
		req, err := http.NewRequest("GET", ts.URL+"/v1/models", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", anyCase("bearer"), anyCase("bearer"), anyCase("bearer")} {
		for _, key := range []string{"k-1", "second key"} {
			assert.Equal(t, 200, status(scheme+" "+key), "%s %s", scheme, key)
			assert.Equal(t, 200, status(scheme+"   "+key+" "), "%s with blanks around %s", scheme, key)
		}
		for _, bad := range []string{scheme + " K-1", scheme + " k-2", scheme, scheme + " ", scheme + "k-1", scheme + ":k-1", "Basic k-1", anyCase("basic") + " k-1", "k-1", scheme + " k-1 second key"} {
			assert.Equal(t, 401, status(bad), "%q", bad)
		}
	}

	// Keys that no request could present are refused when the server is made.
	for _, keys := range [][]string{{""}, {"k", ""}, {" "}, {" k"}, {"k "}, {"\tk"}, {"k\x01"}, {"a\nb"}} {
		c := cfg
		c.APIKeys = keys
		_, err := New(c)
		assert.ErrorContains(t, err, "empty API key", "%q", keys)
	}
}
