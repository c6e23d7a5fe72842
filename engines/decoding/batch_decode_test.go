package decoding

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// batchSeq is one sequence of TestBatchDecoderMatchesDecoder: a prompt, the step at which it
// joins, and what it produced.
type batchSeq struct {
	prompt []int32
	join   int
	fed    int         // prompt tokens fed so far
	out    []int32     // greedy tokens
	logits [][]float32 // the logits each sampled token was drawn from
}

// TestBatchDecoderMatchesDecoder runs sequences of different lengths through one
// BatchDecoder — joining at different steps, prompts in chunks beside other sequences'
// single-token steps, leaving when done, a slot reused — and checks that each one's greedy
// tokens equal those of the sequence run alone with a Decoder, and its logits agree within
// 1e-4 of their scale (measured: ~5e-7 for llama shapes, 2e-5 for gemma2's soft-capped,
// √d-scaled activations). They are not bit-identical: a batched step attends over more
// (masked) cache cells and multiplies the weights by several columns at once, so float32 dot
// products sum the same terms in another order (the masked cells add exact zeros).
func TestBatchDecoderMatchesDecoder(t *testing.T) {
	for _, variant := range []string{"smollm2", "mistral", "gemma2", "qwen3moe", "gpt2"} {
		for _, flash := range []bool{false, true} {
			a := transformertest.TinyArch(variant)
			path := transformertest.WriteTiny(t, a, ggml.F32, 7)
			m := openTiny(t, path, ModelOptions{})
			opts := DecoderOptions{KVType: KVF32, FlashAttention: flash}
			dec := newDecoder(t, m, opts, 16)
			bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 3, KVType: KVF32, FlashAttention: flash, Batch: 12})
			if unsupportedHere(t, err) {
				continue
			}
			require.NoError(t, err)
			bd.bucket = 16
			t.Cleanup(func() { bd.Close() })

			rng := rand.New(rand.NewPCG(3, uint64(len(variant))))
			const gen = 9
			var seqs []*batchSeq
			for i, n := range []int{7, 1, 13, 4, 20} {
				seqs = append(seqs, &batchSeq{prompt: transformertest.RandomTokens(rng, n, a.Vocab), join: i * 2})
			}
			// Batched: up to 3 at once; a free slot takes the next sequence that has joined.
			slotOf := map[*batchSeq]int{}
			free := []int{0, 1, 2}
			next := 0
			done := 0
			for step := 0; done < len(seqs); step++ {
				require.Less(t, step, 200)
				for next < len(seqs) && seqs[next].join <= step && len(free) > 0 {
					slotOf[seqs[next]], free = free[0], free[1:]
					bd.Release(slotOf[seqs[next]])
					next++
				}
				var in []BatchInput
				var who []*batchSeq
				budget := bd.MaxBatch()
				for s := range slotOf {
					if s.fed == len(s.prompt) {
						in = append(in, BatchInput{Slot: slotOf[s], Tokens: []int32{s.out[len(s.out)-1]}})
						who = append(who, s)
						budget--
					}
				}
				for s := range slotOf {
					if s.fed < len(s.prompt) && budget > 0 {
						c := min(len(s.prompt)-s.fed, 5, budget)
						in = append(in, BatchInput{Slot: slotOf[s], Tokens: s.prompt[s.fed : s.fed+c]})
						who = append(who, s)
						s.fed += c
						budget -= c
					}
				}
				if len(in) == 0 {
					continue
				}
				rows, err := bd.Step(in)
				require.NoError(t, err)
				for i, s := range who {
					if s.fed < len(s.prompt) {
						continue // mid-prompt: its logits are not read
					}
					s.logits = append(s.logits, append([]float32(nil), rows[i]...))
					s.out = append(s.out, transformertest.Argmax32(rows[i]))
					if len(s.out) == gen {
						free = append(free, slotOf[s])
						delete(slotOf, s)
						done++
					}
				}
			}
			// Alone.
			worst := 0.0
			for i, s := range seqs {
				dec.Reset()
				lg, err := dec.Prompt(s.prompt)
				require.NoError(t, err)
				var toks []int32
				for j := 0; j < gen; j++ {
					worst = math.Max(worst, maxRelDiff(s.logits[j], lg))
					toks = append(toks, transformertest.Argmax32(lg))
					if j+1 < gen {
						lg, err = dec.Next(toks[j])
						require.NoError(t, err)
					}
				}
				require.Equal(t, toks, s.out, "%s flash=%v: sequence %d", variant, flash, i)
			}
			t.Logf("%s flash=%v: largest logit difference %.2g of their scale", variant, flash, worst)
			require.Less(t, worst, 1e-4, "%s flash=%v", variant, flash)
		}
	}
}

