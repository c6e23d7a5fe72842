package speculative

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/engines/sample"
)

// DefaultDraftTokens is the default γ of speculative decoding: the tokens the draft proposes
// per verification step. 5 makes a verification of 6 tokens, which ggml's CPU matrix product
// computes in one column tile (4×6 with AVX-512): on the trained 30M Go pair of
// docs/PERFORMANCE.md it cost less than a verification of 5 or 8 and gave the best speed-up.
const DefaultDraftTokens = 5

// DefaultMinProbability is the minimum draft probability (SetMinProbability) toy generate and
// toy bench model use with a draft model unless told otherwise: on the trained 30M Go pair of
// docs/PERFORMANCE.md minimums of 0.6 to 0.9 gave the best speed-ups over four prompts. A
// DFlash drafter's block probabilities run lower (there, no proposal reached 0.6), so it gets
// none.
const DefaultMinProbability = 0.75

// maxBackoff bounds the steps a Speculative decodes without drafting after steps that accepted
// nothing: 1 after the first such step, doubling with each next one up to this.
const maxBackoff = 8

// SpecStats are the counters and times of a Speculative decoder since its last Prompt.
type SpecStats struct {
	Steps     int // verification steps: target forwards over the last token plus the drafts
	Drafted   int // tokens the draft proposed
	Accepted  int // of them, those the target accepted
	Generated int // tokens committed: the accepted ones plus one of the target's per step
	Plain     int // of the steps, those that drafted nothing because earlier ones accepted nothing

	PromptTime   time.Duration // both decoders reading the prompt
	DraftTime    time.Duration // the draft's forwards and its sampling
	VerifyTime   time.Duration // the target's batched forwards
	AcceptTime   time.Duration // the target's distributions and the accept/reject decisions
	RollbackTime time.Duration // both caches' truncation
}

// MeanAccepted is the mean number of drafted tokens accepted per verification step.
func (s SpecStats) MeanAccepted() float64 {
	if s.Steps == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Steps)
}

// AcceptRate is the share of drafted tokens the target accepted.
func (s SpecStats) AcceptRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// Speculative generates with a target decoder and a drafter of the same vocabulary: a smaller
// draft decoder (draft-model speculative decoding, Leviathan et al. 2023; Chen et al. 2023;
// NewSpeculative), which proposes γ tokens one at a time, or a DFlash block drafter
// (NewDFlashSpeculative), which proposes them in one forward. Each Step the target runs the
// last committed token and the γ proposals in one batched forward, keeps the longest prefix it
// accepts plus one token of its own (the correction at the first rejection, or a bonus token
// when all are accepted), and the target's cache (and a draft decoder's) is truncated to the
// committed tokens. A step whose drafting gave no accepted token (every proposal rejected, or
// none made: SetMinProbability) makes the next step verify only the last token, without
// drafting; each further such step doubles that run, up to maxBackoff steps (SpecStats.Plain
// counts them). Text the drafter cannot predict then costs about what plain decoding does, and
// the drafter reads the skipped tokens in one batch when it drafts again.
//
// Greedy (temperature 0) the output is the target's argmax chain, token for token. Sampling
// uses the rejection rule that preserves the target's distribution exactly: a proposal x drawn
// from the draft's distribution q is accepted with probability min(1, p(x)/q(x)), p the
// target's; at the first rejection the target's token is drawn from norm(max(0, p−q)). Both p
// and q are the sampler's distributions (sample.Sampler.Probs: penalty, top-k, temperature,
// top-p, min-p), so the output follows the distribution that sampling the target alone with
// the same sampler would.
//
// Invariant between steps: the target's cache holds the committed tokens but the last one; the
// drafter keeps what it needs of them (modelDrafter, dflashDrafter).
type Speculative struct {
	target *decoding.Decoder
	drafter
	gamma int
	SpecSampler

	hist  []int32 // committed tokens: the prompt, then the generated ones
	stats SpecStats
}

