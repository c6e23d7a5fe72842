package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenAIClientFeatures drives log-probabilities, n choices and embeddings through OpenAI's
// official Node client (testdata/openai-features.js), whole and streamed. What the client
// parsed must equal the server's replies to the same requests read here over plain HTTP: the
// chat and legacy log-probabilities (streamed ones the whole reply's), the choices of n = 3
// (those of single requests with seeds 40, 41, 42), and the embeddings, which the client asks
// for in base64 by default and decodes itself; n = 17 arrives as the client's BadRequestError.
func TestOpenAIClientFeatures(t *testing.T) {
	client := openaiClient(t)
	_, ts := newServer(t, 2, 16, 256)
	stdout := client("testdata/openai-features.js", ts.URL)
	type choice struct {
		Index        int
		Text, Finish string
	}
	var got struct {
		ChatLogprobs, ChatLogprobsStream []struct {
			Token       string
			Logprob     float64
			Bytes       []int
			TopLogprobs []struct {
				Token   string
				Logprob float64
				Bytes   []int
			} `json:"top_logprobs"`
		}
		CompletionLogprobs struct {
			Tokens        []string
			TokenLogprobs []float64            `json:"token_logprobs"`
			TopLogprobs   []map[string]float64 `json:"top_logprobs"`
			TextOffset    []int                `json:"text_offset"`
		}
		CompletionLogprobsStream struct {
			Tokens        []string
			TokenLogprobs []float64 `json:"token_logprobs"`
		}
		ChatChoices, CompletionChoices             []choice
		ChatChoicesStream, CompletionChoicesStream []string
		ChatChoicesUsage                           struct {
			CompletionTokens int `json:"completion_tokens"`
		}
		Embeddings, EmbeddingsFloat [][]float64
		EmbeddingsUsage             struct {
			PromptTokens int `json:"prompt_tokens"`
		}
		Refused struct {
			Status         int
			Class, Message string
		}
	}
	require.NoError(t, json.Unmarshal(stdout, &got), "%s", stdout)

	// Chat log-probabilities: the server's reply over plain HTTP, whole, then streamed alike.
	code, chat := post(t, ts, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":3}`)
	require.Equal(t, 200, code, chat)
	want := chatReported(t, chat["choices"].([]any)[0].(map[string]any)["logprobs"])
	require.Len(t, got.ChatLogprobs, len(want))
	require.Len(t, got.ChatLogprobsStream, len(want))
	for i, w := range want {
		for _, g := range []struct {
			bytes   []int
			logprob float64
			top     int
		}{{got.ChatLogprobs[i].Bytes, got.ChatLogprobs[i].Logprob, len(got.ChatLogprobs[i].TopLogprobs)},
			{got.ChatLogprobsStream[i].Bytes, got.ChatLogprobsStream[i].Logprob, len(got.ChatLogprobsStream[i].TopLogprobs)}} {
			assert.Equal(t, bytesOf(w.piece), g.bytes, "token %d", i)
			assert.InDelta(t, w.logprob, g.logprob, 1e-12, "token %d", i)
			assert.Equal(t, 3, g.top, "token %d", i)
		}
	}

	// Text completion log-probabilities.
	code, cmpl := post(t, ts, "/v1/completions", `{"model":"tiny","prompt":"func main","max_tokens":6,"temperature":0,"logprobs":3}`)
	require.Equal(t, 200, code, cmpl)
	wantC := completionReported(t, cmpl["choices"].([]any)[0].(map[string]any)["logprobs"])
	require.Len(t, got.CompletionLogprobs.Tokens, len(wantC))
	assert.Equal(t, got.CompletionLogprobs.Tokens, got.CompletionLogprobsStream.Tokens, "streamed")
	for i, w := range wantC {
		assert.Equal(t, w.piece, got.CompletionLogprobs.Tokens[i])
		assert.InDelta(t, w.logprob, got.CompletionLogprobs.TokenLogprobs[i], 1e-12)
		assert.InDelta(t, w.logprob, got.CompletionLogprobsStream.TokenLogprobs[i], 1e-12)
		assert.Equal(t, w.top, got.CompletionLogprobs.TopLogprobs[i])
		assert.Equal(t, w.offset, got.CompletionLogprobs.TextOffset[i])
	}

	// n = 3 with seed 40: single requests with seeds 40, 41, 42.
	for _, c := range []struct {
		path, body string
		whole      []choice
		streamed   []string
	}{
		{"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"Hello"}],"temperature":1.2,"top_p":1,"top_k":0,"min_p":0,"max_tokens":8,"seed":`, got.ChatChoices, got.ChatChoicesStream},
		{"/v1/completions", `{"model":"tiny","prompt":"func main","temperature":1.2,"top_p":1,"top_k":0,"min_p":0,"max_tokens":8,"seed":`, got.CompletionChoices, got.CompletionChoicesStream},
	} {
		require.Len(t, c.whole, 3, c.path)
		for i := range 3 {
			code, out := post(t, ts, c.path, c.body+jsonInt(40+i)+`}`)
			require.Equal(t, 200, code, out)
			ch := out["choices"].([]any)[0].(map[string]any)
			text, _ := ch["text"].(string)
			if m, ok := ch["message"].(map[string]any); ok {
				text = m["content"].(string)
			}
			assert.Equal(t, i, c.whole[i].Index)
			assert.Equal(t, text, c.whole[i].Text, "%s choice %d", c.path, i)
			assert.Equal(t, text, c.streamed[i], "%s choice %d streamed", c.path, i)
		}
	}
	assert.Equal(t, 3*8, got.ChatChoicesUsage.CompletionTokens)

	// Embeddings: the client's decoding of base64, its floats, and the server's floats agree.
	code, emb := post(t, ts, "/v1/embeddings", `{"model":"tiny","input":["func main() { return nil }","Hello, world!"]}`)
	require.Equal(t, 200, code, emb)
	data := emb["data"].([]any)
	require.Len(t, got.Embeddings, 2)
	require.Len(t, got.EmbeddingsFloat, 2)
	// The same float32 values: JSON numbers are their shortest float32 spellings.
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	for i := range data {
		w := f32(vectorOf(t, data[i]))
		assert.Equal(t, w, f32(got.Embeddings[i]), "input %d, base64 decoded by the client", i)
		assert.Equal(t, w, f32(got.EmbeddingsFloat[i]), "input %d, floats", i)
	}
	assert.Equal(t, emb["usage"].(map[string]any)["prompt_tokens"], float64(got.EmbeddingsUsage.PromptTokens))

	assert.Equal(t, 400, got.Refused.Status)
	assert.Equal(t, "BadRequestError", got.Refused.Class)
	assert.Contains(t, got.Refused.Message, "n = 17")
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }
