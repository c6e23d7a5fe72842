package serve

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// TestServeTimeouts: -timeout and -idle-timeout take a Go duration or seconds (llama-server's
// --timeout), refuse others (exit 2), and reach the server: headers that never end and an idle
// kept-alive connection are closed at them.
func TestServeTimeouts(t *testing.T) {
	for v, want := range map[string]time.Duration{"90s": 90 * time.Second, "600": 600 * time.Second, "0.25": 250 * time.Millisecond, "0": 0, "1m30s": 90 * time.Second} {
		var d seconds
		require.NoError(t, d.Set(v), v)
		assert.Equal(t, want, time.Duration(d), v)
	}
	for _, bad := range []string{"-1", "-5s", "abc", "NaN", "Inf", "1e300", ""} {
		var d seconds
		assert.Error(t, d.Set(bad), bad)
		_, errOut, code := runToy("serve", "-m", "x.gguf", "-timeout", bad)
		assert.Equal(t, 2, code, "%q: %s", bad, errOut)
	}

	url, stop := startServe(t, "-m", clitest.TinyCheckpoint(t), "-timeout", "300ms", "-idle-timeout", "0.5")
	defer stop()
	closedAfter := func(request string) time.Duration {
		c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, request)
		start := time.Now()
		b, err := io.ReadAll(c)
		require.NoError(t, err, "the server did not close the connection")
		if strings.HasSuffix(request, "\r\n\r\n") {
			assert.Contains(t, string(b), "200 OK", "answered, then kept alive")
		}
		return time.Since(start)
	}
	took := closedAfter("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	assert.Greater(t, took, 250*time.Millisecond)
	assert.Less(t, took, 3*time.Second)
	took = closedAfter("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	assert.Greater(t, took, 450*time.Millisecond)
	assert.Less(t, took, 3*time.Second)
}
