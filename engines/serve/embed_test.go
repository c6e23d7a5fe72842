package serve

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/tokenizer"
)

// stepByStepEmbedding is the reference embedding of ids: each position's final hidden state
// from a decoder of batch 1 (one token per graph, through the KV cache) given the prefix that
// ends there, then their mean and its Euclidean norm in float64.
func stepByStepEmbedding(t *testing.T, s *Server, ids []int32) []float64 {
	dec, err := decoding.NewDecoder(s.cfg.Model, decoding.DecoderOptions{MaxContext: 256, Batch: 1})
	require.NoError(t, err)
	defer dec.Close()
	mean := make([]float64, s.cfg.Model.Arch.DModel)
	for i := range ids {
		rows, err := dec.Hidden(ids[:i+1])
		require.NoError(t, err)
		for j, v := range rows[i] {
			mean[j] += float64(v) / float64(len(ids))
		}
	}
	norm := 0.0
	for _, v := range mean {
		norm += v * v
	}
	for j := range mean {
		mean[j] /= math.Sqrt(norm)
	}
	return mean
}

// vectorOf reads one data[] item's embedding, floats or base64.
func vectorOf(t *testing.T, item any) []float64 {
	switch e := item.(map[string]any)["embedding"].(type) {
	case []any:
		out := make([]float64, len(e))
		for i, v := range e {
			out[i] = v.(float64)
		}
		return out
	case string:
		b, err := base64.StdEncoding.DecodeString(e)
		require.NoError(t, err)
		require.Zero(t, len(b)%4)
		out := make([]float64, len(b)/4)
		for i := range out {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return out
	}
	t.Fatalf("embedding %v", item)
	return nil
}

// TestEmbeddings: /v1/embeddings gives, for a string, an array of strings, an array of token
// ids and an array of them, the mean-pooled, normalised final hidden states a batch-1 decoder
// computes position by position (within 1e-5 relative), floats or base64 alike (the same
// float32 values), with usage counting the tokens; concurrent completions are unaffected; bad
// input is refused with 400 naming it.
func TestEmbeddings(t *testing.T) {
	s, ts := newServer(t, 2, 8, 256)
	texts := []string{"func main() { return nil }", "Hello, world!", "if err != nil"}
	var seqs [][]int32
	for _, text := range texts {
		seqs = append(seqs, s.tok.Encode(text, tokenizer.EncodeOptions{}))
	}
	want := make([][]float64, len(seqs))
	for i, ids := range seqs {
		want[i] = stepByStepEmbedding(t, s, ids)
	}
	diff := 0.0
	for j := range want[0] {
		diff = max(diff, math.Abs(want[0][j]-want[1][j]))
	}
	require.Greater(t, diff, 1e-3, "distinct texts, distinct embeddings")
	check := func(what string, got []float64, want []float64) {
		t.Helper()
		require.Len(t, got, len(want), what)
		worst := 0.0
		for j := range want {
			worst = max(worst, math.Abs(got[j]-want[j]))
		}
		assert.Less(t, worst, 1e-5, "%s: the largest difference from the reference (a unit vector)", what)
	}
	ids := func(seq []int32) string {
		return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(seq)), ","), "[]")
	}

	// A completion running meanwhile: embeddings run between its steps and change nothing.
	var wg sync.WaitGroup
	var during string
	wg.Go(func() {
		during = completionText(t, ts, `{"prompt":"func main","max_tokens":40,"temperature":0}`)
	})
	for _, format := range []string{"float", "base64"} {
		code, out := post(t, ts, "/v1/embeddings", fmt.Sprintf(`{"model":"tiny","input":%q,"encoding_format":%q}`, texts[0], format))
		require.Equal(t, 200, code, out)
		assert.Equal(t, "list", out["object"])
		data := out["data"].([]any)
		require.Len(t, data, 1)
		check(format+" string", vectorOf(t, data[0]), want[0])
		assert.Equal(t, float64(len(seqs[0])), out["usage"].(map[string]any)["prompt_tokens"])

		code, out = post(t, ts, "/v1/embeddings", fmt.Sprintf(`{"input":[%q,%q,%q],"encoding_format":%q}`, texts[0], texts[1], texts[2], format))
		require.Equal(t, 200, code, out)
		data = out["data"].([]any)
		require.Len(t, data, 3)
		total := 0
		for i := range data {
			assert.Equal(t, float64(i), data[i].(map[string]any)["index"])
			check(fmt.Sprintf("%s array %d", format, i), vectorOf(t, data[i]), want[i])
			total += len(seqs[i])
		}
		assert.Equal(t, float64(total), out["usage"].(map[string]any)["total_tokens"])

		code, out = post(t, ts, "/v1/embeddings", fmt.Sprintf(`{"input":[%s],"encoding_format":%q}`, ids(seqs[1]), format))
		require.Equal(t, 200, code, out)
		check(format+" token ids", vectorOf(t, out["data"].([]any)[0]), want[1])

		code, out = post(t, ts, "/v1/embeddings", fmt.Sprintf(`{"input":[[%s],[%s]],"encoding_format":%q}`, ids(seqs[2]), ids(seqs[0]), format))
		require.Equal(t, 200, code, out)
		check(format+" arrays of token ids 0", vectorOf(t, out["data"].([]any)[0]), want[2])
		check(format+" arrays of token ids 1", vectorOf(t, out["data"].([]any)[1]), want[0])
	}
	wg.Wait()
	assert.Equal(t, completionText(t, ts, `{"prompt":"func main","max_tokens":40,"temperature":0}`), during, "a completion beside embeddings")

	long := strings.Repeat("func main() ", 400)
	for _, c := range []struct{ body, param string }{
		{`{}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":""}`, "input"},
		{`{"input":[[]]}`, "input"},
		{`{"input":[1,-2]}`, "input"},
		{`{"input":[1,99999]}`, "input"},
		{`{"input":[1,1.5]}`, "input"},
		{`{"input":["a",1]}`, "input"},
		{`{"input":{"a":1}}`, "input"},
		{fmt.Sprintf(`{"input":%q}`, long), "input"},
		{fmt.Sprintf(`{"input":[%s]}`, strings.TrimSuffix(strings.Repeat("1,", 257), ",")), "input"},
		{fmt.Sprintf(`{"input":[%s]}`, strings.TrimSuffix(strings.Repeat(`"a",`, maxEmbeddingInputs+1), ",")), "input"},
		{`{"input":"hi","encoding_format":"int8"}`, "encoding_format"},
		{`{"input":"hi","dimensions":3}`, "dimensions"},
	} {
		code, out := post(t, ts, "/v1/embeddings", c.body)
		assert.Equal(t, 400, code, "%.80s: %v", c.body, out)
		if e, ok := out["error"].(map[string]any); assert.True(t, ok, c.body) {
			assert.Equal(t, c.param, e["param"], "%.80s: %v", c.body, e["message"])
		}
	}
	code, out := post(t, ts, "/v1/embeddings", fmt.Sprintf(`{"input":"hi","dimensions":%d}`, s.cfg.Model.Arch.DModel))
	assert.Equal(t, 200, code, out)
}

