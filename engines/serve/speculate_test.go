package serve

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
	"github.com/toyml/toy/engines/tokenizer"
)

// otherModel is writeModel's model with other random weights (a draft that the target rejects
// nearly always), written once.
var otherModel = sync.OnceValues(func() (string, error) {
	return writeModelSeeded(filepath.Dir(modelPath), "other.gguf", 7)
})

// withDraft makes a server draft with the model at path, gamma tokens a step.
func withDraft(t testing.TB, path string, gamma int) func(*Config) {
	return func(c *Config) {
		m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
		require.NoError(t, err)
		d, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{Slots: c.Decoder.Slots(), SlotContext: c.Decoder.SlotContext(), Batch: 64})
		require.NoError(t, err)
		t.Cleanup(func() {
			d.Close()
			m.Close()
		})
		c.Draft, c.DraftTokens = d, gamma
	}
}

// withDFlash makes a server draft with a random DFlash drafter of the model (blocks of 4, a
// window of 8 positions).
func withDFlash(t testing.TB) func(*Config) {
	return func(c *Config) {
		df, err := speculative.NewDFlash(c.Model, speculative.DFlashConfig{Gamma: 4, Window: 8, TargetLayers: speculative.DefaultTargetLayers(c.Model.Arch.NLayers, 2), Layers: 1}, 3)
		require.NoError(t, err)
		t.Cleanup(func() { df.Close() })
		c.DFlash = df
	}
}

// specCounter is the value of one of /metrics' speculative counters.
func specCounter(t testing.TB, page, name string) int {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindStringSubmatch(page)
	require.NotNil(t, m, "%s in\n%s", name, page)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// TestSpeculativeGreedyIsPlain: with a draft of the target's own weights (which proposes what
// the target chooses: nearly every proposal accepted), with a draft of other weights (many
// rejected, their cells rolled back) and with a random DFlash drafter (reading the target's
// captured hidden states; nearly every proposal rejected), greedy replies — one at a time and 16 concurrent
// clients over 4 slots, with penalties, stop strings and replies ending within a step's
// accepted tokens — are the server's without a drafter, token for token; /metrics counts the
// proposals and acceptances, per slot and in total.
func TestSpeculativeGreedyIsPlain(t *testing.T) {
	other, err := otherModel()
	require.NoError(t, err)
	ps := prompts(16)
	ps = append(ps, `{"prompt":"func main","max_tokens":40,"temperature":0,"frequency_penalty":1.5}`,
		`{"prompt":"if err != nil","max_tokens":30,"temperature":0,"stop":["n"]}`,
		`{"prompt":"Hello","max_tokens":1,"temperature":0}`)
	_, plain := newServer(t, 4, 32, 128)
	want := make([]string, len(ps))
	for i, p := range ps {
		want[i] = completionText(t, plain, p)
	}
	for _, draft := range []struct {
		name, path string
		gamma      int
	}{{"self", modelPath, 4}, {"other", other, 3}, {"dflash", "", 0}} {
		with := withDFlash(t)
		if draft.path != "" {
			with = withDraft(t, draft.path, draft.gamma)
		}
		log := &logBuffer{}
		_, ts := newServer(t, 4, 32, 128, with, func(c *Config) { c.Log = log })
		alone := make([]string, len(ps))
		for i, p := range ps {
			alone[i] = completionText(t, ts, p)
		}
		assert.Equal(t, want, alone, "%s draft, one at a time", draft.name)
		together := make([]string, len(ps))
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Go(func() { together[i] = completionText(t, ts, p) })
		}
		wg.Wait()
		assert.Equal(t, want, together, "%s draft, concurrent", draft.name)

		page := metricsText(t, ts)
		proposed, accepted := specCounter(t, page, "toy_draft_proposed_tokens_total"), specCounter(t, page, "toy_draft_accepted_tokens_total")
		perSlot := 0
		for i := range 4 {
			perSlot += specCounter(t, page, fmt.Sprintf(`toy_slot_draft_proposed_tokens_total{slot="%d"}`, i))
		}
		t.Logf("%s draft: %d of %d proposals accepted", draft.name, accepted, proposed)
		assert.NotContains(t, log.String(), "drafting", "no drafting failed")
		assert.Equal(t, proposed, perSlot, "the slots' proposals add up to the total")
		assert.Positive(t, proposed)
		assert.LessOrEqual(t, accepted, proposed)
		if draft.name == "self" {
			assert.Greater(t, accepted, proposed*9/10, "the target's own weights propose its choices")
		} else {
			assert.Less(t, accepted, proposed, "other weights, and a random drafter, propose tokens the target rejects")
		}
	}
}

