package serve

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/tokenizer"
)

// events posts body and returns the streamed chunks, decoded, up to "data: [DONE]".
func events(t testing.TB, ts *httptest.Server, path, body string) []map[string]any {
	resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			break
		}
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(data), &c), data)
		require.Nil(t, c["error"], data)
		out = append(out, c)
	}
	require.True(t, done, "the stream ends with [DONE]")
	return out
}

// reported is one token of a reply's log-probabilities, in either shape.
type reported struct {
	piece   string
	logprob float64
	top     map[string]float64
	offset  int
}

// chatReported reads a chat choice's logprobs.content.
func chatReported(t testing.TB, lp any) []reported {
	var out []reported
	if lp == nil {
		return nil
	}
	for _, c := range lp.(map[string]any)["content"].([]any) {
		c := c.(map[string]any)
		r := reported{piece: c["token"].(string), logprob: c["logprob"].(float64), top: map[string]float64{}}
		var bs []byte
		for _, b := range c["bytes"].([]any) {
			bs = append(bs, byte(b.(float64)))
		}
		assert.Equal(t, r.piece, strings.ToValidUTF8(string(bs), "\uFFFD"), "bytes are the token's")
		r.piece = string(bs)
		for _, a := range c["top_logprobs"].([]any) {
			a := a.(map[string]any)
			var ab []byte
			for _, b := range a["bytes"].([]any) {
				ab = append(ab, byte(b.(float64)))
			}
			if _, ok := r.top[string(ab)]; !ok {
				r.top[string(ab)] = a["logprob"].(float64)
			}
		}
		out = append(out, r)
	}
	return out
}

// completionReported reads a text completion choice's legacy logprobs.
func completionReported(t testing.TB, lp any) []reported {
	if lp == nil {
		return nil
	}
	m := lp.(map[string]any)
	var out []reported
	for i, tok := range m["tokens"].([]any) {
		r := reported{piece: tok.(string), logprob: m["token_logprobs"].([]any)[i].(float64), top: map[string]float64{},
			offset: int(m["text_offset"].([]any)[i].(float64))}
		for k, v := range m["top_logprobs"].([]any)[i].(map[string]any) {
			r.top[k] = v.(float64)
		}
		out = append(out, r)
	}
	return out
}

