package llama

import (
	"fmt"
	"slices"

	"github.com/toyml/toy/engines/sample"
)

// NewDFlashSpeculative returns a speculative decoder of target whose proposals come from the
// DFlash drafter df: each step fills one block (the last committed token and Gamma−1 masked
// positions) in one forward of the drafter, which reads the target's hidden states of the
// context (the target decoder is set to capture them), and the target verifies the Gamma−1
// proposals as with a draft model. df must have been made for target's model. The decoder and
// the drafter are used, not owned.
func NewDFlashSpeculative(target *Decoder, df *DFlash, s *sample.Sampler) (*Speculative, error) {
	if df.target != target.m {
		return nil, fmt.Errorf("llama: dflash: the drafter was made for %s, not %s", df.target.path, target.m.path)
	}
	if err := target.SetCapture(df.Cfg.TargetLayers); err != nil {
		return nil, err
	}
	return newSpeculative(target, &dflashDrafter{df: df, graphs: map[int]*dflashGraph{}}, df.Cfg.Gamma-1, s), nil
}

// dflashDrafter drafts with a DFlash block drafter. It keeps the context rows (the target's
// captured hidden states) of the committed tokens the target has read: all of them, or the
// last Window.
type dflashDrafter struct {
	df     *DFlash
	ctx    [][]float32
	graphs map[int]*dflashGraph // by context rows read
	logits []float32
}

// contextBucket rounds the context rows a drafter graph reads (without a window), so that a
// graph serves that many steps.
const contextBucket = 64

func (d *dflashDrafter) start(sp *Speculative, head []int32) error {
	d.ctx = d.ctx[:0]
	if len(head) > 0 {
		d.keep(sp.target.Captured())
	}
	return nil
}

// keep appends copies of rows to the context, dropping what falls out of the window.
func (d *dflashDrafter) keep(rows [][]float32) {
	for _, r := range rows {
		d.ctx = append(d.ctx, slices.Clone(r))
	}
	if w := d.df.Cfg.Window; w > 0 && len(d.ctx) > w {
		d.ctx = append(d.ctx[:0], d.ctx[len(d.ctx)-w:]...)
	}
}

func (d *dflashDrafter) room(sp *Speculative) int { return d.df.Cfg.Gamma - 1 }

func (d *dflashDrafter) propose(sp *Speculative, g int) ([]int32, error) {
	df := d.df
	W := df.Cfg.Window
	if W == 0 {
		W = max(1, (len(d.ctx)+contextBucket-1)/contextBucket*contextBucket)
	}
	gr, ok := d.graphs[W]
	if !ok {
		var err error
		if gr, err = df.buildInference(1, W); err != nil {
			return nil, err
		}
		d.graphs[W] = gr
	}
	n0 := len(sp.hist)
	blk := dflashBlock{Anchor: sp.hist[n0-1], Pos: n0 - 1, Ctx: d.ctx}
	if err := gr.in.set(df, []dflashBlock{blk}); err != nil {
		return nil, err
	}
	if err := df.target.backend.Compute(gr.graph); err != nil {
		return nil, err
	}
	V := df.target.Arch.Vocab
	if d.logits == nil {
		d.logits = make([]float32, V*df.Cfg.Gamma)
	}
	if err := gr.logits.ReadF32Into(d.logits); err != nil {
		return nil, err
	}
	drafts := make([]int32, 0, g)
	for i := range g {
		h := append(sp.hist[:n0], drafts...) // the history the proposal follows
		sp.hist = h[:n0]
		drafts = append(drafts, sp.pick(i, d.logits[(i+1)*V:(i+2)*V], h))
	}
	return drafts, nil
}

// commit keeps the rows of the verified tokens the target accepted: the last committed token
// and the k accepted proposals.
func (d *dflashDrafter) commit(sp *Speculative, g, k int, y int32) error {
	rows := sp.target.Captured()
	if len(rows) != g+1 {
		return fmt.Errorf("llama: dflash: the verification captured %d rows, want %d", len(rows), g+1)
	}
	d.keep(rows[:k+1])
	return nil
}

// close frees the drafter's graphs.
func (d *dflashDrafter) close() {
	for k, g := range d.graphs {
		g.close()
		delete(d.graphs, k)
	}
}

// Close frees what the speculative decoder built for its drafter (a DFlash drafter's graphs);
// the decoders and the drafter's weights are the caller's.
func (sp *Speculative) Close() error {
	if d, ok := sp.drafter.(*dflashDrafter); ok {
		d.close()
	}
	return nil
}