// SpecSampler is the sampling side of speculative decoding, which Speculative and toy serve's
// per-slot speculation share: it draws a drafter's proposals from the drafter's logits (Pick)
// and accepts them against the target's by the rejection rule (Accept), keeping the
// distributions that rule compares.
type SpecSampler struct {
	s      *sample.Sampler
	greedy bool
	pMin   float64 // a proposal the drafter gives a lower probability ends the drafting

	p, q [][]float64 // scratch distributions: the target's per position, the draft's per proposal
	res  []float64

	// backoff is the length of the last run of steps without drafting, skip the steps of it
	// left: after a step whose drafting gave no accepted token, the next steps only verify
	// the last token, and the drafter catches up on them in one batch when drafting resumes.
	backoff, skip int
}

// Drafting says whether a step drafts: false for the steps of a backoff (Verified), each
// call counting one.
func (sp *SpecSampler) Drafting() bool {
	if sp.skip > 0 {
		sp.skip--
		return false
	}
	return true
}

// Verified records a step's outcome for the backoff: a step whose drafting gave no accepted
// token makes the next step verify only the last token, each further such step doubling that
// run up to maxBackoff steps; an accepted proposal ends the backoff.
func (sp *SpecSampler) Verified(drafted bool, k int) {
	switch {
	case drafted && k == 0:
		sp.backoff = min(max(1, 2*sp.backoff), maxBackoff)
		sp.skip = sp.backoff
	case k > 0:
		sp.backoff = 0
	}
}

// NewSpecSampler returns the proposal and acceptance rule of sampler s (Params.Temperature 0:
// greedy) with minimum draft probability pMin (SetMinProbability; 0: none).
func NewSpecSampler(s *sample.Sampler, pMin float64) (*SpecSampler, error) {
	if err := CheckMinProbability(pMin); err != nil {
		return nil, fmt.Errorf("speculative decoding: minimum draft probability %v: %w", pMin, err)
	}
	return &SpecSampler{s: s, greedy: s.Params().Temperature == 0, pMin: pMin}, nil
}

// drafter proposes the tokens a Speculative decoder verifies: a draft model (modelDrafter) or a
// DFlash block drafter (dflashDrafter).
type drafter interface {
	// start empties the drafter's state after the target read head, the prompt but its last
	// token (which may be empty).
	start(sp *Speculative, head []int32) error
	// room is the number of proposals the drafter has room for this step (at most γ).
	room(sp *Speculative) int
	// propose drafts g ≥ 1 tokens that follow sp.hist; when sampling, sp.q[i] gets the
	// distribution proposal i was drawn from.
	propose(sp *Speculative, g int) ([]int32, error)
	// commit follows a verification of g proposals of which the target accepted k, then
	// committed its own token y.
	commit(sp *Speculative, g, k int, y int32) error
}

// CheckVocab reports whether draft can draft for target: the same vocabulary size and, when
// both files carry them, the same tokenizer model and token list.
func CheckVocab(target, draft *decoding.GGUFModel) error {
	if target.Arch.Vocab != draft.Arch.Vocab {
		return fmt.Errorf("speculative decoding: the draft %s has a vocabulary of %d tokens, the target %s one of %d: they must share one", draft.Path(), draft.Arch.Vocab, target.Path(), target.Arch.Vocab)
	}
	for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens"} {
		tv, tok := target.Meta[k]
		dv, dok := draft.Meta[k]
		if tok && dok && !reflect.DeepEqual(tv, dv) {
			return fmt.Errorf("speculative decoding: the draft %s and the target %s have different tokenizers (%s differs): they must share one vocabulary", draft.Path(), target.Path(), k)
		}
	}
	return nil
}

// NewSpeculative returns a speculative decoder of target with draft proposing gamma tokens per
// step (0: DefaultDraftTokens), sampling with s (Params.Temperature 0: greedy). The vocabularies
// must match (CheckVocab). The decoders are used, not owned: the caller closes them.
func NewSpeculative(target, draft *decoding.Decoder, gamma int, s *sample.Sampler) (*Speculative, error) {
	if err := CheckVocab(target.Model(), draft.Model()); err != nil {
		return nil, err
	}
	if gamma == 0 {
		gamma = DefaultDraftTokens
	}
	if gamma < 1 {
		return nil, fmt.Errorf("speculative decoding: %d draft tokens per step: want at least 1", gamma)
	}
	if target == draft {
		return nil, fmt.Errorf("speculative decoding: the draft and the target must be two decoders (two caches)")
	}
	return newSpeculative(target, &modelDrafter{dec: draft}, gamma, s), nil
}