// TestBatchDecoderRegions steps layouts the scheduler's random order may miss: slots 0 and 2
// generating while slot 1 is empty (a padding query row between them) and slots 3 and 4 feed
// prompt chunks of different lengths beside them, then slot 1 joins with a chunk while the
// others generate; then chunks of one length in slots 1, 3 and 4 (one group of three
// sequences with slot 2 a padding sequence between them) beside two generating slots, and
// chunks of one length in slots 0 and 4 (too far apart for one group). Every sequence's logits
// must match a Decoder's for the same tokens.
func TestBatchDecoderRegions(t *testing.T) {
	for _, flash := range []bool{false, true} {
		a := transformertest.TinyArch("mistral") // sliding-window layers: both masks
		m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 5), ModelOptions{})
		dec := newDecoder(t, m, DecoderOptions{KVType: KVF32, FlashAttention: flash}, 16)
		bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 5, SlotContext: 40, KVType: KVF32, FlashAttention: flash, Batch: 32})
		require.NoError(t, err)
		bd.bucket = 8
		t.Cleanup(func() { bd.Close() })
		rng := rand.New(rand.NewPCG(9, 1))
		fed := map[int][]int32{} // each slot's tokens so far
		step := func(in []BatchInput) {
			rows, err := bd.Step(in)
			require.NoError(t, err)
			for i, s := range in {
				fed[s.Slot] = append(fed[s.Slot], s.Tokens...)
				dec.Reset()
				want, err := dec.Prompt(fed[s.Slot])
				require.NoError(t, err)
				require.Less(t, maxRelDiff(rows[i], want), 1e-4, "flash=%v slot %d after %d tokens", flash, s.Slot, len(fed[s.Slot]))
			}
		}
		step([]BatchInput{{Slot: 0, Tokens: transformertest.RandomTokens(rng, 6, a.Vocab)}, {Slot: 2, Tokens: transformertest.RandomTokens(rng, 3, a.Vocab)}})
		for i := 0; i < 3; i++ {
			step([]BatchInput{
				{Slot: 2, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
				{Slot: 3, Tokens: transformertest.RandomTokens(rng, 5+i, a.Vocab)},
				{Slot: 0, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
				{Slot: 4, Tokens: transformertest.RandomTokens(rng, 2, a.Vocab)},
			})
		}
		step([]BatchInput{
			{Slot: 4, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
			{Slot: 1, Tokens: transformertest.RandomTokens(rng, 9, a.Vocab)},
			{Slot: 0, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
			{Slot: 3, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
			{Slot: 2, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
		})
		// Slot 0 keeps 4 of its positions and goes on otherwise, as a server reusing the
		// prefix a new prompt shares with the slot's last sequence does: the cells past them
		// hold the old sequence's keys until the new tokens overwrite them.
		require.NoError(t, bd.Truncate(0, 4))
		fed[0] = fed[0][:4]
		step([]BatchInput{{Slot: 0, Tokens: transformertest.RandomTokens(rng, 3, a.Vocab)}, {Slot: 2, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)}})
		step([]BatchInput{{Slot: 2, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)}, {Slot: 0, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)}})
		// A burst of requests: chunks of one length in slots 1, 3 and 4 attend as one group.
		burst := []BatchInput{
			{Slot: 3, Tokens: transformertest.RandomTokens(rng, 2, a.Vocab)},
			{Slot: 0, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
			{Slot: 1, Tokens: transformertest.RandomTokens(rng, 2, a.Vocab)},
			{Slot: 4, Tokens: transformertest.RandomTokens(rng, 2, a.Vocab)},
			{Slot: 2, Tokens: transformertest.RandomTokens(rng, 1, a.Vocab)},
		}
		groups, _, _ := bd.layout(burst)
		require.Equal(t, []attnGroup{{T: 1, S: 3, first: 0, stride: 40}, {T: 2, S: 4, first: 40, stride: 40}}, groups)
		step(burst)
		apart := []BatchInput{{Slot: 4, Tokens: transformertest.RandomTokens(rng, 3, a.Vocab)}, {Slot: 0, Tokens: transformertest.RandomTokens(rng, 3, a.Vocab)}}
		groups, _, _ = bd.layout(apart)
		require.Len(t, groups, 2, "chunks in slots 0 and 4: a group each")
		step(apart)
	}
}

// TestBatchDecoderCopyPrefix copies a prefix of one slot's sequence into another slot, for
// every cache layout (values transposed or not, f32, f16 and q8_0 cells): the copied cells equal
// the source's byte for byte, every other cell is left as it was, and the slot then goes on
// with the logits a lone decoder gives the whole sequence.
func TestBatchDecoderCopyPrefix(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 3), ModelOptions{})
	for _, c := range []struct {
		kv    KVCacheType
		flash bool
		tol   float64
	}{{KVF32, false, 1e-4}, {KVF16, false, 2e-2}, {KVF16, true, 2e-2}, {KVQ8_0, true, 5e-2}} {
		name := fmt.Sprintf("%s flash=%v", c.kv, c.flash)
		dec := newDecoder(t, m, DecoderOptions{KVType: c.kv, FlashAttention: c.flash}, 16)
		bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 3, SlotContext: 32, KVType: c.kv, FlashAttention: c.flash, Batch: 32})
		require.NoError(t, err)
		t.Cleanup(func() { bd.Close() })
		rng := rand.New(rand.NewPCG(4, uint64(c.kv)))
		src := transformertest.RandomTokens(rng, 20, a.Vocab)
		_, err = bd.Step([]BatchInput{{Slot: 0, Tokens: src}, {Slot: 2, Tokens: transformertest.RandomTokens(rng, 9, a.Vocab)}})
		require.NoError(t, err)
		_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: transformertest.RandomTokens(rng, 30, a.Vocab)}})
		require.NoError(t, err)
		before := cacheBytes(t, bd)
		const n = 13
		require.NoError(t, bd.CopyPrefix(1, 0, n), name)
		require.Equal(t, n, bd.Pos(1))
		after := cacheBytes(t, bd)
		for i := range before {
			cells := cellsOf(bd, i)
			for cell, bytes := range cells {
				slot, p := cell/bd.slotCtx, cell%bd.slotCtx
				want := bytes(before[i], cell)
				if slot == 1 && p < n {
					want = bytes(before[i], p) // slot 0's cell at the same position
				}
				require.Equal(t, want, bytes(after[i], cell), "%s: tensor %d, slot %d position %d", name, i, slot, p)
			}
		}
		rest := transformertest.RandomTokens(rng, 4, a.Vocab)
		rows, err := bd.Step([]BatchInput{{Slot: 1, Tokens: rest}, {Slot: 0, Tokens: rest[:1]}})
		require.NoError(t, err)
		dec.Reset()
		want, err := dec.Prompt(append(append([]int32(nil), src[:n]...), rest...))
		require.NoError(t, err)
		require.Less(t, maxRelDiff(rows[0], want), c.tol, name)
		dec.Reset()
		want, err = dec.Prompt(append(append([]int32(nil), src...), rest[0]))
		require.NoError(t, err)
		require.Less(t, maxRelDiff(rows[1], want), c.tol, "%s: the source slot goes on as before", name)
	}
	bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 2, SlotContext: 8})
	require.NoError(t, err)
	defer bd.Close()
	_, err = bd.Step([]BatchInput{{Slot: 0, Tokens: []int32{1, 2, 3}}})
	require.NoError(t, err)
	require.Error(t, bd.CopyPrefix(1, 0, 4), "more positions than the source has")
	require.Error(t, bd.CopyPrefix(2, 0, 1), "no slot 2")
	require.Error(t, bd.CopyPrefix(1, -1, 1))
	require.NoError(t, bd.CopyPrefix(1, 0, 0))
	require.Equal(t, 0, bd.Pos(1))
}

