package serve

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestServeKeyRefusals: -api-key or -api-key-file given empty (an unset variable) or blank is a
// usage error (exit 2) before anything is loaded, rather than a server open to anyone or shut
// to everyone; a key file's line with a control character is refused with its number. A server
// that listens beyond loopback without a key says so on stderr.
func TestServeKeyRefusals(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "keys")
	require.NoError(t, os.WriteFile(badFile, []byte("# keys\nfine\nbro\x01ken\n"), 0o600))
	missing := filepath.Join(dir, "missing.gguf")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-api-key", ""}, 2, `-api-key "": given empty (an unset variable?)`},
		{[]string{"-api-key="}, 2, `-api-key "": given empty`},
		{[]string{"-api-key", " "}, 2, `-api-key " ": a blank key would shut the API to every client`},
		{[]string{"-api-key", "\t \t"}, 2, `a blank key`},
		{[]string{"-api-key", "a\x7fb"}, 2, `a control character`},
		{[]string{"-api-key-file", ""}, 2, `-api-key-file "": given empty`},
		{[]string{"-api-key-file", "  "}, 2, `a blank file name`},
		{[]string{"-api-key", "", "-api-key-file", badFile}, 2, `-api-key "": given empty`},
		{[]string{"-api-key-file", badFile}, 1, "line 3: a control character"},
	} {
		_, errOut, code := runToy(append([]string{"serve", "-m", missing}, c.args...)...)
		assert.Equal(t, c.code, code, "%q: %s", c.args, errOut)
		assert.Contains(t, errOut, c.want, "%q", c.args)
		assert.NotContains(t, errOut, "listening", "%q: refused before listening", c.args)
	}

	// The warning: on every address with no key; never with one or on loopback. (The model is
	// missing: the server listens, warns, then fails to load it.)
	for _, c := range []struct {
		args []string
		warn bool
	}{
		{[]string{"-addr", "0.0.0.0:0"}, true},
		{[]string{"-addr", "0.0.0.0:0", "-api-key", "k"}, false},
		{[]string{"-addr", "127.0.0.1:0"}, false},
	} {
		_, errOut, code := runToy(append([]string{"serve", "-m", missing}, c.args...)...)
		assert.Equal(t, 1, code, errOut)
		require.Contains(t, errOut, "listening on")
		if c.warn {
			assert.Contains(t, errOut, "warning: no API key, and ")
		} else {
			assert.NotContains(t, errOut, "warning", "%q", c.args)
		}
	}
}