func newSpeculative(target *decoding.Decoder, d drafter, gamma int, s *sample.Sampler) *Speculative {
	return &Speculative{target: target, drafter: d, gamma: gamma, SpecSampler: SpecSampler{s: s, greedy: s.Params().Temperature == 0}}
}

// SetMinProbability makes the drafter stop proposing, each step, at the first token it gives a
// probability below p (greedy: the softmax of its logits at the proposal; sampling: q(x)), as
// llama.cpp's --draft-p-min does: a step then verifies fewer and likelier proposals, and text
// the drafter cannot predict costs little more than plain decoding. 0, the default, always
// proposes γ. The output does not change (greedy: the target's; sampling: its distribution,
// since the rule reads only the drafter's own distribution and draws, and a proposal is
// verified against the distribution it was drawn from given that it was made: the drafter's,
// restricted to the tokens of probability ≥ p).
func (sp *Speculative) SetMinProbability(p float64) error {
	if err := CheckMinProbability(p); err != nil {
		return fmt.Errorf("speculative decoding: minimum draft probability %v: %w", p, err)
	}
	sp.pMin = p
	return nil
}

// CheckMinProbability reports whether p is a minimum draft probability SetMinProbability
// takes: 0 (off) up to, not including, 1.
func CheckMinProbability(p float64) error {
	if !(p >= 0 && p < 1) {
		return errors.New("want 0 (off) up to, not including, 1")
	}
	return nil
}

// Stats returns the counters and times since the last Prompt.
func (sp *Speculative) Stats() SpecStats { return sp.stats }

// Gamma is the number of tokens the draft proposes per step.
func (sp *Speculative) Gamma() int { return sp.gamma }

// History is the committed tokens: the prompt and those generated.
func (sp *Speculative) History() []int32 { return append([]int32(nil), sp.hist...) }

// Prompt empties the caches and reads the prompt (at least one token) into them, all of it
// but the last token, which the first Step's verification reads.
func (sp *Speculative) Prompt(tokens []int32) error {
	if len(tokens) == 0 {
		return fmt.Errorf("speculative decoding: an empty prompt")
	}
	sp.stats = SpecStats{}
	sp.backoff, sp.skip = 0, 0
	sp.target.Reset()
	sp.hist = append(sp.hist[:0], tokens...)
	head := tokens[:len(tokens)-1]
	t0 := time.Now()
	if len(head) > 0 {
		if _, err := sp.target.Prompt(head); err != nil {
			return err
		}
	}
	if err := sp.start(sp, head); err != nil {
		return err
	}
	sp.stats.PromptTime += time.Since(t0)
	return nil
}

// room is the number of proposals there is room for this step (-1: the target cannot even
// read the last token). Under ContextShift the decoders shift themselves; the proposals are
// kept within half a context so that a shift cannot drop a rejected one's predecessor.
func (sp *Speculative) room() int {
	free, need := sp.target.MaxContext()-sp.target.Pos(), 1 // the target reads the last token and the proposals
	if sp.target.Options().ContextFull == decoding.ContextShift {
		free = sp.target.MaxContext() / 2
	}
	return min(sp.gamma, free-need, sp.drafter.room(sp))
}