// FuzzEmbeddings feeds arbitrary bodies to /v1/embeddings through a running server's handler:
// no body may panic (counted would answer 500); each gets either 200 with one unit-length
// embedding per input, or a 4xx with an error in OpenAI's shape. The seeds run under go test.
func FuzzEmbeddings(f *testing.F) {
	for _, seed := range []string{
		`{"input":"hi"}`, `{"input":["a","b"],"encoding_format":"base64"}`, `{"input":[1,2,3]}`, `{"input":[[1],[2,3]]}`,
		`{"input":[]}`, `{"input":[[]]}`, `{"input":""}`, `{"input":[-1]}`, `{"input":[1e10]}`, `{"input":null}`, `{}`, `{`, `[]`,
		`{"input":"hi","dimensions":0}`, `{"input":"hi","encoding_format":null}`, `{"input":"hi","model":"gpt-4"}`,
		`{"input":"` + strings.Repeat("func main() ", 100) + `"}`, `{"input":"\ud800` + "\xff" + `"}`,
	} {
		f.Add([]byte(seed))
	}
	s, _ := newServer(f, 1, 2, 64)
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/embeddings", bytes.NewReader(body)))
		var out struct {
			Data  []map[string]any `json:"data"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%q: status %d, not JSON: %s", body, rec.Code, rec.Body.Bytes())
		}
		switch {
		case rec.Code == 200:
			if len(out.Data) == 0 {
				t.Fatalf("%q: 200 with no data", body)
			}
			for _, d := range out.Data {
				norm := 0.0
				for _, v := range vectorOf(t, d) {
					norm += v * v
				}
				if math.Abs(norm-1) > 1e-4 {
					t.Fatalf("%q: an embedding of squared norm %v", body, norm)
				}
			}
		case rec.Code >= 400 && rec.Code < 500:
			if out.Error == nil || out.Error.Message == "" {
				t.Fatalf("%q: status %d with no error: %s", body, rec.Code, rec.Body.Bytes())
			}
		default:
			t.Fatalf("%q: status %d: %s", body, rec.Code, rec.Body.Bytes())
		}
		if s.preparing.Load() != 0 {
			t.Fatalf("%q: the request's place was not given back", body)
		}
	})
}
