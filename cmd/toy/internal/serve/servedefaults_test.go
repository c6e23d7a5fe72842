package serve

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/cli"
	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/runs"
)

// fakeRun makes a run directory root/id (an event log and a weights directory) and returns the
// path of its weights/model.gguf, not yet written.
func fakeRun(t *testing.T, root, id string) string {
	weights := filepath.Join(root, id, runs.WeightsDir)
	require.NoError(t, os.MkdirAll(weights, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, id, runs.EventsFile), []byte(`{"schema":"toy/v1","type":"run_start","run_id":"`+id+`","time":"2026-01-02T03:04:05Z","backend":{"kind":"cpu"},"model":{}}`+"\n"), 0o644))
	return filepath.Join(weights, "model.gguf")
}

// TestServeDefaults: toy serve on a run's checkpoint of 256 positions, with neither -np nor
// -model-name, keeps one slot of the whole context and says so, lists the run's id as the
// model's, and answers an ordinary system and user message (more tokens than the 64 positions
// four slots would leave) that names another model. With -np 4 and -strict-model-name the same
// request is refused: another model's name with 404, and with the model's id, for its length,
// with 400. -host, -port and --ctx-size are llama-server's spellings.
func TestServeDefaults(t *testing.T) {
	const id = "20260102-030405-beef"
	model := clitest.CheckpointWithContext(t, "tiny", fakeRun(t, t.TempDir(), id), 256)
	ask := func(url, name string) (int, map[string]any) {
		body := `{"model":"` + name + `","messages":[{"role":"system","content":"You are a helpful assistant. Answer briefly."},{"role":"user","content":"What does the function main do in a Go program?"}],"max_tokens":8}`
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}

	url, lines, stop := startServeLog(t, "-host", "127.0.0.1", "-port", "0", "-m", model, "-template", "chatml")
	log := strings.Join(lines, "\n")
	assert.Contains(t, log, "toy serve: 1 slot of 256 positions (a request's prompt and reply together)", log)
	assert.Contains(t, log, "-np sets the slots, -c the context")
	assert.Contains(t, log, "toy serve: ready: "+id+", 1 slot of 256 positions, queue 64")
	resp, err := http.Get(url + "/v1/models")
	require.NoError(t, err)
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&models))
	resp.Body.Close()
	require.Len(t, models.Data, 1)
	assert.Equal(t, id, models.Data[0].ID)
	code, out := ask(url, "gpt-4")
	require.Equal(t, 200, code, out)
	assert.Equal(t, id, out["model"])
	prompt := out["usage"].(map[string]any)["prompt_tokens"].(float64)
	assert.Greater(t, prompt, 64.0, "more than four slots of this context would hold")
	stop()

	url, lines, stop = startServeLog(t, "-addr", "127.0.0.1:0", "-m", model, "-template", "chatml", "-np", "4", "--ctx-size", "256", "-strict-model-name")
	defer stop()
	log = strings.Join(lines, "\n")
	assert.Contains(t, log, "toy serve: 4 slots of 64 positions each", log)
	assert.Contains(t, log, "-c 256 shared among -np 4: few positions")
	code, out = ask(url, "gpt-4")
	assert.Equal(t, 404, code, out)
	code, out = ask(url, id)
	assert.Equal(t, 400, code, out)
	assert.Equal(t, "context_length_exceeded", out["error"].(map[string]any)["code"])
}

// TestDefaultModelID: a run's checkpoint is named by the run's id (a step's with its step),
// also from a relative path; any other file by its name.
func TestDefaultModelID(t *testing.T) {
	root := t.TempDir()
	latest := fakeRun(t, root, "20260102-030405-beef")
	step := filepath.Join(filepath.Dir(latest), "step-00000040", "model.gguf")
	notRun := filepath.Join(root, "models", runs.WeightsDir, "model.gguf") // no event log above
	require.NoError(t, os.MkdirAll(filepath.Dir(notRun), 0o755))
	for path, want := range map[string]string{
		latest: "20260102-030405-beef",
		step:   "20260102-030405-beef-step-40",
		filepath.Join(filepath.Dir(latest), "step-x", "model.gguf"): "model",
		filepath.Join(filepath.Dir(latest), "other.gguf"):           "other",
		notRun:                        "model",
		"SmolLM2-135M-Instruct.gguf":  "SmolLM2-135M-Instruct",
		"weights.bin":                 "weights.bin",
		filepath.Join(root, "x.gguf"): "x",
	} {
		assert.Equal(t, want, cli.DefaultModelID(path), path)
	}
	t.Chdir(filepath.Join(root, "20260102-030405-beef"))
	assert.Equal(t, "20260102-030405-beef", cli.DefaultModelID(filepath.Join(runs.WeightsDir, "model.gguf")))
}

// TestListenAddr: -host and -port replace -addr's parts; given with -addr they must agree.
func TestListenAddr(t *testing.T) {
	type flags struct {
		addr    string
		addrSet bool
		host    string
		hostSet bool
		port    int
		portSet bool
	}
	for _, c := range []struct {
		f    flags
		want string // empty: refused
		msg  string
	}{
		{flags{defaultAddr, false, defaultHost, false, defaultPort, false}, "127.0.0.1:8080", ""},
		{flags{defaultAddr, false, "0.0.0.0", true, defaultPort, false}, "0.0.0.0:8080", ""},
		{flags{defaultAddr, false, defaultHost, false, 9000, true}, "127.0.0.1:9000", ""},
		{flags{defaultAddr, false, "::1", true, 0, true}, "[::1]:0", ""},
		{flags{"localhost:9000", true, defaultHost, false, defaultPort, false}, "localhost:9000", ""},
		{flags{"localhost:9000", true, "localhost", true, 9000, true}, "localhost:9000", ""},
		{flags{"localhost:9000", true, defaultHost, false, 9001, true}, "", "-addr localhost:9000 and -port 9001 disagree"},
		{flags{"0.0.0.0:80", true, "127.0.0.1", true, defaultPort, false}, "", "-addr 0.0.0.0:80 and -host 127.0.0.1 disagree"},
		{flags{defaultAddr, false, defaultHost, false, 70000, true}, "", "-port 70000"},
		{flags{"8080", true, defaultHost, false, defaultPort, false}, "", `-addr "8080": want host:port`},
	} {
		got, err := listenAddr(c.f.addr, c.f.addrSet, c.f.host, c.f.hostSet, c.f.port, c.f.portSet)
		if c.want == "" {
			assert.ErrorContains(t, err, c.msg, "%+v", c.f)
			var ue *cli.UsageError
			assert.ErrorAs(t, err, &ue)
			continue
		}
		require.NoError(t, err, "%+v", c.f)
		assert.Equal(t, c.want, got, "%+v", c.f)
	}
	_, errOut, code := runToy("serve", "-m", "x.gguf", "-addr", "127.0.0.1:1", "--port", "2")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "disagree")
	_, errOut, code = runToy("serve", "-m", "x.gguf", "-np", "-1")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "-parallel -1")
}