// Pick draws proposal i of a step from the drafter's logits, which follow the history h:
// greedy, the sampler's choice; sampling, a draw from its distribution, kept for Accept. ok is
// false when the drafter gives the token a probability below the minimum (SetMinProbability):
// the drafting stops there, without it.
func (sp *SpecSampler) Pick(i int, logits []float32, h []int32) (x int32, ok bool) {
	for len(sp.q) <= i {
		sp.q = append(sp.q, nil)
	}
	if sp.greedy {
		x = sp.s.Sample(logits, h)
		if sp.pMin == 0 {
			return x, true
		}
		nll, err := decoding.NLLOf(logits, x) // the drafter's softmax at x is exp(−nll)
		return x, err == nil && math.Exp(-nll) >= sp.pMin
	}
	q := sp.s.Probs(logits, h, sp.q[i])
	sp.q[i] = q
	x = sp.s.Draw(q)
	if sp.pMin == 0 {
		return x, true
	}
	if q[x] < sp.pMin {
		return x, false
	}
	// A proposal is made only when the draw lands on a token of probability ≥ pMin, so given
	// that it is made, it follows q restricted to those tokens, renormalised: the acceptance
	// rule must compare the target's distribution with that one to keep it exact.
	z := 0.0
	for j, v := range q {
		if v < sp.pMin {
			q[j] = 0
		}
		z += q[j]
	}
	for j := range q {
		q[j] /= z
	}
	return x, true
}

// Step runs one draft-and-verify step and returns the tokens it commits: between 1 and γ+1,
// and at most limit (limit ≥ 1; fewer proposals are drafted when limit is small). The slice is
// the caller's. A full context under ContextError is ErrContextFull (wrapped), as the Decoder
// reports it.
func (sp *Speculative) Step(limit int) ([]int32, error) {
	if len(sp.hist) == 0 {
		return nil, fmt.Errorf("speculative decoding: Step before Prompt")
	}
	if limit < 1 {
		return nil, fmt.Errorf("speculative decoding: a step of at most %d tokens", limit)
	}
	g := min(limit-1, sp.room())
	if g < 0 {
		return nil, fmt.Errorf("speculative decoding: %d positions used: the last token does not fit a context of %d: %w", sp.target.Pos(), sp.target.MaxContext(), decoding.ErrContextFull)
	}
	last := sp.hist[len(sp.hist)-1]
	n0 := len(sp.hist)

	t0 := time.Now()
	for len(sp.q) < sp.gamma {
		sp.q = append(sp.q, nil)
	}
	var drafts []int32
	drafted := g > 0 && sp.Drafting()
	if drafted {
		var err error
		if drafts, err = sp.propose(sp, g); err != nil {
			return nil, err
		}
	} else if g > 0 {
		sp.stats.Plain++
	}
	g = len(drafts) // fewer when the drafter stopped at an unlikely proposal, or skipped
	t1 := time.Now()
	sp.stats.DraftTime += t1.Sub(t0)

	// Verify: the last committed token and the proposals in one forward.
	var rows [][]float32
	if g == 0 {
		// Nothing to verify: a plain decoding step, through Next's graph and buffer.
		logits, err := sp.target.Next(last)
		if err != nil {
			return nil, err
		}
		rows = [][]float32{logits}
	} else {
		var err error
		if rows, err = sp.target.Append(append([]int32{last}, drafts...)); err != nil {
			return nil, err
		}
	}
	t2 := time.Now()
	sp.stats.VerifyTime += t2.Sub(t1)

	// Accept the longest prefix, then one token of the target's.
	var k int
	var y int32
	k, y, sp.hist = sp.Accept(rows, sp.hist[:n0], drafts)
	out := append(append([]int32(nil), drafts[:k]...), y)
	sp.hist = append(sp.hist[:n0], out...)
	t3 := time.Now()
	sp.stats.AcceptTime += t3.Sub(t2)

	// Roll back: the target keeps the committed tokens but y; the drafter follows.
	if err := sp.target.Truncate(sp.target.Pos() - (g - k)); err != nil {
		return nil, err
	}
	if err := sp.commit(sp, g, k, y); err != nil {
		return nil, err
	}
	sp.stats.RollbackTime += time.Since(t3)
	sp.Verified(drafted, k)
	sp.stats.Steps++
	sp.stats.Drafted += g
	sp.stats.Accepted += k
	sp.stats.Generated += len(out)
	return out, nil
}

// modelDrafter drafts with a smaller model of the target's vocabulary, one token per forward.
// Between steps its cache holds the committed tokens but pending, those it has not yet read
// (the last committed one among them).
type modelDrafter struct {
	dec     *decoding.Decoder
	pending []int32
	read    int // proposals of this step the draft has read
}

