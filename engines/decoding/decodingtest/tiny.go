// Package decodingtest holds what the tests of the packages above decoding (training,
// speculative) share to load and run the tiny models transformertest writes: a GGUFModel
// closed with the test, a Decoder likewise, and the loaded weights as float64 for the
// reference. decoding's own tests keep the same helpers unexported (tinymodel_test.go), since
// they cannot import this package.
package decodingtest

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/decoding"
	"github.com/toyml/toy/ggml"
)

// LoadedWeights reads every weight of m back as float64, dequantizing with ggml's own CPU
// dequantizer (GetRows), so that the reference computes with exactly the weights the file
// holds, whatever backend the model runs on.
func LoadedWeights(t testing.TB, m *decoding.GGUFModel) map[string][]float64 {
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
			vals = Dequantize(t, w)
		}
		f := make([]float64, len(vals))
		for i, v := range vals {
			f[i] = float64(v)
		}
		out[s.Name] = f
	}
	return out
}

// Dequantize is w's values as ggml's CPU dequantizer gives them (decoding.DequantizeOnCPU).
func Dequantize(t testing.TB, w *ggml.Tensor) []float32 {
	raw, err := decoding.DequantizeOnCPU(w, ggml.F32)
	require.NoError(t, err)
	vals := make([]float32, len(raw)/4)
	for i := range vals {
		vals[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return vals
}

// OpenTiny opens the model at path (one thread unless opts say otherwise), closed when the
// test ends.
func OpenTiny(t testing.TB, path string, opts decoding.ModelOptions) *decoding.GGUFModel {
	if opts.Backend == nil && opts.Threads == 0 {
		opts.Threads = 1 // tiny models gain nothing from more, and the machine is shared
	}
	m, err := decoding.OpenModel(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	return m
}

// NewDecoder makes a decoder of m, closed when the test ends.
func NewDecoder(t testing.TB, m *decoding.GGUFModel, opts decoding.DecoderOptions) *decoding.Decoder {
	d, err := decoding.NewDecoder(m, opts)
	require.NoError(t, err)
	t.Cleanup(func() { d.Close() })
	return d
}
