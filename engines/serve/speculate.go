package serve

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
)

// Speculative decoding in the server (Config.Draft): before each step the draft model proposes
// up to γ tokens after every generating slot's last token, all slots' drafting batched in the
// draft's own BatchDecoder (one step per proposal, the slots' catching up on the tokens they
// have not read in the first); the step then carries each such slot's last token and its
// proposals as one input with a logit row per token, beside the other slots' single tokens and
// prompt chunks. The slot accepts a prefix of the proposals and one token of the target's by
// speculative.SpecSampler's rule, the rule toy generate's speculative.Speculative uses (greedy: the
// target's own choices, so the replies are the server's without a drafter; sampling: the
// target's distribution), and the target's cells of the rejected proposals are dropped. The
// draft's cells of a slot are kept as long as they are a prefix of the slot's tokens (a
// rejected proposal's are dropped at the next drafting, a new request keeps the prefix its
// prompt shares with the slot's last one). A slot whose drafting gave no accepted token backs
// off as speculative.Speculative does (SpecSampler.Drafting).

// specSlot is a slot's speculative state.
type specSlot struct {
	rule    *speculative.SpecSampler
	drafted bool    // this step verifies drafts (possibly none: the draft stopped at once)
	drafts  []int32 // this step's proposals
}

// drafter proposes the tokens the slots' steps verify: a draft model (modelDrafter) or a
// DFlash drafter (dflashDrafter).
type drafter interface {
	// newSlot is the speculative state of a request sampled with s.
	newSlot(s *sample.Sampler) *specSlot
	// most is the most proposals a step.
	most() int
	// propose drafts for props (each spec.drafts).
	propose(props []*proposal) error
	// admitted says that slot starts a request with its first n positions' cells reused.
	admitted(slot, n int)
	// stepped follows a target step of in; accepted follows the verification of slot's
	// proposals of that step, of which k were accepted.
	stepped(in []decoding.BatchInput)
	accepted(slot, k int)
	// close frees what the drafter made.
	close()
}

// specParams are the drafting settings both drafters share.
type specParams struct {
	gamma int
	pMin  float64
}

// newSlot is the speculative state of a request sampled with s.
func (p specParams) newSlot(s *sample.Sampler) *specSlot {
	rule, err := speculative.NewSpecSampler(s, p.pMin)
	if err != nil {
		panic(fmt.Sprintf("serve: %v", err)) // pMin was checked by newDrafter
	}
	return &specSlot{rule: rule}
}

func (p specParams) most() int { return p.gamma }

// newDrafter checks cfg's drafter and makes it (nil: none).
func newDrafter(cfg Config) (drafter, error) {
	if cfg.Draft == nil && cfg.DFlash == nil {
		return nil, nil
	}
	if cfg.Draft != nil && cfg.DFlash != nil {
		return nil, errors.New("serve: a draft model or a DFlash drafter, not both")
	}
	p := specParams{gamma: cfg.DraftTokens, pMin: cfg.DraftMinProbability}
	if p.gamma < 0 {
		return nil, fmt.Errorf("serve: %d draft tokens per step: want at least 1", p.gamma)
	}
	if err := speculative.CheckMinProbability(p.pMin); err != nil {
		return nil, fmt.Errorf("serve: minimum draft probability %v: %w", p.pMin, err)
	}
	if cfg.DFlash != nil {
		return newDFlashDrafter(cfg, p)
	}
	if p.gamma == 0 {
		p.gamma = speculative.DefaultDraftTokens
	}
	return newModelDrafter(cfg, p)
}

// modelDrafter drafts with a smaller model's BatchDecoder of the target's slots.
type modelDrafter struct {
	specParams
	dec  *decoding.BatchDecoder
	held [][]int32 // per slot: the tokens whose keys and values its draft cells hold
}

func (d *modelDrafter) admitted(slot, n int)             {}
func (d *modelDrafter) stepped(in []decoding.BatchInput) {}
func (d *modelDrafter) accepted(slot, k int)             {}
func (d *modelDrafter) close()                           {}

