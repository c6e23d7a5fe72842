package decoding

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
)

// loadedWeights reads every weight of m back as float64, dequantizing with ggml's own CPU
// dequantizer (GetRows), so that the reference computes with exactly the weights the file
// holds, whatever backend the model runs on.
func loadedWeights(t testing.TB, m *GGUFModel) map[string][]float64 {
	out := map[string][]float64{}
	for _, s := range m.Arch.TensorSpecs() {
		w := m.Tensor(s.Name)
		require.NotNil(t, w, s.Name)
		var vals []float32
		if w.Type() == ggml.F32 {
			var err error
			vals, err = w.F32()
			require.NoError(t, err)
		} else {
			vals = dequantize(t, w)
		}
		f := make([]float64, len(vals))
		for i, v := range vals {
			f[i] = float64(v)
		}
		out[s.Name] = f
	}
	return out
}

// dequantize is w's values as ggml's CPU dequantizer gives them (DequantizeOnCPU).
func dequantize(t testing.TB, w *ggml.Tensor) []float32 {
	raw, err := DequantizeOnCPU(w, ggml.F32)
	require.NoError(t, err)
	vals := make([]float32, len(raw)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return vals
}

func openTiny(t testing.TB, path string, opts ModelOptions) *GGUFModel {
	if opts.Backend == nil && opts.Threads == 0 {
		opts.Threads = 1 // tiny models gain nothing from more, and the machine is shared
	}
	m, err := OpenModel(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

func newDecoder(t testing.TB, m *GGUFModel, opts DecoderOptions, bucket int) *Decoder {
	d, err := NewDecoder(m, opts)
	require.NoError(t, err)
	if bucket > 0 {
		d.bucket = bucket
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// greedy feeds prompt to d, then n greedy tokens (transformertest.Argmax32 of the logits before
// each): the tokens, and the logits of the prompt and of every step after it, one after the other.
func greedy(t testing.TB, d *Decoder, prompt []int32, n int) (tokens []int32, logits []float32) {
	l, err := d.Prompt(prompt)
	require.NoError(t, err)
	logits = append(logits, l...)
	for range n {
		tok := transformertest.Argmax32(l)
		tokens = append(tokens, tok)
		l, err = d.Next(tok)
		require.NoError(t, err)
		logits = append(logits, l...)
	}
	return tokens, logits
}

// graphNodes counts the nodes of d's graphs that match accepts.
func graphNodes(d *Decoder, match func(*ggml.Tensor) bool) int {
	n := 0
	for _, g := range d.graphs {
		for i := range g.graph.Len() {
			if match(g.graph.Node(i)) {
				n++
			}
		}
	}
	return n
}
