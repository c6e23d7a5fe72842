package serve

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/toyml/toy/engines/llama"
	"github.com/toyml/toy/engines/sample"
)

// Speculative decoding in the server (Config.Draft): before each step the draft model proposes
// up to γ tokens after every generating slot's last token, all slots' drafting batched in the
// draft's own BatchDecoder (one step per proposal, the slots' catching up on the tokens they
// have not read in the first); the step then carries each such slot's last token and its
// proposals as one input with a logit row per token, beside the other slots' single tokens and
// prompt chunks. The slot accepts a prefix of the proposals and one token of the target's by
// llama.SpecSampler's rule, the rule toy generate's llama.Speculative uses (greedy: the
// target's own choices, so the replies are the server's without a drafter; sampling: the
// target's distribution), and the target's cells of the rejected proposals are dropped. The
// draft's cells of a slot are kept as long as they are a prefix of the slot's tokens (a
// rejected proposal's are dropped at the next drafting, a new request keeps the prefix its
// prompt shares with the slot's last one). A slot whose drafting gave no accepted token backs
// off as llama.Speculative does (SpecSampler.Drafting).

// specSlot is a slot's speculative state.
type specSlot struct {
	rule    *llama.SpecSampler
	drafted bool    // this step verifies drafts (possibly none: the draft stopped at once)
	drafts  []int32 // this step's proposals
}

// modelDrafter drafts with a smaller model's BatchDecoder of the target's slots.
type modelDrafter struct {
	dec   *llama.BatchDecoder
	gamma int
	pMin  float64
	held  [][]int32 // per slot: the tokens whose keys and values its draft cells hold
}

// newModelDrafter checks cfg's draft against the target and makes its drafter.
func newModelDrafter(cfg Config) (*modelDrafter, error) {
	d := cfg.Draft
	if err := llama.CheckVocab(cfg.Model, d.Model()); err != nil {
		return nil, fmt.Errorf("serve: -draft: %w", err)
	}
	if d.Slots() != cfg.Decoder.Slots() || d.SlotContext() < cfg.Decoder.SlotContext() {
		return nil, fmt.Errorf("serve: the draft decoder has %d slots of %d positions: want the target's %d of at least %d", d.Slots(), d.SlotContext(), cfg.Decoder.Slots(), cfg.Decoder.SlotContext())
	}
	if d == cfg.Decoder {
		return nil, errors.New("serve: the draft and the target must be two decoders (two caches)")
	}
	gamma := cfg.DraftTokens
	if gamma == 0 {
		gamma = llama.DefaultDraftTokens
	}
	if gamma < 1 {
		return nil, fmt.Errorf("serve: %d draft tokens per step: want at least 1", gamma)
	}
	if err := llama.CheckMinProbability(cfg.DraftMinProbability); err != nil {
		return nil, fmt.Errorf("serve: minimum draft probability %v: %w", cfg.DraftMinProbability, err)
	}
	return &modelDrafter{dec: d, gamma: gamma, pMin: cfg.DraftMinProbability, held: make([][]int32, d.Slots())}, nil
}

// newSlot is the speculative state of a request sampled with s.
func (d *modelDrafter) newSlot(s *sample.Sampler) *specSlot {
	rule, err := llama.NewSpecSampler(s, d.pMin)
	if err != nil {
		panic(fmt.Sprintf("serve: %v", err)) // pMin was checked by newModelDrafter
	}
	return &specSlot{rule: rule}
}

// proposal is one slot's drafting in a step.
type proposal struct {
	slot    int
	spec    *specSlot
	g       int     // the most proposals
	hist    []int32 // the committed tokens
	pending []int32 // of them, those the draft has yet to read
	done    bool
}

// draft runs the drafter for the step about to be built: each generating slot that speculates
// gets its proposals (spec.drafts, spec.drafted), as many as the step's batch, the slot's
// context and the reply's max_tokens leave room for. A failed draft step is logged and
// leaves the slots without proposals this step.
func (s *Server) draft(slots []*slot) {
	if s.drafter == nil {
		return
	}
	gen := 0
	for _, sl := range slots {
		if sl != nil && sl.fed == len(sl.j.ids) {
			gen++
		}
	}
	if gen == 0 {
		return
	}
	per := (s.dec.MaxBatch() - gen) / gen // room in the step's batch per slot
	var props []*proposal
	for _, sl := range slots {
		if sl == nil || sl.spec == nil || sl.fed < len(sl.j.ids) {
			continue
		}
		sl.spec.drafted, sl.spec.drafts = false, sl.spec.drafts[:0]
		// The step commits at most g+1 tokens: all within max_tokens and the slot's context.
		g := min(s.drafter.gamma, per, sl.j.maxTokens-sl.generated-1, s.dec.SlotContext()-s.dec.Pos(sl.idx)-1)
		if g < 1 || !sl.spec.rule.Drafting() {
			continue
		}
		sl.spec.drafted = true
		props = append(props, &proposal{slot: sl.idx, spec: sl.spec, g: g, hist: sl.history})
	}
	if err := s.drafter.propose(props); err != nil {
		fmt.Fprintf(s.cfg.Log, "toy serve: drafting for %d slots: %v\n", len(props), err)
		for _, p := range props {
			p.spec.drafted, p.spec.drafts = false, p.spec.drafts[:0]
		}
		return
	}
	for _, p := range props {
		s.metrics.spec.proposed(p.slot, len(p.spec.drafts))
	}
}

