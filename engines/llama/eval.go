package llama

import (
	"fmt"
	"math"

	"github.com/toyml/toy/ggml"
)

// Evaluator computes the forward pass of a Model — logits and the cross-entropy loss — for B
// sequences of T tokens, without a backward pass. Its graph is built once and reused.
type Evaluator struct {
	m         *Model
	T, B      int
	state     *ggml.Context
	stateBuf  *ggml.Buffer
	tokens    *ggml.Tensor
	pos       *ggml.Tensor
	mask      *ggml.Tensor
	labels    *ggml.Tensor
	gctx      *ggml.Context
	graph     *ggml.Graph
	alloc     *ggml.Allocator
	logits    *ggml.Tensor
	loss      *ggml.Tensor
	maskBuf   []float32
	labelsBuf []float32
	// Sep is the document separator of the block-causal mask (-1: plain causal).
	Sep int32
}

// NewEvaluator builds the forward graph of m for B sequences of T tokens.
func NewEvaluator(m *Model, T, B int) (*Evaluator, error) {
	if T < 1 || T > m.Cfg.Context || B < 1 {
		return nil, fmt.Errorf("llama: evaluator of %d×%d tokens for a context of %d", B, T, m.Cfg.Context)
	}
	e := &Evaluator{m: m, T: T, B: B, Sep: -1}
	if err := e.build(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

func (e *Evaluator) build() error {
	m, c := e.m, e.m.Cfg
	T, B, N := int64(e.T), int64(e.B), int64(e.T*e.B)
	var err error
	if e.state, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: 4}); err != nil {
		return err
	}
	s := e.state
	e.tokens = s.NewTensor(ggml.I32, N)
	e.pos = s.NewTensor(ggml.I32, T)
	e.mask = s.NewTensor(ggml.F32, T, T, 1, B)
	e.labels = s.NewTensor(ggml.F32, int64(c.Vocab), N)
	if err := s.Err(); err != nil {
		return err
	}
	if e.stateBuf, err = m.backend.Alloc(s); err != nil {
		return err
	}
	pos := make([]int32, T)
	for i := range pos {
		pos[i] = int32(i)
	}
	if err := e.pos.SetI32(pos); err != nil {
		return err
	}
	size := m.graphSize()
	if e.gctx, err = ggml.NewContext(ggml.ContextOptions{MaxTensors: size, Graphs: 1, GraphSize: size}); err != nil {
		return err
	}
	e.logits = m.Forward(e.gctx, e.tokens, e.pos, e.mask, e.T, e.B).SetOutput()
	e.loss = e.gctx.CrossEntropyLoss(e.logits, e.labels).SetOutput()
	if e.graph, err = e.gctx.NewGraph(size, false); err != nil {
		return err
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
	e.maskBuf = make([]float32, T*T*B)
	e.labelsBuf = make([]float32, int64(c.Vocab)*N)
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
func (e *Evaluator) run(seqs [][]int32) error {
	c := e.m.Cfg
	if len(seqs) != e.B {
		return fmt.Errorf("llama: %d sequences for a batch of %d", len(seqs), e.B)
	}
	ids := make([]int32, 0, e.T*e.B)
	clear(e.labelsBuf)
	for s, seq := range seqs {
		if len(seq) != e.T+1 {
			return fmt.Errorf("llama: sequence %d has %d ids, want %d (T+1)", s, len(seq), e.T+1)
		}
		for i, id := range seq {
			if id < 0 || int(id) >= c.Vocab {
				return fmt.Errorf("llama: sequence %d, position %d: id %d is outside the vocabulary (0..%d)", s, i, id, c.Vocab-1)
			}
		}
		ids = append(ids, seq[:e.T]...)
		for i := 0; i < e.T; i++ {
			e.labelsBuf[(s*e.T+i)*c.Vocab+int(seq[i+1])] = 1
		}
	}
	BlockCausalMask(e.maskBuf, ids, e.T, e.B, e.Sep)
	if err := e.tokens.SetI32(ids); err != nil {
		return err
	}
	if err := e.mask.SetF32(e.maskBuf); err != nil {
		return err
	}
	if err := e.labels.SetF32(e.labelsBuf); err != nil {
		return err
	}
	return e.m.backend.Compute(e.graph)
}

// Loss is the mean next-token cross entropy of B sequences of T+1 ids.
func (e *Evaluator) Loss(seqs [][]int32) (float32, error) {
	if err := e.run(seqs); err != nil {
		return 0, err
	}
	l, err := e.loss.F32()
	if err != nil {
		return 0, err
	}
	return l[0], nil
}

// Greedy extends prompt by n tokens, each the most likely next token (the model attends to at
// most the last T tokens). stop, when ≥ 0, ends generation after that token.
func (e *Evaluator) Greedy(prompt []int32, n int, stop int32) ([]int32, error) {
	if e.B != 1 {
		return nil, fmt.Errorf("llama: Greedy needs an evaluator of batch 1")
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("llama: Greedy needs a prompt of at least one token")
	}
	c := e.m.Cfg
	out := append([]int32(nil), prompt...)
	for i := 0; i < n; i++ {
		window := out
		if len(window) > e.T {
			window = window[len(window)-e.T:]
		}
		seq := make([]int32, e.T+1) // padded on the right; causality keeps padding out of view
		copy(seq, window)
		if err := e.run([][]int32{seq}); err != nil {
			return nil, err
		}
		logits, err := e.logits.F32()
		if err != nil {
			return nil, err
		}
		row := logits[(len(window)-1)*c.Vocab : len(window)*c.Vocab]
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
