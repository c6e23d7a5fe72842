package transformertest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/internal/gguffile"
)

// LoRAPart is one adapted weight of a LoRA adapter file: the base weight's name, its shape,
// the rank, and the two matrices.
type LoRAPart struct {
	Base          string
	In, Out, Rank int
	A, B          []float32 // ggml layout: a [in, r], b [r, out]
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// WriteLoRA writes an adapter file as llama.cpp does, with an independent writer.
func WriteLoRA(t *testing.T, arch string, alpha float32, parts []LoRAPart) string {
	var w gguffile.Writer
	require.NoError(t, w.AddKV("general.architecture", arch))
	require.NoError(t, w.AddKV("general.type", "adapter"))
	require.NoError(t, w.AddKV("adapter.type", "lora"))
	require.NoError(t, w.AddKV("adapter.lora.alpha", alpha))
	for _, p := range parts {
		require.NoError(t, w.AddTensor(p.Base+".lora_a", gguffile.TypeF32, []int64{int64(p.In), int64(p.Rank)}, f32Bytes(p.A)))
		require.NoError(t, w.AddTensor(p.Base+".lora_b", gguffile.TypeF32, []int64{int64(p.Rank), int64(p.Out)}, f32Bytes(p.B)))
	}
	path := filepath.Join(t.TempDir(), "adapter.gguf")
	require.NoError(t, w.WriteFile(path))
	return path
}

// RandomLoRAPart is an adapted weight of rank rank on the weight base [in, out], with random
// matrices.
func RandomLoRAPart(rng *rand.Rand, base string, in, out, rank int) LoRAPart {
	p := LoRAPart{Base: base, In: in, Out: out, Rank: rank, A: make([]float32, in*rank), B: make([]float32, rank*out)}
	for i := range p.A {
		p.A[i] = float32(rng.NormFloat64() * 0.3)
	}
	for i := range p.B {
		p.B[i] = float32(rng.NormFloat64() * 0.3)
	}
	return p
}

// MergeLoRAPart adds scale·B·A to the reference weight (ggml layout W[o·in + i]).
func MergeLoRAPart(w []float64, p LoRAPart, scale float64) {
	for o := 0; o < p.Out; o++ {
		for i := 0; i < p.In; i++ {
			s := 0.0
			for r := 0; r < p.Rank; r++ {
				s += float64(p.B[o*p.Rank+r]) * float64(p.A[r*p.In+i])
			}
			w[o*p.In+i] += scale * s
		}
	}
}