// cacheBytes reads every key and value cache tensor of bd.
func cacheBytes(t *testing.T, bd *BatchDecoder) [][]byte {
	var out [][]byte
	for i := range bd.kCache {
		for _, c := range []*ggml.Tensor{bd.kCache[i], bd.vCache[i]} {
			b, err := c.ReadBytes()
			require.NoError(t, err)
			out = append(out, b)
		}
	}
	return out
}

// cellsOf returns, for each cell of cache tensor i (as cacheBytes orders them), a function that
// gathers that cell's bytes from the tensor's bytes: a row where the cells are rows, one element
// of each row where the values are stored transposed.
func cellsOf(bd *BatchDecoder, i int) []func(data []byte, cell int) []byte {
	t := bd.kCache[i/2]
	transposed := i%2 == 1 && !bd.flash
	if i%2 == 1 {
		t = bd.vCache[i/2]
	}
	ne, nb := t.Ne(), t.Nb()
	cells := make([]func([]byte, int) []byte, bd.kvCache.cells)
	for c := range cells {
		cells[c] = func(data []byte, cell int) []byte {
			if !transposed {
				return data[cell*nb[1] : (cell+1)*nb[1]]
			}
			size := ggml.TypeSize(t.Type())
			var out []byte
			for r := range int(ne[1]) {
				out = append(out, data[r*nb[1]+cell*size:r*nb[1]+(cell+1)*size]...)
			}
			return out
		}
	}
	return cells
}

