package serve

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnyModelName: with AnyModelName a request naming another model is served by the one
// loaded, replying what a request naming it (or none) gets and naming the model that answered;
// /v1/models/{id} still knows no other id. Without it, the other name is refused with 404.
func TestAnyModelName(t *testing.T) {
	_, lenient := newServer(t, 1, 4, 128, func(c *Config) { c.AnyModelName = true })
	_, strict := newServer(t, 1, 4, 128)
	ask := func(ts *httptest.Server, model string) (int, map[string]any) {
		t.Helper()
		return post(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":5,"temperature":0`+model+`}`)
	}
	code, want := ask(strict, `,"model":"tiny"`)
	require.Equal(t, 200, code, want)
	text := want["choices"].([]any)[0].(map[string]any)["text"]
	for _, model := range []string{`,"model":"tiny"`, ``, `,"model":""`, `,"model":"gpt-4"`, `,"model":"org/other-model"`} {
		code, out := ask(lenient, model)
		require.Equal(t, 200, code, "%s: %v", model, out)
		assert.Equal(t, text, out["choices"].([]any)[0].(map[string]any)["text"], model)
		assert.Equal(t, "tiny", out["model"], model)
	}
	code, out := post(t, lenient, "/v1/chat/completions", `{"model":"gpt-4","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)
	assert.Equal(t, 200, code, out)
	assert.Equal(t, "tiny", out["model"])

	code, out = ask(strict, `,"model":"gpt-4"`)
	assert.Equal(t, 404, code)
	assert.Equal(t, "model_not_found", out["error"].(map[string]any)["code"])
	code, _ = ask(strict, ``)
	assert.Equal(t, 200, code, "no model named: the one loaded")

	for _, ts := range []string{lenient.URL, strict.URL} {
		resp, err := http.Get(ts + "/v1/models/gpt-4")
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, 404, resp.StatusCode, "retrieving another id")
	}
}

// TestOpenAIClientAnyModelName: OpenAI's official Node client, naming "gpt-4" (and a name
// with a slash), gets from a server with AnyModelName the replies a request naming the served
// model gets, whole and streamed, each naming the model that answered.
func TestOpenAIClientAnyModelName(t *testing.T) {
	client := openaiClient(t)
	_, ts := newServer(t, 1, 8, 256, func(c *Config) { c.AnyModelName = true })
	code, chat := post(t, ts, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":5,"temperature":0}`)
	require.Equal(t, 200, code, chat)
	chatText := chat["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	code, cmpl := post(t, ts, "/v1/completions", `{"model":"tiny","prompt":"func main","max_tokens":6,"temperature":0}`)
	require.Equal(t, 200, code, cmpl)
	cmplText := cmpl["choices"].([]any)[0].(map[string]any)["text"].(string)

	for _, model := range []string{"gpt-4", "org/some-model"} {
		stdout := client("testdata/openai-model-name.js", ts.URL, model)
		type reply struct{ Text, Model string }
		var got struct {
			Models                                         []string
			Chat, Completion, ChatStream, CompletionStream reply
		}
		require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)
		assert.Equal(t, []string{"tiny"}, got.Models)
		assert.Equal(t, reply{chatText, "tiny"}, got.Chat, model)
		assert.Equal(t, reply{cmplText, "tiny"}, got.Completion, model)
		assert.Equal(t, reply{chatText, "tiny"}, got.ChatStream, model)
		assert.Equal(t, reply{cmplText, "tiny"}, got.CompletionStream, model)
	}
}
