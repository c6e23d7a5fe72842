package decoding

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/transformer/transformertest"
	"github.com/toyml/toy/ggml"
	"github.com/toyml/toy/internal/gguffile"
)

// TestExportFailsLeavingNothing: an export that fails after it has started writing leaves
// nothing in the output's directory. A NaN in the last converted tensor of the file is found
// once the tensors before it are in the streamed temporary file (which the progress callback
// sees there), and the export fails naming the tensor; an output directory removed (and made
// again, empty) after the first tensor fails the export, and the new directory stays empty.
// With neither, the same export succeeds and leaves the output alone.
func TestExportFailsLeavingNothing(t *testing.T) {
	model := transformertest.WriteTiny(t, transformertest.TinyArch("smollm2"), ggml.F32, 1)
	hdr, err := gguffile.ReadFile(model)
	require.NoError(t, err)
	last := -1 // the converted tensor whose data comes last in the file
	for i, ti := range hdr.Tensors {
		if quantizedTensor(ti.Name, ti.Shape()) && (last < 0 || ti.Offset > hdr.Tensors[last].Offset) {
			last = i
		}
	}
	require.GreaterOrEqual(t, last, 0)
	bad := hdr.Tensors[last]
	raw, err := os.ReadFile(model)
	require.NoError(t, err)
	at := hdr.DataOffset + int64(bad.Offset) + bad.Size - 4
	binary.LittleEndian.PutUint32(raw[at:], math.Float32bits(float32(math.NaN())))
	nanModel := filepath.Join(t.TempDir(), "nan.gguf")
	require.NoError(t, os.WriteFile(nanModel, raw, 0o644))

	outDir := filepath.Join(t.TempDir(), "out")
	require.NoError(t, os.Mkdir(outDir, 0o755))
	out := filepath.Join(outDir, "model.gguf")
	sawTemp := false
	_, err = Export(nanModel, out, ExportOptions{Type: FileTypeQ8_0, Threads: 2, Progress: func(done, total int, name string) {
		entries, err := os.ReadDir(outDir)
		require.NoError(t, err)
		for _, e := range entries {
			sawTemp = sawTemp || strings.HasPrefix(e.Name(), ".model.gguf.unchecked")
		}
	}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad.Name)
	assert.Contains(t, err.Error(), "not finite")
	assert.Contains(t, err.Error(), "at element "+strconv.Itoa(int(bad.Elements()-1)))
	assert.True(t, sawTemp, "the file was being streamed when the NaN was found")
	entries, err := os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed export leaves nothing behind")

	first := true
	_, err = Export(model, out, ExportOptions{Type: FileTypeQ8_0, Threads: 2, Progress: func(done, total int, name string) {
		if first {
			first = false
			require.NoError(t, os.RemoveAll(outDir))
			require.NoError(t, os.Mkdir(outDir, 0o755))
		}
	}})
	require.ErrorContains(t, err, "writing "+out, "the directory the file was streamed to vanished")
	entries, err = os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Empty(t, entries, "a failed export leaves nothing behind")

	rep, err := Export(model, out, ExportOptions{Type: FileTypeQ8_0, Threads: 2})
	require.NoError(t, err)
	assert.Equal(t, len(hdr.Tensors), rep.Tensors)
	entries, err = os.ReadDir(outDir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "model.gguf", entries[0].Name())
}

// TestClampToType: the one pass that finds the first NaN or infinity and clamps to a type's
// range agrees with a plain reference (math.IsNaN, math.IsInf, the limits written out) on random
// values of every magnitude, with and without non-finite ones, for f32, f16, bf16 and q4_K.
func TestClampToType(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 7))
	limits := map[ggml.Type]float64{ggml.F32: math.MaxFloat32, ggml.F16: 65504, ggml.Q4_K: 65504, ggml.BF16: 3.3895313892515355e38}
	for round := range 200 {
		values := make([]float32, 1+rng.IntN(300))
		for i := range values {
			values[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(80)-20)))
		}
		if round%2 == 1 {
			values[rng.IntN(len(values))] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}[rng.IntN(3)]
		}
		for typ, limit := range limits {
			want, wantN := -1, 0
			ref := append([]float32(nil), values...)
			for i, v := range ref {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					want = i
					break
				}
				if math.Abs(float64(v)) > limit {
					ref[i], wantN = float32(math.Copysign(limit, float64(v))), wantN+1
				}
			}
			got := append([]float32(nil), values...)
			bad, n, lim := clampToType(got, typ)
			require.Equal(t, want, bad, "%s round %d", ggml.TypeName(typ), round)
			require.InDelta(t, limit, lim, limit*1e-7)
			if want < 0 {
				require.Equal(t, wantN, n)
				require.Equal(t, ref, got)
			}
		}
	}
}