// refDistribution is the test's float64 reference of the distribution a token is drawn from
// (sample.Sampler.KeepLogprobs): log-softmax at temperature 1 when greedy; otherwise top-k,
// softmax at the temperature, top-p and min-p over logits, renormalised. It returns the
// log-probability of each surviving token.
func refDistribution(p sample.Params, logits []float32) map[int32]float64 {
	var ids []int32 // the tokens not masked out
	for i, v := range logits {
		if !math.IsInf(float64(v), -1) {
			ids = append(ids, int32(i))
		}
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	out := map[int32]float64{}
	top := float64(logits[ids[0]])
	if p.Temperature == 0 {
		sum := 0.0
		for _, id := range ids {
			sum += math.Exp(float64(logits[id]) - top)
		}
		for _, id := range ids {
			out[id] = float64(logits[id]) - top - math.Log(sum)
		}
		return out
	}
	if p.TopK > 0 && p.TopK < len(ids) {
		ids = ids[:p.TopK]
	}
	probs := make([]float64, len(ids))
	sum := 0.0
	for i, id := range ids {
		probs[i] = math.Exp((float64(logits[id]) - top) / p.Temperature)
		sum += probs[i]
	}
	cum, cut := 0.0, len(ids)
	for i := range probs {
		probs[i] /= sum
		if cum += probs[i]; p.TopP < 1 && cum >= p.TopP {
			cut = i + 1
			break
		}
	}
	kept := 0.0
	for i := range cut {
		if probs[i] >= p.MinP*probs[0] {
			kept += probs[i]
		}
	}
	for i := range cut {
		if probs[i] >= p.MinP*probs[0] {
			out[ids[i]] = math.Log(probs[i] / kept)
		}
	}
	return out
}

// checkAgainstDecoder follows a reply's tokens with a lone decoding.Decoder from the prompt ids:
// at every step, the reported token must be one the reference distribution keeps, with its
// log-probability, and the reported alternatives the reference's most likely, with theirs.
func checkAgainstDecoder(t *testing.T, s *Server, ids []int32, p sample.Params, top int, got []reported, what string) {
	t.Helper()
	checkConstrained(t, s, ids, p, top, got, nil, what)
}

// checkConstrained is checkAgainstDecoder with the logits of the tokens g does not allow (each
// asked with Allows, g advanced along the reply) set to -Inf first, when g is not nil.
func checkConstrained(t *testing.T, s *Server, ids []int32, p sample.Params, top int, got []reported, gm *grammar.Matcher, what string) {
	t.Helper()
	require.NotEmpty(t, got, what)
	dec, err := decoding.NewDecoder(s.cfg.Model, decoding.DecoderOptions{MaxContext: 256})
	require.NoError(t, err)
	defer dec.Close()
	logits, err := dec.Prompt(ids)
	require.NoError(t, err)
	piece := func(id int32) string {
		pc, err := s.tok.Piece(id, tokenizer.DecodeOptions{})
		require.NoError(t, err)
		return pc
	}
	const tol = 2e-3 // the batched decoder's logits against the lone decoder's
	for step, g := range got {
		want := refDistribution(p, masked(logits, gm))
		// The reference's alternatives, best first.
		var alts []int32
		for id := range want {
			alts = append(alts, id)
		}
		slices.SortFunc(alts, func(a, b int32) int {
			if want[a] != want[b] {
				if want[a] > want[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
		// JSON strings hold no invalid UTF-8: the legacy shape's token text and keys have
		// U+FFFD for it, and two alternatives of the same text keep the likelier.
		key := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		tok := int32(-1)
		for _, id := range alts {
			if key(piece(id)) == key(g.piece) && math.Abs(want[id]-g.logprob) < tol {
				tok = id
				break
			}
		}
		require.GreaterOrEqual(t, tok, int32(0), "%s: step %d: token %q with log-probability %v is not one the reference keeps", what, step, g.piece, g.logprob)
		gotTop := map[string]float64{}
		for k, v := range g.top {
			if _, ok := gotTop[key(k)]; !ok || v > gotTop[key(k)] {
				gotTop[key(k)] = v
			}
		}
		seen := map[string]bool{}
		for _, id := range alts[:min(top, len(alts))] {
			if seen[key(piece(id))] {
				continue
			}
			seen[key(piece(id))] = true
			lp, ok := gotTop[key(piece(id))]
			require.True(t, ok, "%s: step %d: the reference's alternative %q is missing from %v", what, step, piece(id), g.top)
			assert.InDelta(t, want[id], lp, tol, "%s: step %d: alternative %q", what, step, piece(id))
		}
		assert.Len(t, gotTop, len(seen), "%s: step %d: alternatives %v", what, step, g.top)
		if gm != nil {
			require.NoError(t, gm.Accept(tok))
		}
		if logits, err = dec.Next(tok); err != nil {
			require.NoError(t, err)
		}
	}
}

// masked is a copy of logits with those of the tokens m does not allow -Inf (logits itself
// without m).
func masked(logits []float32, m *grammar.Matcher) []float32 {
	if m == nil {
		return logits
	}
	out := slices.Clone(logits)
	for i := range out {
		if !m.Allows(int32(i)) {
			out[i] = float32(math.Inf(-1))
		}
	}
	return out
}

// TestLogprobs: the log-probabilities a reply reports, chat and text completions, streamed
// and not, greedy and sampled, are those a lone decoding.Decoder's logits give for the same tokens
// with the sampler's filters applied as documented (sample.Sampler.KeepLogprobs); the streamed
// ones equal the whole reply's; the text completion's offsets are where each token's text starts.
func TestLogprobs(t *testing.T) {
	s, ts := newServer(t, 2, 8, 256)
	greedy := sample.GreedyParams()
	sampled := sample.Params{Temperature: 0.7, TopK: 12, TopP: 0.9, MinP: 0.05, RepeatPenalty: 1, Seed: 7}
	promptIDs := s.tok.Encode("func main", tokenizer.EncodeOptions{})
	tmpl, err := sample.TemplateByName("chatml")
	require.NoError(t, err)
	chatText, err := tmpl.Apply([]sample.Message{{Role: "user", Content: "Hello"}}, true)
	require.NoError(t, err)
	chatIDs := s.tok.Encode(chatText, tokenizer.EncodeOptions{ParseSpecial: true})

	for _, c := range []struct {
		name    string
		p       sample.Params
		options string
	}{
		{"greedy", greedy, `"temperature":0`},
		{"sampled", sampled, `"temperature":0.7,"top_k":12,"top_p":0.9,"min_p":0.05,"seed":7`},
	} {
		// Text completions.
		body := fmt.Sprintf(`{"prompt":"func main","max_tokens":10,"logprobs":5,%s`, c.options)
		code, whole := post(t, ts, "/v1/completions", body+"}")
		require.Equal(t, 200, code, whole)
		choice := whole["choices"].([]any)[0].(map[string]any)
		got := completionReported(t, choice["logprobs"])
		checkAgainstDecoder(t, s, promptIDs, c.p, 5, got, c.name+" completion")
		text := choice["text"].(string)
		// The legacy shape has no bytes: a token's text with U+FFFD for invalid UTF-8 has
		// another length. The offsets are where each token's bytes start.
		for i, r := range got[1:] {
			if utf8.ValidString(got[i].piece) && !strings.ContainsRune(got[i].piece, utf8.RuneError) {
				assert.Equal(t, got[i].offset+len(got[i].piece), r.offset, "token %d's offset", i+1)
			}
		}
		var streamed []reported
		streamedText := ""
		for _, ch := range events(t, ts, "/v1/completions", body+`,"stream":true}`) {
			for _, cc := range ch["choices"].([]any) {
				cc := cc.(map[string]any)
				streamedText += cc["text"].(string)
				streamed = append(streamed, completionReported(t, cc["logprobs"])...)
			}
		}
		assert.Equal(t, text, streamedText)
		assert.Equal(t, pieces(got), pieces(streamed), c.name+": streamed tokens")
		for i := range got {
			assert.InDelta(t, got[i].logprob, streamed[i].logprob, 1e-9)
			assert.Equal(t, got[i].top, streamed[i].top)
		}

		// Chat.
		body = fmt.Sprintf(`{"messages":[{"role":"user","content":"Hello"}],"max_tokens":10,"logprobs":true,"top_logprobs":3,%s`, c.options)
		code, whole = post(t, ts, "/v1/chat/completions", body+"}")
		require.Equal(t, 200, code, whole)
		choice = whole["choices"].([]any)[0].(map[string]any)
		got = chatReported(t, choice["logprobs"])
		checkAgainstDecoder(t, s, chatIDs, c.p, 3, got, c.name+" chat")
		assert.Equal(t, choice["message"].(map[string]any)["content"], asJSON(t, strings.Join(pieces(got), "")), "the tokens make up the text")
		streamed = nil
		for _, ch := range events(t, ts, "/v1/chat/completions", body+`,"stream":true}`) {
			for _, cc := range ch["choices"].([]any) {
				streamed = append(streamed, chatReported(t, cc.(map[string]any)["logprobs"])...)
			}
		}
		assert.Equal(t, pieces(got), pieces(streamed), c.name+": streamed chat tokens")
		for i := range got {
			assert.InDelta(t, got[i].logprob, streamed[i].logprob, 1e-9)
			assert.Equal(t, got[i].top, streamed[i].top)
		}
	}

	// Without asking, none; a chat asking for no alternatives gets the chosen tokens alone.
	code, plain := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":3,"temperature":0}`)
	require.Equal(t, 200, code)
	assert.Nil(t, plain["choices"].([]any)[0].(map[string]any)["logprobs"])
	code, bare := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":3,"temperature":0,"logprobs":true}`)
	require.Equal(t, 200, code)
	for _, r := range chatReported(t, bare["choices"].([]any)[0].(map[string]any)["logprobs"]) {
		assert.Empty(t, r.top)
	}
}

// TestLogprobsGrammar: with response_format json_object, the reported distribution is the
// reference's over the tokens the grammar allows at each step (the rest -Inf), greedy and
// sampled: no alternative the grammar forbids is reported.
func TestLogprobsGrammar(t *testing.T) {
	s, ts := newServer(t, 1, 8, 256)
	tmpl, err := sample.TemplateByName("chatml")
	require.NoError(t, err)
	chatText, err := tmpl.Apply([]sample.Message{{Role: "user", Content: "JSON"}}, true)
	require.NoError(t, err)
	chatIDs := s.tok.Encode(chatText, tokenizer.EncodeOptions{ParseSpecial: true})
	for _, c := range []struct {
		name    string
		p       sample.Params
		options string
	}{
		{"greedy", sample.GreedyParams(), `"temperature":0`},
		{"sampled", sample.Params{Temperature: 1, TopK: 0, TopP: 1, RepeatPenalty: 1}, `"temperature":1,"top_k":0,"top_p":1,"min_p":0,"seed":5`},
	} {
		code, out := post(t, ts, "/v1/chat/completions", `{"messages":[{"role":"user","content":"JSON"}],"max_tokens":12,"logprobs":true,"top_logprobs":4,"response_format":{"type":"json_object"},`+c.options+`}`)
		require.Equal(t, 200, code, out)
		got := chatReported(t, out["choices"].([]any)[0].(map[string]any)["logprobs"])
		m := grammar.MustParse(grammar.JSONObject).NewMatcher(grammar.VocabOf(s.tok))
		checkConstrained(t, s, chatIDs, c.p, 4, got, m, c.name+" json_object")
	}
}

// TestLogprobsStop: a token cut off by a stop string reports no log-probabilities: the
// reported tokens make up the reply's text.
func TestLogprobsStop(t *testing.T) {
	_, ts := newServer(t, 1, 8, 256)
	code, full := post(t, ts, "/v1/completions", `{"prompt":"func main","max_tokens":12,"temperature":0}`)
	require.Equal(t, 200, code)
	text := full["choices"].([]any)[0].(map[string]any)["text"].(string)
	require.Greater(t, len(text), 6)
	stop := text[4:6]
	for _, streamed := range []bool{false, true} {
		body := fmt.Sprintf(`{"prompt":"func main","max_tokens":12,"temperature":0,"logprobs":1,"stop":%q,"stream":%v}`, stop, streamed)
		var got []reported
		reply := ""
		if streamed {
			for _, ch := range events(t, ts, "/v1/completions", body) {
				for _, cc := range ch["choices"].([]any) {
					reply += cc.(map[string]any)["text"].(string)
					got = append(got, completionReported(t, cc.(map[string]any)["logprobs"])...)
				}
			}
		} else {
			code, out := post(t, ts, "/v1/completions", body)
			require.Equal(t, 200, code)
			reply = out["choices"].([]any)[0].(map[string]any)["text"].(string)
			got = completionReported(t, out["choices"].([]any)[0].(map[string]any)["logprobs"])
		}
		joined := strings.Join(pieces(got), "")
		assert.True(t, strings.HasPrefix(joined, reply), "the tokens %q cover the reply %q", joined, reply)
		assert.Less(t, len(joined)-len(got[len(got)-1].piece), len(reply)+1, "no token starts after the reply's text ends")
	}
}

// asJSON is s as a JSON string holds it: each byte of invalid UTF-8 a U+FFFD.
func asJSON(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var out string
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func pieces(rs []reported) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.piece
	}
	return out
}

// TestChoices: n choices with a seed are the replies single requests with seed, seed+1, …
// give, whole and streamed, chat and completions; usage counts every choice's tokens and the
// prompt once.
func TestChoices(t *testing.T) {
	_, ts := newServer(t, 2, 16, 256)
	for _, chat := range []bool{false, true} {
		path, body := "/v1/completions", `{"prompt":"func main","max_tokens":8,"temperature":1.2,"top_k":0,"top_p":1,"min_p":0`
		if chat {
			path, body = "/v1/chat/completions", `{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"temperature":1.2,"top_k":0,"top_p":1,"min_p":0`
		}
		textOf := func(choice map[string]any) string {
			if chat {
				return choice["message"].(map[string]any)["content"].(string)
			}
			return choice["text"].(string)
		}
		var singles []string
		for i := range 3 {
			code, out := post(t, ts, path, fmt.Sprintf(`%s,"seed":%d}`, body, 40+i))
			require.Equal(t, 200, code, out)
			singles = append(singles, textOf(out["choices"].([]any)[0].(map[string]any)))
		}
		require.NotEqual(t, singles[0], singles[1], "distinct seeds, distinct replies (a random model at temperature 1.2)")
		code, out := post(t, ts, path, body+`,"seed":40,"n":3}`)
		require.Equal(t, 200, code, out)
		choices := out["choices"].([]any)
		require.Len(t, choices, 3)
		completion := 0
		for i, c := range choices {
			c := c.(map[string]any)
			assert.Equal(t, float64(i), c["index"])
			assert.Equal(t, singles[i], textOf(c), "choice %d", i)
		}
		usage := out["usage"].(map[string]any)
		completion = int(usage["completion_tokens"].(float64))
		assert.Equal(t, 3*8, completion)
		assert.Equal(t, usage["prompt_tokens"].(float64)+usage["completion_tokens"].(float64), usage["total_tokens"].(float64))

		streamed := make([]string, 3)
		finished := 0
		var streamUsage map[string]any
		for _, ch := range events(t, ts, path, body+`,"seed":40,"n":3,"stream":true,"stream_options":{"include_usage":true}}`) {
			if u, ok := ch["usage"].(map[string]any); ok {
				streamUsage = u
			}
			for _, cc := range ch["choices"].([]any) {
				cc := cc.(map[string]any)
				i := int(cc["index"].(float64))
				if chat {
					if d, ok := cc["delta"].(map[string]any)["content"].(string); ok {
						streamed[i] += d
					}
				} else {
					streamed[i] += cc["text"].(string)
				}
				if cc["finish_reason"] != nil {
					finished++
				}
			}
		}
		assert.Equal(t, singles, streamed)
		assert.Equal(t, 3, finished, "a finish reason per choice")
		require.NotNil(t, streamUsage)
		assert.Equal(t, float64(3*8), streamUsage["completion_tokens"])
	}
}
