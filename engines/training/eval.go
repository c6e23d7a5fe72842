package training

import (
	"fmt"
	"math"

	"github.com/toyml/toy/engines/transformer"
	"github.com/toyml/toy/ggml"
)

// Evaluator computes the forward pass of a Model — logits and the cross-entropy loss — for B
// sequences of T tokens, without a backward pass. Its graph is built once and reused.
type Evaluator struct {
	m        *trainable
	T, B     int
	masked   bool
	state    *ggml.Context
	stateBuf *ggml.Buffer
	in       *batchInputs
	img      *transformer.ImageInputs // an image model's inputs (NewClassifierEvaluator); in is nil then
	gctx     *ggml.Context
	graph    *ggml.Graph
	alloc    *ggml.Allocator
	logits   *ggml.Tensor
	loss     *ggml.Tensor
	// Sep is the document separator of the block-causal mask (-1: plain causal).
	Sep int32
	// keepLogits: see newEvaluator.
	keepLogits bool
}

// NewEvaluator builds the forward graph of m for B sequences of T tokens.
func NewEvaluator(m Trainable, T, B int) (*Evaluator, error) {
	return newEvaluator(m, T, B, false, true)
}

// NewMaskedEvaluator is NewEvaluator for batches with a loss mask (LossMasked).
func NewMaskedEvaluator(m Trainable, T, B int) (*Evaluator, error) {
	return newEvaluator(m, T, B, true, true)
}

// NewLossEvaluator is an Evaluator of the loss only (masked: LossMasked's), as a training run
// evaluates held-out data: the loss of a frozen output projection (an adapter's base) is
// taken a chunk of rows at a time, without the batch's logits, their labels and their host
// buffer (3 × vocabulary × B·T floats); Greedy refuses it then.
func NewLossEvaluator(m Trainable, T, B int, masked bool) (*Evaluator, error) {
	return newEvaluator(m, T, B, masked, false)
}

// newEvaluator makes the evaluator; keepLogits keeps the logits of a frozen output projection,
// whose loss is otherwise taken a chunk at a time without them (see headLoss).
func newEvaluator(m Trainable, T, B int, masked, keepLogits bool) (*Evaluator, error) {
	t := m.trainable()
	if T < 1 || T > t.arch.Context || B < 1 {
		return nil, fmt.Errorf("evaluator of %d×%d tokens for a context of %d", B, T, t.arch.Context)
	}
	e := &Evaluator{m: t, T: T, B: B, masked: masked, keepLogits: keepLogits, Sep: -1}
	if err := e.build(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Evaluator) build() error {
	m := e.m
	var err error
	if e.state, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: inputTensors}); err != nil {
		return err
	}
	s := e.state
	if m.arch.Input == transformer.InputPatches {
		e.img = transformer.NewImageInputs(s, m.arch, e.B)
	} else {
		hiddenWidth := 0
		if m.headFrozen() && !e.keepLogits { // the loss a chunk at a time, without the batch's logits
			hiddenWidth = m.arch.DModel
		}
		e.in = newBatchInputs(s, e.T, e.B, m.arch.Vocab, e.masked, hiddenWidth, false)
	}
	if err := s.Err(); err != nil {
		return err
	}
	if e.stateBuf, err = m.backend.Alloc(s); err != nil {
		return err
	}
	if e.img != nil {
		err = e.img.SetConstants()
	} else {
		err = e.in.setPositions()
	}
	if err != nil {
		return err
	}
	size := m.graphSize()
	if e.gctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size}); err != nil {
		return err
	}
	var head []*ggml.Tensor // what the graph computes, in order (headLoss)
	if e.img != nil {
		e.logits = m.classify(e.gctx, e.img, nil).SetOutput()
		e.loss = e.gctx.CrossEntropyLoss(e.logits, e.img.Labels).SetOutput()
	} else if e.in.head != nil {
		hn := m.pass(e.gctx, e.in.pos, e.in.mask, e.T, e.B, nil, m.ownKernels()).Hidden(e.in.tokens)
		head, e.loss, _ = e.in.head.loss(e.gctx, m.w.Head(), nil, hn, m.ownKernels())
		e.loss = e.loss.SetOutput()
	} else {
		e.logits = m.forward(e.gctx, e.in.tokens, e.in.pos, e.in.mask, e.T, e.B, nil).SetOutput()
		e.loss = e.in.loss(e.gctx, e.logits).SetOutput()
	}
	if e.graph, err = e.gctx.NewGraph(size, false); err != nil {
		return err
	}
	for _, t := range head {
		if err := e.graph.Expand(t); err != nil {
			return err
		}
	}
	if err := e.graph.Expand(e.loss); err != nil {
		return err
	}
	if e.alloc, err = m.backend.NewAllocator(); err != nil {
		return err
	}
	if err := e.alloc.Alloc(e.graph); err != nil {
		return err
	}
	return nil
}

// Close frees the evaluator (not the model).
func (e *Evaluator) Close() error {
	e.alloc.Close()
	if e.gctx != nil {
		e.gctx.Close()
	}
	e.stateBuf.Close()
	if e.state != nil {
		e.state.Close()
	}
	return nil
}

// run computes the graph for B sequences of T+1 ids (targets are ids[1:]).
func (e *Evaluator) run(seqs [][]int32, keep [][]bool) error {
	if e.in == nil {
		return fmt.Errorf("evaluation: a token batch for an evaluator of an image model (use Classify)")
	}
	if err := e.in.upload(seqs, keep, e.Sep); err != nil {
		return err
	}
	return e.m.backend.Compute(e.graph)
}

// Loss is the mean next-token cross entropy of B sequences of T+1 ids.
func (e *Evaluator) Loss(seqs [][]int32) (float32, error) { return e.LossMasked(seqs, nil) }

// LossMasked is the mean next-token cross entropy over the positions keep keeps (see
// Trainer.StepMasked), for an evaluator made with NewMaskedEvaluator.
func (e *Evaluator) LossMasked(seqs [][]int32, keep [][]bool) (float32, error) {
	if err := e.run(seqs, keep); err != nil {
		return 0, err
	}
	l, err := e.loss.F32()
	if err != nil {
		return 0, err
	}
	return e.in.maskedLoss(l[0]), nil
}

// Greedy extends prompt by n tokens, each the most likely next token (the model attends to at
// most the last T tokens). stop, when ≥ 0, ends generation after that token.
func (e *Evaluator) Greedy(prompt []int32, n int, stop int32) ([]int32, error) {
	if e.B != 1 {
		return nil, fmt.Errorf("evaluation: Greedy needs an evaluator of batch 1")
	}
	if e.logits == nil {
		return nil, fmt.Errorf("evaluation: Greedy needs the logits, which the evaluator of a frozen output projection does not keep")
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("evaluation: Greedy needs a prompt of at least one token")
	}
	vocab := e.m.arch.Vocab
	out := append([]int32(nil), prompt...)
	for i := 0; i < n; i++ {
		window := out
		if len(window) > e.T {
			window = window[len(window)-e.T:]
		}
		seq := make([]int32, e.T+1) // padded on the right; causality keeps padding out of view
		copy(seq, window)
		if err := e.run([][]int32{seq}, nil); err != nil {
			return nil, err
		}
		logits, err := e.logits.F32()
		if err != nil {
			return nil, err
		}
		row := logits[(len(window)-1)*vocab : len(window)*vocab]
		best, bestV := 0, float32(math.Inf(-1))
		for id, v := range row {
			if v > bestV {
				best, bestV = id, v
			}
		}
		out = append(out, int32(best))
		if int32(best) == stop {
			break
		}
	}
	return out, nil
}