// propose drafts for props, batched: the first step feeds each slot the committed tokens its
// draft cells lack (a new prompt in chunks of the draft's batch), each next step the last
// proposal of the slots still drafting.
func (d *modelDrafter) propose(props []*proposal) error {
	for _, p := range props {
		held := d.held[p.slot]
		n := min(llama.CommonPrefix(held, p.hist), len(p.hist)-1) // the last token gives logits
		if n < len(held) || d.dec.Pos(p.slot) != len(held) {
			if err := d.dec.Truncate(p.slot, min(n, d.dec.Pos(p.slot))); err != nil {
				return err
			}
			n = d.dec.Pos(p.slot)
			d.held[p.slot] = held[:n]
		}
		p.pending = p.hist[n:]
	}
	for {
		var in []llama.BatchInput
		var who []*proposal
		budget := d.dec.MaxBatch()
		for _, p := range props {
			if p.done {
				continue
			}
			toks := p.pending[:min(len(p.pending), budget)]
			if len(p.pending) == 0 {
				toks = p.spec.drafts[len(p.spec.drafts)-1:]
			}
			if len(toks) == 0 || len(toks) > budget {
				continue // next round
			}
			in = append(in, llama.BatchInput{Slot: p.slot, Tokens: toks})
			who = append(who, p)
			budget -= len(toks)
		}
		if len(in) == 0 {
			return nil
		}
		rows, err := d.dec.Step(in)
		if err != nil {
			for _, p := range props {
				d.dec.Release(p.slot) // what the failed step left is not known
				d.held[p.slot] = nil
			}
			return err
		}
		for i, p := range who {
			d.held[p.slot] = append(d.held[p.slot], in[i].Tokens...)
			if len(p.pending) > 0 {
				if p.pending = p.pending[len(in[i].Tokens):]; len(p.pending) > 0 {
					continue // catching up
				}
			}
			drafts := p.spec.drafts
			h := append(p.hist[:len(p.hist):len(p.hist)], drafts...) // a copy: the slot's history stays
			x, ok := p.spec.rule.Pick(len(drafts), rows[i], h)
			if !ok {
				p.done = true
				continue
			}
			p.spec.drafts = append(drafts, x)
			p.done = len(p.spec.drafts) == p.g
		}
	}
}

// verify takes slot sl's verification rows (after its last token and after each proposal):
// it accepts a prefix of the proposals and one token of the target's, drops the target's
// cells of the rejected proposals, and hands the tokens to next, stopping where the reply
// ends. n is the number of tokens taken.
func (s *Server) verify(sl *slot, rows [][]float32) (e event, done bool, n int) {
	sp := sl.spec
	drafts := sp.drafts
	n0 := len(sl.history)
	k, y, h := sp.rule.Accept(rows, sl.history, drafts)
	sl.history = h[:n0]
	sp.drafted = false
	sp.rule.Verified(true, k)
	s.metrics.spec.accepted(sl.idx, k)
	if err := s.dec.Truncate(sl.idx, s.dec.Pos(sl.idx)-(len(drafts)-k)); err != nil {
		return event{err: err}, true, 0
	}
	for _, tok := range append(drafts[:k:k], y) {
		n++
		if e, done = s.next(sl, tok); done {
			return e, true, n
		}
	}
	return event{}, false, n
}

// specMetrics count the drafter's proposals and the verifications' acceptances, per slot.
type specMetrics struct {
	proposals, acceptances []atomic.Int64
}

func newSpecMetrics(slots int) *specMetrics {
	return &specMetrics{proposals: make([]atomic.Int64, slots), acceptances: make([]atomic.Int64, slots)}
}

func (m *specMetrics) proposed(slot, n int) { m.proposals[slot].Add(int64(n)) }
func (m *specMetrics) accepted(slot, n int) { m.acceptances[slot].Add(int64(n)) }

// write adds the speculative counters to a /metrics page (nothing without a drafter).
func (m *specMetrics) write(b *strings.Builder, metric func(name, typ, help string)) {
	if m == nil {
		return
	}
	for _, c := range []struct {
		name, help string
		v          []atomic.Int64
	}{
		{"toy_draft_proposed_tokens", "Tokens the drafter proposed", m.proposals},
		{"toy_draft_accepted_tokens", "Proposed tokens the target accepted", m.acceptances},
	} {
		var total int64
		metric(c.name+"_total", "counter", c.help+", all slots.")
		for i := range c.v {
			total += c.v[i].Load()
		}
		fmt.Fprintf(b, "%s_total %d\n", c.name, total)
		metric("toy_slot_"+strings.TrimPrefix(c.name, "toy_")+"_total", "counter", c.help+", per slot.")
		for i := range c.v {
			fmt.Fprintf(b, "toy_slot_%s_total{slot=\"%d\"} %d\n", strings.TrimPrefix(c.name, "toy_"), i, c.v[i].Load())
		}
	}
}
