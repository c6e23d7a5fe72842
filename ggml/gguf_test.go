package ggml

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/reference"
)

// everyValue has one key per GGUF value type, scalar and array, with awkward values.
func everyValue(rng *rand.Rand) []gguffile.KV {
	return []gguffile.KV{
		{Key: "u8", Value: uint8(rng.UintN(256))},
		{Key: "i8", Value: int8(-7)},
		{Key: "u16", Value: uint16(65535)},
		{Key: "i16", Value: int16(-32768)},
		{Key: "u32", Value: rng.Uint32()},
		{Key: "i32", Value: int32(-rng.Int32())},
		{Key: "f32", Value: float32(rng.NormFloat64())},
		{Key: "bool", Value: true},
		{Key: "str", Value: "héllo, wörld ✓"},
		{Key: "empty.str", Value: ""},
		{Key: "u64", Value: uint64(math.MaxUint64)},
		{Key: "i64", Value: int64(math.MinInt64)},
		{Key: "f64", Value: math.Pi},
		{Key: "arr.u8", Value: []uint8{0, 1, 255}},
		{Key: "arr.i8", Value: []int8{-128, 0, 127}},
		{Key: "arr.u16", Value: []uint16{1, 2}},
		{Key: "arr.i16", Value: []int16{-3, 4}},
		{Key: "arr.u32", Value: []uint32{rng.Uint32(), 7}},
		{Key: "arr.i32", Value: []int32{-1, 1 << 30}},
		{Key: "arr.f32", Value: []float32{1.5, float32(math.Inf(-1)), -0}},
		{Key: "arr.bool", Value: []bool{true, false, true}},
		{Key: "arr.str", Value: []string{"a", "", "tokenizer ▁piece"}},
		{Key: "arr.u64", Value: []uint64{math.MaxUint64, 0}},
		{Key: "arr.i64", Value: []int64{math.MinInt64, 42}},
		{Key: "arr.f64", Value: []float64{math.SmallestNonzeroFloat64, -2.5}},
		{Key: "arr.empty", Value: []int32{}},
	}
}

type testTensor struct {
	name string
	typ  Type
	ne   []int64
	data []byte
}

// someTensors makes f32, f16, q8_0 and q4_0 tensors of odd shapes, encoded by the pure-Go
// reference (not by ggml).
func someTensors(rng *rand.Rand) []testTensor {
	f32 := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	raw32 := func(v []float32) []byte {
		b := make([]byte, 4*len(v))
		for i, x := range v {
			bits := math.Float32bits(x)
			b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(bits), byte(bits>>8), byte(bits>>16), byte(bits>>24)
		}
		return b
	}
	raw16 := func(v []float32) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			h := reference.F32ToF16(x)
			b[2*i], b[2*i+1] = byte(h), byte(h>>8)
		}
		return b
	}
	return []testTensor{
		{"token_embd.weight", F32, []int64{7, 5}, raw32(f32(35))},
		{"blk.0.attn_q.weight", F16, []int64{3, 5, 2}, raw16(f32(30))},
		{"blk.0.ffn_up.weight", Q8_0, []int64{64, 3}, reference.QuantizeQ8_0(f32(192))},
		{"blk.0.ffn_down.weight", Q4_0, []int64{32, 5}, reference.QuantizeQ4_0(f32(160))},
		{"output_norm.weight", F32, []int64{1}, raw32(f32(1))},
	}
}