// TestSpeculativeSamplingDistribution: sampled replies of three tokens (the first from the
// prompt's step, then speculative steps of one proposal) (top-k 3, temperature 1)
// from a server drafting with other weights follow the target's distribution — each reply's
// probability computed exactly from the target's logits — within a χ² bound, and not the
// draft's, though the two differ (so that proposals accepted blindly would fail).
func TestSpeculativeSamplingDistribution(t *testing.T) {
	other, err := otherModel()
	require.NoError(t, err)
	s, ts := newServer(t, 4, 64, 64, withDraft(t, other, 1))
	const prompt = "func main() {"
	params := sample.Params{Temperature: 1, TopK: 3, TopP: 1, RepeatPenalty: 1}
	ids := s.tok.Encode(prompt, tokenizer.EncodeOptions{})

	// exact is the distribution of the three-token replies of the model at path, by their text
	// as the API sends it (JSON makes each byte of an incomplete character U+FFFD).
	exact := func(path string) map[string]float64 {
		m, err := decoding.OpenModel(path, decoding.ModelOptions{Threads: 1})
		require.NoError(t, err)
		defer m.Close()
		d, err := decoding.NewBatchDecoder(m, decoding.BatchDecoderOptions{SlotContext: 64})
		require.NoError(t, err)
		defer d.Close()
		out := map[string]float64{}
		var walk func(h []int32, pr float64)
		walk = func(h []int32, pr float64) {
			if len(h) == len(ids)+3 {
				text, err := s.tok.Decode(h[len(ids):], tokenizer.DecodeOptions{})
				require.NoError(t, err)
				b, err := json.Marshal(text)
				require.NoError(t, err)
				require.NoError(t, json.Unmarshal(b, &text))
				out[text] += pr
				return
			}
			n := max(0, len(h)-1) // the cells hold h but its last token; compute from there
			if len(h) == len(ids) {
				n = 0
			}
			require.NoError(t, d.Truncate(0, n))
			rows, err := d.Step([]decoding.BatchInput{{Tokens: h[n:]}})
			require.NoError(t, err)
			for x, px := range sample.NewSampler(params).Probs(rows[0], h, nil) {
				if px > 0 {
					walk(append(h[:len(h):len(h)], int32(x)), pr*px)
				}
			}
		}
		walk(ids, 1)
		return out
	}
	p, q := exact(modelPath), exact(other)
	tv := 0.0
	for k := range p {
		tv += math.Abs(p[k]-q[k]) / 2
	}
	for k := range q {
		if _, ok := p[k]; !ok {
			tv += q[k] / 2
		}
	}
	require.Greater(t, tv, 0.3, "the draft must differ from the target for the test to mean anything")

	const N = 8000
	counts := map[string]float64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < N; i += 4 {
				text := completionText(t, ts, fmt.Sprintf(`{"prompt":%q,"max_tokens":3,"temperature":1,"top_k":3,"top_p":1,"seed":%d}`, prompt, i+1))
				mu.Lock()
				counts[text]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	chi := func(p map[string]float64) (x float64, df int) {
		for k := range counts {
			if p[k] == 0 {
				return math.Inf(1), 0
			}
		}
		for k, pk := range p {
			e := N * pk
			x += (counts[k] - e) * (counts[k] - e) / e
			df++
		}
		return x, df - 1
	}
	x2p, dfp := chi(p)
	x2q, _ := chi(q)
	page := metricsText(t, ts)
	t.Logf("%d replies, %d outcomes: χ² %.1f against the target (%d degrees of freedom), %.1f against the draft; %d of %d proposals accepted",
		N, len(p), x2p, dfp, x2q, specCounter(t, page, "toy_draft_accepted_tokens_total"), specCounter(t, page, "toy_draft_proposed_tokens_total"))
	require.LessOrEqual(t, dfp, 26)
	// At most 26 degrees of freedom: P(χ² > 54.1) = 0.001.
	assert.Less(t, x2p, 54.1, "the replies follow the target's distribution")
	assert.Greater(t, x2q, 54.1, "and not the draft's")
	assert.Positive(t, specCounter(t, page, "toy_draft_proposed_tokens_total"))
}
