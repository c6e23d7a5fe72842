package serve

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// TestServe starts toy serve on a loopback port, waits for it to be ready, asks it for a
// completion with one of its API keys, checks that no key and a page from elsewhere may not
// call it, and stops it with SIGTERM.
func TestServe(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	keys := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(keys, []byte("# the team's\n\n  file-key  \n"), 0o600))
	url, stop := startServe(t, "-m", model, "-parallel", "2", "-template", "chatml", "-api-key", "flag-key", "-api-key-file", keys)
	defer stop()
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
	// A page whose name was made to point at this machine (DNS rebinding) sends its name as the
	// Host: refused, with or without a key; localhost is the server's.
	for host, status := range map[string]int{"rebound.example": 403, "localhost": 200} {
		req, err := http.NewRequest("GET", url+"/v1/models", nil)
		require.NoError(t, err)
		req.Host = host
		req.Header.Set("Authorization", "Bearer flag-key")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, status, resp.StatusCode, host)
	}
}

// TestServeTLS serves HTTPS with a certificate made here: a client that trusts it completes a
// request; one that does not, or speaks plain HTTP, gets no reply. One of -tls-cert and
// -tls-key alone is refused.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "toy test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))

	_, errOut, code := runToy("serve", "-m", "x.gguf", "-tls-cert", certFile)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-tls-cert and -tls-key go together")

	url, stop := startServe(t, "-m", clitest.TinyCheckpoint(t), "-tls-cert", certFile, "-tls-key", keyFile)
	defer stop()
	require.True(t, strings.HasPrefix(url, "https://"), url)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	trusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := trusting.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"func main","max_tokens":3}`))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "%s", b)
	_, err = http.Get(url + "/health")
	assert.Error(t, err, "a client that does not trust the certificate")
	plain, err := http.Get("http://" + strings.TrimPrefix(url, "https://") + "/health")
	if err == nil {
		plain.Body.Close()
		assert.Equal(t, http.StatusBadRequest, plain.StatusCode, "plain HTTP to the TLS port")
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
