package serve

import "fmt"

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
