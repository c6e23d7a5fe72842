package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openaiModules is where `make openai-npm` installs the npm package openai, from the
// repository's root.
const openaiModules = "deps/npm-openai/node_modules"

// TestOpenAIClient drives the server with OpenAI's official client, the npm package openai run
// by node (testdata/openai-client.js): chat and text completions, whole and streamed, and two
// refused requests. What the client parsed must equal the server's replies to the same
// requests read here over plain HTTP (greedy, so the same text), and the refusals must arrive
// as the client's typed errors with the server's status and message.
func TestOpenAIClient(t *testing.T) {
	client := openaiClient(t)
	_, ts := newServer(t, 2, 8, 256)
	stdout := client("testdata/openai-client.js", ts.URL)
	type usage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	type reply struct {
		Text, Role, Finish, Object string
		Chunks                     int
		Usage                      usage
	}
	var got struct {
		Version                                        string
		Models                                         []string
		Retrieved                                      string
		Chat, Completion, ChatStream, CompletionStream reply
		Errors                                         []struct {
			Status      int
			Class, Type string
			Message     string
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)
	t.Logf("openai %s", got.Version)

	assert.Equal(t, []string{"tiny"}, got.Models)
	assert.Equal(t, "tiny", got.Retrieved)
	chatBody := `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"max_tokens":5,"temperature":0}`
	code, chat := post(t, ts, "/v1/chat/completions", chatBody)
	require.Equal(t, 200, code, chat)
	chatText := chat["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string)
	code, cmpl := post(t, ts, "/v1/completions", `{"model":"tiny","prompt":"func main","max_tokens":6,"temperature":0}`)
	require.Equal(t, 200, code, cmpl)
	cmplText := cmpl["choices"].([]any)[0].(map[string]any)["text"].(string)

	promptTokens := int(chat["usage"].(map[string]any)["prompt_tokens"].(float64))
	want := reply{Text: chatText, Role: "assistant", Finish: "length", Object: "chat.completion",
		Usage: usage{PromptTokens: promptTokens, CompletionTokens: 5, TotalTokens: promptTokens + 5}}
	assert.Equal(t, want, got.Chat, "the client's first request, computed whole")
	assert.Equal(t, cmplText, got.Completion.Text)
	assert.Equal(t, "length", got.Completion.Finish)
	assert.Equal(t, 6, got.Completion.Usage.CompletionTokens)

	assert.Equal(t, chatText, got.ChatStream.Text)
	assert.Equal(t, "length", got.ChatStream.Finish)
	assert.Equal(t, 5, got.ChatStream.Usage.CompletionTokens)
	// The same conversation as the first chat, whose slot the text completion left alone: all
	// of its prompt but the last token comes from the prompt cache.
	assert.Equal(t, promptTokens-1, got.ChatStream.Usage.PromptTokensDetails.CachedTokens)
	assert.Greater(t, got.ChatStream.Chunks, 2, "streamed in pieces")
	assert.Equal(t, cmplText, got.CompletionStream.Text)
	assert.Equal(t, "length", got.CompletionStream.Finish)
	assert.Greater(t, got.CompletionStream.Chunks, 2, "streamed in pieces")

	require.Len(t, got.Errors, 3)
	assert.Equal(t, 404, got.Errors[0].Status)
	assert.Equal(t, "NotFoundError", got.Errors[0].Class)
	assert.Contains(t, got.Errors[0].Message, "nope")
	assert.Equal(t, 400, got.Errors[1].Status)
	assert.Equal(t, "BadRequestError", got.Errors[1].Class)
	assert.Equal(t, "invalid_request_error", got.Errors[1].Type)
	assert.Contains(t, got.Errors[1].Message, "max_tokens")
	assert.Equal(t, 400, got.Errors[2].Status)
	assert.Contains(t, got.Errors[2].Message, "suffix")
}

func nodeVersion(t *testing.T, node string) string {
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	return string(out[:len(out)-1])
}

// openaiClient checks that node and OpenAI's official Node client (the npm package openai,
// make openai-npm) are here — the test skips without them, or fails under CI — and returns a
// runner of a script of testdata/ with that client: it runs node on script with args (within
// two minutes) and returns what the script printed, failing the test with its standard error
// when it fails.
func openaiClient(t *testing.T) func(script string, args ...string) []byte {
	t.Helper()
	node := needTool(t, "node", "apt-get install nodejs")
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	modules := filepath.Join(root, openaiModules)
	if _, err := os.Stat(filepath.Join(modules, "openai", "package.json")); err != nil {
		absent(t, "the npm package openai", "make openai-npm")
	}
	t.Logf("node %s", nodeVersion(t, node))
	return func(script string, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{script}, args...)...)
		cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		require.NoError(t, err, "%s: %s", script, stderr.String())
		return stdout
	}
}