func (m *modelDrafter) start(sp *Speculative, head []int32) error {
	m.dec.Reset()
	if len(head) > 0 {
		if _, err := m.dec.Prompt(head); err != nil {
			return err
		}
	}
	m.pending = append(m.pending[:0], sp.hist[len(sp.hist)-1])
	return nil
}

// room: the draft reads the pending tokens and all proposals but one.
func (m *modelDrafter) room(sp *Speculative) int {
	d := m.dec
	if d.Options().ContextFull == decoding.ContextShift {
		return d.MaxContext()/2 - 1
	}
	return d.MaxContext() - d.Pos() - (len(m.pending) - 1)
}

// propose reads the pending tokens, then each proposal but the last, one forward each (all of
// them when it stops at an unlikely one, whose logits needed the last).
func (m *modelDrafter) propose(sp *Speculative, g int) ([]int32, error) {
	n0 := len(sp.hist)
	drafts := make([]int32, 0, g+1)
	logits, err := m.dec.Prompt(m.pending)
	if err != nil {
		return nil, err
	}
	m.pending = m.pending[:0]
	for i := 0; i < g; i++ {
		if i > 0 {
			if logits, err = m.dec.Next(drafts[i-1]); err != nil {
				return nil, err
			}
		}
		m.read = i
		h := append(sp.hist[:n0], drafts...) // the history the proposal follows
		sp.hist = h[:n0]
		x, ok := sp.Pick(i, logits, h)
		if !ok {
			break
		}
		drafts = append(drafts, x)
	}
	return drafts, nil
}

// commit keeps the k accepted proposals the draft read and queues the rest of the committed
// tokens (accepted proposals it did not read, and y) for its next step.
func (m *modelDrafter) commit(sp *Speculative, g, k int, y int32) error {
	read := m.read
	m.read = 0
	if read > k {
		if err := m.dec.Truncate(m.dec.Pos() - (read - k)); err != nil {
			return err
		}
		read = k
	}
	m.pending = append(m.pending, sp.hist[len(sp.hist)-1-(k-read):]...) // proposals read..k−1, and y
	return nil
}

// Accept decides a verification of the proposals drafts, drawn by Pick after the committed
// tokens hist: rows[i] are the target's logits after hist and drafts[:i] (len(drafts)+1 rows).
// It keeps the longest prefix of drafts the target accepts (k of them: greedy, those equal to
// the target's choices; sampling, each x with probability min(1, p(x)/q(x))) and draws the
// target's own token y after them (the correction from norm(max(0, p−q)) at a rejection, or a
// bonus token when all are accepted). It returns hist with the k accepted proposals appended
// (in hist's array), y not among them.
func (sp *SpecSampler) Accept(rows [][]float32, hist, drafts []int32) (k int, y int32, out []int32) {
	n0, g := len(hist), len(drafts)
	y = -1
	for ; k <= g; k++ {
		hist = append(hist[:n0], drafts[:k]...)
		if sp.greedy {
			t := sp.s.Sample(rows[k], hist)
			if k < g && t == drafts[k] {
				continue
			}
			y = t
			break
		}
		for len(sp.p) <= k {
			sp.p = append(sp.p, nil)
		}
		p := sp.s.Probs(rows[k], hist, sp.p[k])
		sp.p[k] = p
		if k == g {
			y = sp.s.Draw(p) // all accepted: the bonus token
			break
		}
		x := drafts[k]
		if qx := sp.q[k][x]; (qx > 0 && sp.s.Uniform() < p[x]/qx) || (qx == 0 && p[x] > 0) {
			continue
		}
		// Rejected: draw from the residual norm(max(0, p−q)).
		q := sp.q[k]
		if cap(sp.res) < len(p) {
			sp.res = make([]float64, len(p))
		}
		res := sp.res[:len(p)]
		for i := range p {
			res[i] = math.Max(0, p[i]-q[i])
		}
		if y = sp.s.Draw(res); y < 0 {
			y = sp.s.Draw(p) // p = q up to rounding: the residual is empty
		}
		break
	}
	return k, y, hist
}