// newModelDrafter checks cfg's draft against the target and makes its drafter.
func newModelDrafter(cfg Config, p specParams) (*modelDrafter, error) {
	d := cfg.Draft
	if err := speculative.CheckVocab(cfg.Model, d.Model()); err != nil {
		return nil, fmt.Errorf("serve: -draft: %w", err)
	}
	if d.Slots() != cfg.Decoder.Slots() || d.SlotContext() < cfg.Decoder.SlotContext() {
		return nil, fmt.Errorf("serve: the draft decoder has %d slots of %d positions: want the target's %d of at least %d", d.Slots(), d.SlotContext(), cfg.Decoder.Slots(), cfg.Decoder.SlotContext())
	}
	if d == cfg.Decoder {
		return nil, errors.New("serve: the draft and the target must be two decoders (two caches)")
	}
	return &modelDrafter{specParams: p, dec: d, held: make([][]int32, d.Slots())}, nil
}

// dflashDrafter drafts with a DFlash drafter, one state (speculative.DFlashSlot) and one block
// forward per slot, reading the hidden states the target's decoder captures: each step's rows
// of the tokens the target committed (a prompt chunk's, a generating slot's last token's, a
// verification's last token and accepted proposals') are kept in the slot's state. A request's
// reused prefix keeps the rows the slot's state holds for it (those of its last request, the
// same tokens at the same positions; a prefix copied from another slot leaves rows of other
// tokens in the drafter's context until they leave its window, which only costs acceptance).
type dflashDrafter struct {
	specParams
	dec   *decoding.BatchDecoder
	slots []*speculative.DFlashSlot
	held  [][][]float32 // per slot: a verification's rows until its acceptance
}

func newDFlashDrafter(cfg Config, p specParams) (*dflashDrafter, error) {
	df := cfg.DFlash
	if most := df.Cfg.Gamma - 1; p.gamma == 0 || p.gamma > most {
		p.gamma = most
	}
	if err := cfg.Decoder.SetCapture(df.Cfg.TargetLayers); err != nil {
		return nil, fmt.Errorf("serve: dflash: %w", err)
	}
	d := &dflashDrafter{specParams: p, dec: cfg.Decoder, held: make([][][]float32, cfg.Decoder.Slots())}
	for range cfg.Decoder.Slots() {
		sl, err := df.NewSlot(cfg.Decoder.SlotContext())
		if err != nil {
			d.close()
			return nil, fmt.Errorf("serve: dflash: %w", err)
		}
		d.slots = append(d.slots, sl)
	}
	return d, nil
}

func (d *dflashDrafter) admitted(slot, n int) { d.slots[slot].Restart(n) }

func (d *dflashDrafter) stepped(in []decoding.BatchInput) {
	rows := d.dec.Captured()
	for _, s := range in {
		r := rows[:len(s.Tokens)]
		rows = rows[len(s.Tokens):]
		if s.Logits > 1 { // a verification: the rows of the accepted tokens are kept
			d.held[s.Slot] = r
			continue
		}
		d.slots[s.Slot].Keep(r)
	}
}

func (d *dflashDrafter) accepted(slot, k int) {
	if r := d.held[slot]; r != nil {
		d.slots[slot].Keep(r[:k+1])
		d.held[slot] = nil
	}
}

func (d *dflashDrafter) propose(props []*proposal) error {
	for _, p := range props {
		drafts, err := d.slots[p.slot].Propose(p.spec.rule, p.hist, p.g)
		if err != nil {
			return err
		}
		p.spec.drafts = append(p.spec.drafts[:0], drafts...)
	}
	return nil
}

func (d *dflashDrafter) close() {
	for _, sl := range d.slots {
		sl.Close()
	}
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
		g := min(s.drafter.most(), per, sl.j.maxTokens-sl.generated-1, s.dec.SlotContext()-s.dec.Pos(sl.idx)-1)
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
		n := min(decoding.CommonPrefix(held, p.hist), len(p.hist)-1) // the last token gives logits
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
		var in []decoding.BatchInput
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
			in = append(in, decoding.BatchInput{Slot: p.slot, Tokens: toks})
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
	s.drafter.accepted(sl.idx, k)
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