func maxRelDiff(got, want []float32) float64 {
	diff, scale := 0.0, 0.0
	for i := range want {
		diff = math.Max(diff, math.Abs(float64(got[i]-want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	return diff / scale
}

func TestBatchDecoderRefuses(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 1), ModelOptions{})
	bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 2, SlotContext: 8, Batch: 8})
	require.NoError(t, err)
	defer bd.Close()
	for _, in := range [][]BatchInput{
		nil,
		{{Slot: 2, Tokens: []int32{1}}},
		{{Slot: 0, Tokens: []int32{1}}, {Slot: 0, Tokens: []int32{2}}},
		{{Slot: 0}},
		{{Slot: 0, Tokens: []int32{int32(a.Vocab)}}},
		{{Slot: 0, Tokens: make([]int32, 9)}},
		{{Slot: 0, Tokens: make([]int32, 5)}, {Slot: 1, Tokens: make([]int32, 5)}},
	} {
		_, err := bd.Step(in)
		require.Error(t, err, "%v", in)
	}
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: make([]int32, 8)}})
	require.NoError(t, err)
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: []int32{1}}})
	require.ErrorIs(t, err, ErrContextFull)
	require.Error(t, bd.Truncate(1, 9), "more positions than the slot has")
	require.Error(t, bd.Truncate(1, -1))
	require.Error(t, bd.Truncate(2, 0), "no such slot")
	require.NoError(t, bd.Truncate(1, 7))
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: []int32{1}}})
	require.NoError(t, err)
	bd.Release(1)
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: []int32{1}}})
	require.NoError(t, err)
}