// TestGGUFWriteReadByGo writes every value type and f32/f16/q8_0/q4_0 tensors with ggml's writer
// (through the bindings) and reads the file back with the independent pure-Go reader.
func TestGGUFWriteReadByGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kvs, tensors := everyValue(rng), someTensors(rng)

	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	ctx, err := NewContext(ContextOptions{MaxTensors: len(tensors)})
	require.NoError(t, err)
	defer ctx.Close()
	var ts []*Tensor
	for _, tt := range tensors {
		ts = append(ts, ctx.NewTensor(tt.typ, tt.ne...).SetName(tt.name))
	}
	require.NoError(t, ctx.Err())
	buf, err := be.Alloc(ctx)
	require.NoError(t, err)
	defer buf.Close()

	w, err := NewGGUFWriter()
	require.NoError(t, err)
	defer w.Close()
	for _, kv := range kvs {
		require.NoError(t, w.Set(kv.Key, kv.Value), kv.Key)
	}
	for i, tt := range tensors {
		require.NoError(t, ts[i].SetBytes(tt.data))
		require.NoError(t, w.AddTensor(ts[i]))
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	require.NoError(t, w.WriteFile(path))

	f, err := gguffile.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, f.KVs, len(kvs))
	for _, kv := range kvs {
		got, ok := f.Get(kv.Key)
		require.True(t, ok, kv.Key)
		assert.Equal(t, kv.Value, got, kv.Key)
	}
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, f.Tensors, len(tensors))
	for i, tt := range tensors {
		info := f.Tensors[i]
		assert.Equal(t, tt.name, info.Name)
		assert.Equal(t, uint32(tt.typ), info.Type)
		assert.Equal(t, tt.ne, info.Shape())
		start := f.DataOffset + int64(info.Offset)
		assert.Equal(t, tt.data, raw[start:start+info.Size], tt.name)
	}
}

// TestGGUFWrittenByGoReadByGGML goes the other way: the pure-Go writer makes the file, ggml
// (through the bindings) reads it.
func TestGGUFWrittenByGoReadByGGML(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	kvs, tensors := everyValue(rng), someTensors(rng)
	var w gguffile.Writer
	require.NoError(t, w.AddKV(gguffile.AlignmentKey, uint32(64)))
	for _, kv := range kvs {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, tt := range tensors {
		require.NoError(t, w.AddTensor(tt.name, uint32(tt.typ), tt.ne, tt.data))
	}
	path := filepath.Join(t.TempDir(), "go.gguf")
	require.NoError(t, w.WriteFile(path))

	f, err := OpenGGUF(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, uint32(3), f.Version())
	assert.Equal(t, 64, f.Alignment())
	assert.Len(t, f.Keys(), len(kvs)+1)
	for _, kv := range kvs {
		got, err := f.Value(kv.Key)
		require.NoError(t, err, kv.Key)
		assert.Equal(t, kv.Value, got, kv.Key)
	}
	s, err := f.String("str")
	require.NoError(t, err)
	assert.Equal(t, "héllo, wörld ✓", s)
	_, err = f.Uint32("str")
	assert.ErrorContains(t, err, "holds string")
	_, err = f.Value("no.such.key")
	assert.ErrorIs(t, err, ErrNoKey)

	require.Len(t, f.Tensors(), len(tensors))
	for i, tt := range tensors {
		info := f.Tensors()[i]
		assert.Equal(t, tt.name, info.Name)
		assert.Equal(t, tt.typ, info.Type)
		assert.Equal(t, tt.ne, info.Ne[:info.NDims])
		assert.Zero(t, info.Offset%64, "aligned")
		data, err := f.ReadTensorData(tt.name)
		require.NoError(t, err)
		assert.Equal(t, tt.data, data, tt.name)
	}
}

// TestQuantizeMatchesReference checks ggml's quantizer (through the bindings) against the pure
// Go encoders, byte for byte.
func TestQuantizeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	src := make([]float32, 96*3)
	for i := range src {
		src[i] = float32(rng.NormFloat64() * 3)
	}
	q8, err := Quantize(Q8_0, src, 96)
	require.NoError(t, err)
	assert.Equal(t, reference.QuantizeQ8_0(src), q8)
	q4, err := Quantize(Q4_0, src, 96)
	require.NoError(t, err)
	assert.Equal(t, reference.QuantizeQ4_0(src), q4)

	_, err = Quantize(Q8_0, src[:50], 50)
	assert.ErrorContains(t, err, "multiple of 32")
	_, err = Quantize(Q8_0, src[:100], 96)
	assert.ErrorContains(t, err, "do not form rows")
	_, err = Quantize(ggmlc.TypeQ8_K, src[:256], 256)
	assert.ErrorContains(t, err, "no quantizer for q8_K")
	_, err = Quantize(I32, src[:96], 96)
	assert.ErrorContains(t, err, "no quantizer")
}

