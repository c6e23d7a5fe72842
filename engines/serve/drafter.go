package serve

import (
	"errors"
	"fmt"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/engines/speculative"
)

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