// TestBatchDecoderLogitRows checks BatchInput.Logits: a step carrying a chunk that asks for the
// logits of its last m tokens (a speculative verification), beside a generating slot's single
// token and a prompt chunk that asks for one row, returns, in input order, the rows a Decoder
// gives after each of those tokens fed alone; a count beyond the chunk is refused.
func TestBatchDecoderLogitRows(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	path := transformertest.WriteTiny(t, a, ggml.F32, 11)
	m := openTiny(t, path, ModelOptions{})
	dec := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 32)
	bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 3, KVType: KVF32, Batch: 32})
	require.NoError(t, err)
	t.Cleanup(func() { bd.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	seqs := [][]int32{transformertest.RandomTokens(rng, 9, a.Vocab), transformertest.RandomTokens(rng, 4, a.Vocab), transformertest.RandomTokens(rng, 7, a.Vocab)}
	// Slots 0 and 1 read their first tokens; then slot 0 sends its last 5 with 5 rows, slot 1
	// one token, slot 2 its whole prompt (one row).
	_, err = bd.Step([]BatchInput{{Slot: 0, Tokens: seqs[0][:4]}, {Slot: 1, Tokens: seqs[1][:3]}})
	require.NoError(t, err)
	rows, err := bd.Step([]BatchInput{{Slot: 0, Tokens: seqs[0][4:], Logits: 5}, {Slot: 1, Tokens: seqs[1][3:]}, {Slot: 2, Tokens: seqs[2], Logits: 1}})
	require.NoError(t, err)
	require.Len(t, rows, 7)
	var want [][]float32
	for i, s := range seqs {
		dec.Reset()
		for j, tok := range s {
			lg, err := dec.Next(tok)
			require.NoError(t, err)
			if i == 0 && j >= 4 || i > 0 && j == len(s)-1 {
				want = append(want, append([]float32(nil), lg...))
			}
		}
	}
	for i := range want {
		require.Less(t, maxRelDiff(rows[i], want[i]), 1e-4, "row %d", i)
		require.Equal(t, transformertest.Argmax32(want[i]), transformertest.Argmax32(rows[i]), "row %d", i)
	}
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: seqs[1][:1], Logits: 2}})
	require.ErrorContains(t, err, "the logits of 2 of its 1 tokens")
	_, err = bd.Step([]BatchInput{{Slot: 1, Tokens: []int32{0, int32(a.Vocab)}, Logits: 1}})
	require.ErrorContains(t, err, fmt.Sprintf("slot 1: token %d (at 1) is outside the vocabulary 0..%d of %s", a.Vocab, a.Vocab-1, path))
}

// TestBatchDecoderCapture: a capturing BatchDecoder's rows, for a step of two slots' chunks
// (one continuing its sequence), are a capturing Decoder's for the same tokens, in the order
// of the step's tokens.
func TestBatchDecoderCapture(t *testing.T) {
	a := transformertest.TinyArch("smollm2")
	a.NLayers = 3
	m := openTiny(t, transformertest.WriteTiny(t, a, ggml.F32, 13), ModelOptions{})
	layers := []int{1, 0}
	dec := newDecoder(t, m, DecoderOptions{KVType: KVF32}, 32)
	require.NoError(t, dec.SetCapture(layers))
	bd, err := NewBatchDecoder(m, BatchDecoderOptions{Slots: 2, KVType: KVF32, Batch: 32})
	require.NoError(t, err)
	t.Cleanup(func() { bd.Close() })
	require.Error(t, bd.SetCapture([]int{a.NLayers - 1}), "the last layer")
	require.NoError(t, bd.SetCapture(layers))
	rng := rand.New(rand.NewPCG(8, 9))
	s0, s1 := transformertest.RandomTokens(rng, 6, a.Vocab), transformertest.RandomTokens(rng, 5, a.Vocab)
	_, err = bd.Step([]BatchInput{{Slot: 0, Tokens: s0[:2]}})
	require.NoError(t, err)
	_, err = bd.Step([]BatchInput{{Slot: 0, Tokens: s0[2:]}, {Slot: 1, Tokens: s1}})
	require.NoError(t, err)
	got := bd.Captured()
	require.Len(t, got, 4+5)
	var want [][]float32
	for i, s := range [][]int32{s0, s1} {
		dec.Reset()
		_, err := dec.Prompt(s)
		require.NoError(t, err)
		rows := dec.Captured()
		if i == 0 {
			rows = rows[2:]
		}
		for _, r := range rows {
			want = append(want, append([]float32(nil), r...))
		}
	}
	for i := range want {
		require.Len(t, got[i], len(layers)*a.DModel)
		require.Less(t, maxRelDiff(got[i], want[i]), 1e-4, "row %d", i)
	}
}