func TestGGUFBadInput(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenGGUF(filepath.Join(dir, "missing.gguf"))
	assert.ErrorContains(t, err, "missing.gguf")

	garbage := filepath.Join(dir, "garbage.gguf")
	require.NoError(t, os.WriteFile(garbage, []byte("this is not a gguf file at all"), 0o644))
	_, err = OpenGGUF(garbage)
	assert.ErrorContains(t, err, "garbage.gguf")

	var w gguffile.Writer
	require.NoError(t, w.AddKV("general.name", "tiny"))
	require.NoError(t, w.AddTensor("w", uint32(F32), []int64{4, 4}, make([]byte, 64)))
	var good bytes.Buffer
	_, err = w.WriteTo(&good)
	require.NoError(t, err)
	for _, cut := range []int{0, 3, 4, 8, 20, good.Len() / 2, good.Len() - 1} {
		p := filepath.Join(dir, "truncated.gguf")
		require.NoError(t, os.WriteFile(p, good.Bytes()[:cut], 0o644))
		_, err := OpenGGUF(p)
		assert.Error(t, err, "cut at %d", cut)
	}

	gw, err := NewGGUFWriter()
	require.NoError(t, err)
	defer gw.Close()
	assert.ErrorContains(t, gw.Set("", uint8(1)), "empty key")
	assert.ErrorContains(t, gw.Set("k\x00", uint8(1)), "NUL")
	assert.ErrorContains(t, gw.Set("general.alignment", uint32(3)), "power of two")
	assert.ErrorContains(t, gw.Set("general.alignment", int32(32)), "power of two")
	assert.ErrorContains(t, gw.Set("k", map[string]int{}), "not a GGUF value type")
	assert.ErrorContains(t, gw.Set("k", "a\x00b"), "NUL")

	ctx, err := NewContext(ContextOptions{MaxTensors: 2})
	require.NoError(t, err)
	defer ctx.Close()
	a := ctx.NewTensor(F32, 4)
	assert.ErrorContains(t, gw.AddTensor(a), "no name")
	a.SetName("a")
	assert.ErrorContains(t, gw.AddTensor(a), "no memory")

	// A failed write leaves nothing behind.
	target := filepath.Join(dir, "sub", "out.gguf")
	assert.Error(t, gw.WriteFile(target))
	_, statErr := os.Stat(target)
	assert.True(t, os.IsNotExist(statErr))
}

// FuzzOpenGGUF feeds arbitrary bytes to OpenGGUF: it must return an error or a file whose
// metadata can be read in full, and never crash the process.
func FuzzOpenGGUF(f *testing.F) {
	rng := rand.New(rand.NewPCG(7, 8))
	var w gguffile.Writer
	for _, kv := range everyValue(rng) {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			f.Fatal(err)
		}
	}
	for _, tt := range someTensors(rng) {
		if err := w.AddTensor(tt.name, uint32(tt.typ), tt.ne, tt.data); err != nil {
			f.Fatal(err)
		}
	}
	var seed bytes.Buffer
	if _, err := w.WriteTo(&seed); err != nil {
		f.Fatal(err)
	}
	f.Add(seed.Bytes())
	f.Add(seed.Bytes()[:seed.Len()/2])
	f.Add([]byte("GGUF\x03\x00\x00\x00"))
	f.Add([]byte{})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "fuzz.gguf")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := OpenGGUF(p)
		if err != nil {
			return
		}
		defer g.Close()
		for _, k := range g.Keys() {
			if _, err := g.Value(k); err != nil {
				t.Fatalf("accepted file, unreadable key %q: %v", k, err)
			}
		}
		for _, ti := range g.Tensors() {
			if _, err := g.ReadTensorData(ti.Name); err != nil {
				t.Fatalf("accepted file, unreadable tensor %q: %v", ti.Name, err)
			}
		}
	})
}
