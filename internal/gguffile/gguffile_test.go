package gguffile

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readBytes runs Read on an in-memory file.
func readBytes(b []byte) (*File, error) {
	return Read(bytes.NewReader(b), int64(len(b)))
}

// allValues holds one key per scalar type and one per array type.
var allValues = []KV{
	{"u8", uint8(200)},
	{"i8", int8(-100)},
	{"u16", uint16(60000)},
	{"i16", int16(-30000)},
	{"u32", uint32(4000000000)},
	{"i32", int32(-2000000000)},
	{"f32", float32(3.25)},
	{"bool.true", true},
	{"bool.false", false},
	{"str", "héllo, wörld"},
	{"str.empty", ""},
	{"u64", uint64(math.MaxUint64)},
	{"i64", int64(math.MinInt64)},
	{"f64", math.Pi},
	{"arr.u8", []uint8{0, 1, 255}},
	{"arr.i8", []int8{-128, 0, 127}},
	{"arr.u16", []uint16{0, 65535}},
	{"arr.i16", []int16{-32768, 32767}},
	{"arr.u32", []uint32{1, 2, 3}},
	{"arr.i32", []int32{-1, 0, 1}},
	{"arr.f32", []float32{-1.5, 0, float32(math.Inf(1))}},
	{"arr.bool", []bool{true, false, true}},
	{"arr.str", []string{"a", "", "tokens ▁with ünicode", "\xff not utf-8"}},
	{"arr.u64", []uint64{math.MaxUint64, 0}},
	{"arr.i64", []int64{math.MinInt64, math.MaxInt64}},
	{"arr.f64", []float64{math.SmallestNonzeroFloat64, -0.5}},
	{"arr.empty.u32", []uint32{}},
	{"arr.empty.str", []string{}},
}

// testTensor is a tensor to write, with data filled with a pattern.
type testTensor struct {
	name string
	typ  uint32
	ne   []int64
}

func (tt testTensor) data(t testing.TB) []byte {
	n, ok := RowSize(tt.typ, tt.ne[0])
	require.True(t, ok)
	for _, d := range tt.ne[1:] {
		n *= d
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + len(tt.name))
	}
	return b
}

var someTensors = []testTensor{
	{"token_embd.weight", TypeF32, []int64{3, 5}},
	{"blk.0.attn_q.weight", TypeQ4_0, []int64{64, 3}},
	{"blk.0.attn_k.weight", TypeF16, []int64{7}},
	{"blk.0.ffn_up.weight", TypeQ4_K, []int64{256, 2, 1}},
	{"blk.0.ffn_down.weight", TypeQ8_0, []int64{32, 2, 2, 2}},
	{"blk.0.norm", TypeBF16, []int64{9}},
	{"blk.0.mxfp4", TypeMXFP4, []int64{32, 1}},
	{"blk.0.iq4_nl", TypeIQ4_NL, []int64{32}},
	{"i8", TypeI8, []int64{1}},
	{"f64", TypeF64, []int64{2, 3}},
	{"empty", TypeF32, []int64{0, 4}},
	{"last", TypeQ6_K, []int64{256}},
}

// buildFile writes kvs and tensors with Writer and returns the bytes.
func buildFile(t testing.TB, kvs []KV, tensors []testTensor) []byte {
	var w Writer
	for _, kv := range kvs {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, tt := range tensors {
		require.NoError(t, w.AddTensor(tt.name, tt.typ, tt.ne, tt.data(t)))
	}
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf)
	require.NoError(t, err)
	require.Equal(t, int64(buf.Len()), n)
	return buf.Bytes()
}

func TestRoundTripValues(t *testing.T) {
	b := buildFile(t, allValues, nil)
	f, err := readBytes(b)
	require.NoError(t, err)
	assert.Equal(t, uint32(3), f.Version)
	assert.Equal(t, allValues, f.KVs)
	assert.Empty(t, f.Tensors)
	assert.Equal(t, int64(DefaultAlignment), f.Alignment)
	assert.Equal(t, int64(len(b)), f.DataOffset)
	assert.Zero(t, f.DataOffset%DefaultAlignment)

	v, ok := f.Get("str")
	assert.True(t, ok)
	assert.Equal(t, "héllo, wörld", v)
	_, ok = f.Get("nope")
	assert.False(t, ok)

	for _, kv := range f.KVs {
		typ, ok := kv.Type()
		require.True(t, ok)
		elem, _ := kv.ElemType()
		if strings.HasPrefix(kv.Key, "arr.") {
			assert.Equal(t, ValueArray, typ, kv.Key)
			assert.NotNil(t, kv.Value, kv.Key)
		} else {
			assert.Equal(t, elem, typ, kv.Key)
		}
	}
}

func TestRoundTripNaN(t *testing.T) {
	nan32 := math.Float32frombits(0x7fc00001)
	b := buildFile(t, []KV{{"nan32", nan32}, {"nan64", []float64{math.NaN()}}}, nil)
	f, err := readBytes(b)
	require.NoError(t, err)
	assert.Equal(t, math.Float32bits(nan32), math.Float32bits(f.KVs[0].Value.(float32)))
	assert.True(t, math.IsNaN(f.KVs[1].Value.([]float64)[0]))
}

func TestVersion2(t *testing.T) {
	b := buildFile(t, allValues, someTensors)
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err := readBytes(b)
	require.NoError(t, err)
	assert.Equal(t, uint32(2), f.Version)
}

func TestTensors(t *testing.T) {
	for _, align := range []uint32{0, 32, 64, 1, 4096} {
		var kvs []KV
		want := int64(DefaultAlignment)
		if align != 0 {
			kvs = []KV{{"general.architecture", "test"}, {AlignmentKey, align}}
			want = int64(align)
		}
		b := buildFile(t, kvs, someTensors)
		f, err := readBytes(b)
		require.NoError(t, err, "alignment %d", align)
		assert.Equal(t, want, f.Alignment)
		assert.Zero(t, f.DataOffset%want)
		require.Len(t, f.Tensors, len(someTensors))
		var next uint64
		for i, tt := range someTensors {
			ti := f.Tensors[i]
			assert.Equal(t, tt.name, ti.Name)
			assert.Equal(t, tt.typ, ti.Type)
			assert.Equal(t, len(tt.ne), ti.NDims)
			assert.Equal(t, tt.ne, ti.Shape())
			for j := ti.NDims; j < MaxDims; j++ {
				assert.Equal(t, int64(1), ti.Ne[j])
			}
			assert.Equal(t, next, ti.Offset, tt.name)
			assert.Zero(t, ti.Offset%uint64(want))
			data := tt.data(t)
			assert.Equal(t, int64(len(data)), ti.Size)
			start := f.DataOffset + int64(ti.Offset)
			assert.Equal(t, data, b[start:start+ti.Size], tt.name)
			next = uint64(pad(int64(ti.Offset)+ti.Size, want))
			got, ok := f.Tensor(tt.name)
			require.True(t, ok)
			assert.Equal(t, &f.Tensors[i], got)
		}
		// Like ggml, Writer pads the last tensor too.
		assert.Equal(t, int64(len(b)), f.DataOffset+int64(next))
	}
	f, err := readBytes(buildFile(t, nil, someTensors))
	require.NoError(t, err)
	_, ok := f.Tensor("missing")
	assert.False(t, ok)
	ti, _ := f.Tensor("blk.0.ffn_down.weight")
	assert.Equal(t, int64(32*8), ti.Elements())
}

// TestNoTrailingPadding: files whose last tensor is not padded (as some
// writers, ollama's among them, produce) are accepted.
func TestNoTrailingPadding(t *testing.T) {
	tensors := []testTensor{{"a", TypeF32, []int64{3}}}
	b := buildFile(t, nil, tensors)
	f, err := readBytes(b[:len(b)-32+12])
	require.NoError(t, err)
	assert.Equal(t, int64(12), f.Tensors[0].Size)
	_, err = readBytes(b[:len(b)-32+11])
	assert.ErrorContains(t, err, `tensor "a": data [`)
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.gguf")
	require.NoError(t, os.WriteFile(path, []byte("old contents"), 0o600))
	var w Writer
	require.NoError(t, w.AddKV("general.name", "x"))
	require.NoError(t, w.AddTensor("w", TypeF32, []int64{2, 2}, make([]byte, 16)))
	require.NoError(t, w.WriteFile(path))

	f, err := ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, []KV{{"general.name", "x"}}, f.KVs)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "temporary file left behind")

	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	onDisk, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, buf.Bytes(), onDisk)

	err = w.WriteFile(filepath.Join(dir, "missing", "x.gguf"))
	assert.ErrorContains(t, err, "missing")
}

func TestReadFileErrors(t *testing.T) {
	_, err := ReadFile(filepath.Join(t.TempDir(), "absent.gguf"))
	assert.ErrorIs(t, err, os.ErrNotExist)

	path := filepath.Join(t.TempDir(), "bad.gguf")
	require.NoError(t, os.WriteFile(path, []byte("GGML\x03\x00\x00\x00"), 0o644))
	_, err = ReadFile(path)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, path, e.Path)
	assert.Equal(t, int64(0), e.Offset)
	assert.Nil(t, e.Err)
	assert.Contains(t, err.Error(), "gguf: "+path+": offset 0: bad magic")

	_, err = ReadFile(t.TempDir())
	assert.Error(t, err)
}

func TestTypeTraits(t *testing.T) {
	cases := []struct {
		typ         uint32
		name        string
		block, size int
	}{
		{TypeF32, "f32", 1, 4}, {TypeF16, "f16", 1, 2},
		{TypeQ4_0, "q4_0", 32, 18}, {TypeQ4_1, "q4_1", 32, 20},
		{TypeQ5_0, "q5_0", 32, 22}, {TypeQ5_1, "q5_1", 32, 24},
		{TypeQ8_0, "q8_0", 32, 34}, {TypeQ8_1, "q8_1", 32, 36},
		{TypeQ2_K, "q2_K", 256, 84}, {TypeQ3_K, "q3_K", 256, 110},
		{TypeQ4_K, "q4_K", 256, 144}, {TypeQ5_K, "q5_K", 256, 176},
		{TypeQ6_K, "q6_K", 256, 210}, {TypeQ8_K, "q8_K", 256, 292},
		{TypeIQ2_XXS, "iq2_xxs", 256, 66}, {TypeIQ2_XS, "iq2_xs", 256, 74},
		{TypeIQ3_XXS, "iq3_xxs", 256, 98}, {TypeIQ1_S, "iq1_s", 256, 50},
		{TypeIQ4_NL, "iq4_nl", 32, 18}, {TypeIQ3_S, "iq3_s", 256, 110},
		{TypeIQ2_S, "iq2_s", 256, 82}, {TypeIQ4_XS, "iq4_xs", 256, 136},
		{TypeI8, "i8", 1, 1}, {TypeI16, "i16", 1, 2}, {TypeI32, "i32", 1, 4},
		{TypeI64, "i64", 1, 8}, {TypeF64, "f64", 1, 8},
		{TypeIQ1_M, "iq1_m", 256, 56}, {TypeBF16, "bf16", 1, 2},
		{TypeTQ1_0, "tq1_0", 256, 54}, {TypeTQ2_0, "tq2_0", 256, 66},
		{TypeMXFP4, "mxfp4", 32, 17},
	}
	seen := map[uint32]bool{}
	for _, c := range cases {
		seen[c.typ] = true
		size, ok := TypeSize(c.typ)
		assert.True(t, ok, c.name)
		assert.Equal(t, c.size, size, c.name)
		block, ok := BlockSize(c.typ)
		assert.True(t, ok, c.name)
		assert.Equal(t, c.block, block, c.name)
		assert.Equal(t, c.name, TypeName(c.typ))
	}
	for typ := uint32(0); typ < 45; typ++ {
		if seen[typ] {
			continue
		}
		_, ok := TypeSize(typ)
		assert.False(t, ok, "type %d", typ)
		_, ok = BlockSize(typ)
		assert.False(t, ok, "type %d", typ)
		_, ok = RowSize(typ, 0)
		assert.False(t, ok, "type %d", typ)
	}
	assert.Equal(t, "q4_2 (removed)", TypeName(4))
	assert.Equal(t, "iq4_nl_8_8 (removed)", TypeName(38))
	assert.Equal(t, "type(40)", TypeName(40))

	n, ok := RowSize(TypeQ4_K, 512)
	assert.True(t, ok)
	assert.Equal(t, int64(288), n)
	_, ok = RowSize(TypeQ4_K, 100)
	assert.False(t, ok)
	_, ok = RowSize(TypeF32, -1)
	assert.False(t, ok)
	_, ok = RowSize(TypeF64, math.MaxInt64)
	assert.False(t, ok)
}

func TestWriterRejects(t *testing.T) {
	var w Writer
	require.NoError(t, w.AddKV("k", uint32(1)))
	assert.ErrorContains(t, w.AddKV("k", uint32(2)), `duplicate key "k"`)
	assert.ErrorContains(t, w.AddKV("", uint32(2)), "empty key")
	assert.ErrorContains(t, w.AddKV("a\x00b", uint32(2)), "NUL")
	assert.ErrorContains(t, w.AddKV(strings.Repeat("k", MaxKeyLen+1), uint32(2)), "65535")
	assert.ErrorContains(t, w.AddKV("int", 3), "unsupported value type int")
	assert.ErrorContains(t, w.AddKV("nested", [][]uint32{{1}}), "unsupported value type")
	assert.ErrorContains(t, w.AddKV(AlignmentKey, uint64(32)), "must be uint32")
	assert.ErrorContains(t, w.AddKV(AlignmentKey, uint32(24)), "power of two")

	require.NoError(t, w.AddTensor("t", TypeF32, []int64{2}, make([]byte, 8)))
	assert.ErrorContains(t, w.AddTensor("t", TypeF32, []int64{2}, make([]byte, 8)), "duplicate tensor name")
	assert.ErrorContains(t, w.AddTensor("u", TypeF32, []int64{2}, make([]byte, 7)), "7 bytes of data")
	assert.ErrorContains(t, w.AddTensor("u", TypeQ4_0, []int64{31}, make([]byte, 18)), "multiple of 32")
	assert.ErrorContains(t, w.AddTensor("u", 5, []int64{32}, nil), "no longer supported")
	assert.ErrorContains(t, w.AddTensor("u", TypeF32, nil, nil), "0 dimensions")
	assert.ErrorContains(t, w.AddTensor(strings.Repeat("n", 64), TypeF32, []int64{1}, make([]byte, 4)), "at most 63")
	require.NoError(t, w.AddTensor(strings.Repeat("n", 63), TypeF32, []int64{1}, make([]byte, 4)))
}

// raw assembles GGUF bytes field by field, valid or not.
type raw struct{ b []byte }

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) i64(v int64) *raw  { return r.u64(uint64(v)) }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) raw(b ...byte) *raw {
	r.b = append(r.b, b...)
	return r
}

// head starts a file: magic, version 3 and the counts.
func head(nTensors, nKV int64) *raw {
	r := &raw{b: []byte(Magic)}
	return r.u32(3).i64(nTensors).i64(nKV)
}

// kvU32 appends a uint32 key-value pair.
func (r *raw) kvU32(key string, v uint32) *raw { return r.str(key).u32(uint32(ValueUint32)).u32(v) }

// tensor appends a tensor info.
func (r *raw) tensor(name string, ne []int64, typ uint32, off uint64) *raw {
	r.str(name).u32(uint32(len(ne)))
	for _, n := range ne {
		r.i64(n)
	}
	return r.u32(typ).u64(off)
}

// data pads to align and appends n bytes of tensor data.
func (r *raw) data(align, n int) []byte {
	for len(r.b)%align != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, make([]byte, n)...)
}

// oneTensor is a file with one tensor and n bytes of data.
func oneTensor(name string, ne []int64, typ uint32, off uint64, n int) []byte {
	return head(1, 0).tensor(name, ne, typ, off).data(32, n)
}

type badFile struct {
	name string
	data []byte
	want string // substring of the error
}

var long64 = strings.Repeat("x", 64)

var badFiles = []badFile{
	{"empty", nil, "file ends while reading magic"},
	{"bad magic", []byte("GGML\x03\x00\x00\x00"), `bad magic "GGML"`},
	{"version 0", (&raw{b: []byte(Magic)}).u32(0).i64(0).i64(0).b, "invalid version 0"},
	{"version 1", (&raw{b: []byte(Magic)}).u32(1).i64(0).i64(0).b, "version 1 is not supported"},
	{"version 99", (&raw{b: []byte(Magic)}).u32(99).i64(0).i64(0).b, "unsupported version 99"},
	{"big endian", (&raw{b: []byte(Magic)}).u32(3 << 24).i64(0).i64(0).b, "big-endian"},
	{"no counts", (&raw{b: []byte(Magic)}).u32(3).b, "file ends while reading tensor count"},
	{"huge tensor count", head(1<<62, 0).b, "tensor count is 4611686018427387904"},
	{"negative tensor count", head(-1, 0).b, "tensor count is negative"},
	{"huge kv count", head(0, 1<<62).b, "key-value count is 4611686018427387904"},
	{"negative kv count", head(0, math.MinInt64).b, "key-value count is negative"},
	{"counts together too large", head(1, 1).str("k").u32(0).raw(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18).b,
		"1 tensors and 1 key-value pairs cannot fit"},
	{"huge key length", head(0, 1).u64(1 << 62).raw(make([]byte, 20)...).b, "key 0 length is 4611686018427387904, more than the maximum"},
	{"key past EOF", head(0, 1).u64(20).raw(make([]byte, 14)...).b, "key 0 length is 20, but only 14 bytes are left"},
	{"key too long", head(0, 1).u64(MaxKeyLen + 1).raw(make([]byte, 100)...).b, "key 0 length is 65536, more than the maximum 65535"},
	{"empty key", head(0, 1).str("").u32(0).raw(1, 0, 0, 0, 0).b, "key 0: empty key"},
	{"key with NUL", head(0, 1).str("general.alignment\x00").u32(uint32(ValueString)).str("x").b, "contains a NUL byte"},
	{"huge string value", head(0, 1).str("k").u32(uint32(ValueString)).u64(math.MaxUint64).raw(make([]byte, 10)...).b,
		`value of key "k" length is 18446744073709551615`},
	{"unknown value type", head(0, 1).str("k").u32(13).raw(make([]byte, 8)...).b, `key "k": unknown value type 13`},
	{"negative value type", head(0, 1).str("k").u32(math.MaxUint32).raw(make([]byte, 8)...).b, "unknown value type 4294967295"},
	{"nested array", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueArray)).u64(1).u32(0).u64(1).raw(1).b,
		`key "k": nested arrays`},
	{"unknown element type", head(0, 1).str("k").u32(uint32(ValueArray)).u32(20).u64(0).b, "unknown array element type 20"},
	{"huge array", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueUint32)).u64(1 << 40).raw(make([]byte, 64)...).b,
		`key "k": array of 1099511627776 uint32`},
	{"huge string array", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(9).raw(make([]byte, 64)...).b,
		`array of 9 string`},
	{"array element past end", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(2).str("a").u64(5).raw('b').b,
		`element 1 of key "k" length is 5, but only 1`},
	{"bool 2", head(0, 1).str("k").u32(uint32(ValueBool)).raw(2).b, `key "k": bool value is 2`},
	{"bool array 255", head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueBool)).u64(2).raw(1, 255).b,
		`key "k": element 1: bool value is 255`},
	{"duplicate key", head(0, 2).kvU32("a.b", 1).kvU32("a.b", 2).b, `duplicate key "a.b"`},
	{"alignment 0", head(0, 1).kvU32(AlignmentKey, 0).b, `"general.alignment" is 0, must be a nonzero power of two`},
	{"alignment 48", head(0, 1).kvU32(AlignmentKey, 48).b, "is 48, must be a nonzero power of two"},
	{"alignment uint64", head(0, 1).str(AlignmentKey).u32(uint32(ValueUint64)).u64(32).b, "has type uint64, must be uint32"},
	{"alignment string", head(0, 1).str(AlignmentKey).u32(uint32(ValueString)).str("32").b, "has type string, must be uint32"},
	{"alignment array", head(0, 1).str(AlignmentKey).u32(uint32(ValueArray)).u32(uint32(ValueUint32)).u64(1).u32(32).b,
		"has type array of uint32, must be uint32"},
	{"duplicate tensor", head(2, 0).tensor("w", []int64{1}, TypeF32, 0).tensor("w", []int64{1}, TypeF32, 32).data(32, 36),
		`duplicate tensor name "w"`},
	{"tensor name 64 bytes", oneTensor(long64, []int64{1}, TypeF32, 0, 4), "name of tensor 0 length is 64, more than the maximum 63"},
	{"empty tensor name", oneTensor("", []int64{1}, TypeF32, 0, 4), "tensor 0: empty tensor name"},
	{"tensor name with NUL", oneTensor("a\x00b", []int64{1}, TypeF32, 0, 4), "name contains a NUL byte"},
	{"n_dims 0", oneTensor("w", []int64{}, TypeF32, 0, 4), `tensor "w": 0 dimensions, must be 1 to 4`},
	{"n_dims 5", oneTensor("w", []int64{1, 1, 1, 1, 1}, TypeF32, 0, 4), `tensor "w": 5 dimensions`},
	{"huge n_dims", head(1, 0).str("w").u32(math.MaxUint32).raw(make([]byte, 40)...).b, "4294967295 dimensions"},
	{"negative ne", oneTensor("w", []int64{4, -1}, TypeF32, 0, 4), `tensor "w": dimension 1 has -1 elements, must not be negative`},
	{"negative ne0", oneTensor("w", []int64{math.MinInt64}, TypeF32, 0, 4), "dimension 0 has -9223372036854775808 elements"},
	{"zero ne1", oneTensor("w", []int64{4, 0}, TypeF32, 0, 4), "dimension 1 has 0 elements, ggml requires at least 1"},
	{"zero ne3", oneTensor("w", []int64{4, 1, 1, 0}, TypeF32, 0, 4), "dimension 3 has 0 elements"},
	{"element count overflow", oneTensor("w", []int64{1 << 32, 1 << 31}, TypeI8, 0, 4), "has too many elements"},
	{"element count overflow 4d", oneTensor("w", []int64{1 << 16, 1 << 16, 1 << 16, 1 << 15}, TypeI8, 0, 4), "has too many elements"},
	{"size overflow", oneTensor("w", []int64{1 << 61, 2}, TypeF64, 0, 4), "too large"},
	{"ne0 not multiple of block", oneTensor("w", []int64{33}, TypeQ4_0, 0, 36), "type q4_0 needs a multiple of 32 elements per row, has 33"},
	{"k-quant row of 32", oneTensor("w", []int64{32}, TypeQ4_K, 0, 144), "type q4_K needs a multiple of 256"},
	{"removed type 4", oneTensor("w", []int64{32}, 4, 0, 36), `tensor "w": type 4 (q4_2) is no longer supported`},
	{"removed type 31", oneTensor("w", []int64{32}, 31, 0, 36), "type 31 (q4_0_4_4) is no longer supported"},
	{"removed type 38", oneTensor("w", []int64{32}, 38, 0, 36), "type 38 (iq4_nl_8_8)"},
	{"type 40", oneTensor("w", []int64{32}, 40, 0, 36), "unknown ggml type 40"},
	{"type -1", oneTensor("w", []int64{32}, math.MaxUint32, 0, 36), "unknown ggml type 4294967295"},
	{"misaligned offset", oneTensor("w", []int64{1}, TypeF32, 4, 36), `tensor "w": offset 4 is not a multiple of the alignment 32`},
	{"gap before tensor", oneTensor("w", []int64{1}, TypeF32, 32, 64), `tensor "w": offset 32, expected 0`},
	{"tensors out of order", head(2, 0).tensor("a", []int64{1}, TypeF32, 32).tensor("b", []int64{1}, TypeF32, 0).data(32, 64),
		`tensor "a": offset 32, expected 0`},
	{"overlapping tensors", head(2, 0).tensor("a", []int64{16}, TypeF32, 0).tensor("b", []int64{1}, TypeF32, 32).data(32, 96),
		`tensor "b": offset 32, expected 64`},
	{"data past EOF", oneTensor("blk.0.attn_q.weight", []int64{4, 4}, TypeF32, 0, 63),
		`tensor "blk.0.attn_q.weight": data [96, 160) runs past end of file (159 bytes)`},
	{"huge tensor past EOF", oneTensor("w", []int64{1 << 40, 1 << 20}, TypeF32, 0, 4), "data [96, 4611686018427388000) runs past end of file"},
	{"misaligned with alignment 64", head(1, 1).kvU32(AlignmentKey, 64).tensor("w", []int64{1}, TypeF32, 32).data(64, 100),
		"offset 32 is not a multiple of the alignment 64"},
	{"header only, truncated tensor info", head(1, 0).str("w").u32(2).i64(1).i64(1).u32(0).b,
		`file ends while reading tensor "w": offset`},
}

func TestBadFiles(t *testing.T) {
	for _, c := range badFiles {
		t.Run(c.name, func(t *testing.T) {
			f, err := readBytes(c.data)
			require.Error(t, err, "accepted: %+v", f)
			assert.Nil(t, f)
			assert.Contains(t, err.Error(), c.want)
			assert.True(t, strings.HasPrefix(err.Error(), "gguf: "), err.Error())
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Nil(t, e.Err)
			assert.LessOrEqual(t, e.Offset, int64(len(c.data)))
		})
	}
}

// TestGoodRaw checks hand-made files that are valid, to show the bad ones
// above fail for the stated reason only.
func TestGoodRaw(t *testing.T) {
	longKey := strings.Repeat("k", MaxKeyLen)
	_, err := readBytes(head(0, 1).str(longKey + "k").u32(0).raw(1).b)
	assert.ErrorContains(t, err, "key 0 length is 65536, more than the maximum 65535")

	good := [][]byte{
		head(0, 0).b,
		head(0, 1).kvU32(AlignmentKey, 1).b,
		head(0, 1).kvU32(AlignmentKey, 1<<31).b,
		oneTensor("w", []int64{1}, TypeF32, 0, 4),
		oneTensor(long64[:63], []int64{1}, TypeF32, 0, 4),
		oneTensor("w", []int64{0}, TypeF32, 0, 0),
		oneTensor("w", []int64{0, 1 << 62, 1}, TypeQ4_0, 0, 0),
		oneTensor("w", []int64{4, 4}, TypeF32, 0, 64),
		oneTensor("w", []int64{32}, TypeQ4_0, 0, 18),
		oneTensor("w", []int64{1, 1, 1, 1}, TypeI64, 0, 8),
		head(2, 0).tensor("a", []int64{16}, TypeF32, 0).tensor("b", []int64{1}, TypeF32, 64).data(32, 68),
		head(1, 1).kvU32(AlignmentKey, 64).tensor("w", []int64{1}, TypeF32, 0).data(64, 4),
		head(0, 1).str("k").u32(uint32(ValueArray)).u32(uint32(ValueString)).u64(2).str("a").str("").b,
		head(0, 1).str(longKey).u32(0).raw(1).b,
	}
	for i, b := range good {
		_, err := readBytes(b)
		assert.NoError(t, err, "file %d", i)
	}
}

// TestTruncated reads every prefix of a valid file: each one that cuts
// into the header or the tensor data must fail, none may panic.
func TestTruncated(t *testing.T) {
	b := buildFile(t, allValues, someTensors[:4])
	f, err := readBytes(b)
	require.NoError(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	dataEnd := f.DataOffset + int64(last.Offset) + last.Size
	for n := 0; n <= len(b); n++ {
		g, err := readBytes(b[:n])
		if int64(n) < dataEnd {
			require.Error(t, err, "prefix of %d bytes accepted", n)
			assert.Nil(t, g)
		} else {
			require.NoError(t, err, "prefix of %d bytes", n)
			assert.Equal(t, f, g)
		}
	}
	// A reader whose data ends before the size it claims.
	_, err = Read(bytes.NewReader(b[:100]), int64(len(b)))
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.NotNil(t, e.Err)
}

// TestErrorOffsets checks that errors point at the offending field.
func TestErrorOffsets(t *testing.T) {
	b := head(0, 2).kvU32("a", 1).str("b").u32(77).b
	_, err := readBytes(b)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, int64(24+8+1+4+4+8+1), e.Offset)
	assert.Equal(t, `gguf: offset 50: key "b": unknown value type 77`, err.Error())
}

// TestRoundTripRead re-encodes a file read from bytes and compares.
func TestRoundTripRead(t *testing.T) {
	b := buildFile(t, append([]KV{{AlignmentKey, uint32(64)}}, allValues...), someTensors)
	f, err := readBytes(b)
	require.NoError(t, err)
	b2 := reencode(t, f, b)
	assert.Equal(t, b, b2)
}

// reencode writes f again with Writer, its data taken from b.
func reencode(t testing.TB, f *File, b []byte) []byte {
	var w Writer
	for _, kv := range f.KVs {
		require.NoError(t, w.AddKV(kv.Key, kv.Value))
	}
	for _, ti := range f.Tensors {
		start := f.DataOffset + int64(ti.Offset)
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Shape(), b[start:start+ti.Size]))
	}
	var buf bytes.Buffer
	_, err := w.WriteTo(&buf)
	require.NoError(t, err)
	return buf.Bytes()
}

// sameFile compares two Files, floats bit for bit (NaN == NaN).
func sameFile(a, b *File) bool {
	if a.Version != b.Version || a.Alignment != b.Alignment || a.DataOffset != b.DataOffset ||
		len(a.KVs) != len(b.KVs) || !reflect.DeepEqual(a.Tensors, b.Tensors) {
		return false
	}
	for i := range a.KVs {
		if a.KVs[i].Key != b.KVs[i].Key || !bytes.Equal(appendValue(nil, a.KVs[i].Value), appendValue(nil, b.KVs[i].Value)) {
			return false
		}
		ta, _ := a.KVs[i].Type()
		tb, _ := b.KVs[i].Type()
		ea, _ := a.KVs[i].ElemType()
		eb, _ := b.KVs[i].ElemType()
		if ta != tb || ea != eb {
			return false
		}
	}
	return true
}

func TestErrorType(t *testing.T) {
	e := &Error{Path: "m.gguf", Offset: -1, Msg: "x", Err: errors.New("boom")}
	assert.Equal(t, "gguf: m.gguf: x: boom", e.Error())
	assert.Equal(t, "boom", errors.Unwrap(e).Error())
	assert.Equal(t, "uint32", ValueUint32.String())
	assert.Equal(t, "ValueType(13)", ValueType(13).String())
}

func TestLongValues(t *testing.T) {
	long := strings.Repeat("0123456789", 30000) // more than one read chunk
	bools := make([]bool, 3*chunkSize+5)
	bools[len(bools)-1] = true
	u16 := make([]uint16, chunkSize+3)
	u16[chunkSize+2] = 7
	kvs := []KV{{"long", long}, {"longs", []string{long, "x", long}}, {"bools", bools}, {"u16", u16}}
	f, err := readBytes(buildFile(t, kvs, nil))
	require.NoError(t, err)
	assert.Equal(t, kvs, f.KVs)

	b := buildFile(t, []KV{{"bools", bools}}, nil)
	elems := 24 + 8 + len("bools") + 4 + 4 + 8
	b[elems+len(bools)-1] = 3
	_, err = readBytes(b)
	assert.ErrorContains(t, err, `key "bools": element 196612: bool value is 3`)
	assert.ErrorContains(t, err, "offset 196665: ")
}

// TestShortTensorCount: a header whose tensor count is short by one or more is refused with
// the name of the first tensor it leaves out, whatever the alignment; bytes appended after a
// valid file are not taken for a tensor.
func TestShortTensorCount(t *testing.T) {
	for _, align := range []uint32{1, 32, 64, 256} {
		b := buildFile(t, []KV{{AlignmentKey, align}, {"general.name", "short"}}, someTensors)
		n := len(someTensors)
		for short := 1; short <= n; short++ {
			cut := append([]byte(nil), b...)
			binary.LittleEndian.PutUint64(cut[8:], uint64(n-short))
			_, err := readBytes(cut)
			require.Error(t, err, "alignment %d, %d short", align, short)
			assert.ErrorContains(t, err, fmt.Sprintf("the header counts %d tensors", n-short))
			assert.ErrorContains(t, err, fmt.Sprintf("tensor %q", someTensors[n-short].name))
			if short > 1 {
				assert.ErrorContains(t, err, fmt.Sprintf("and %d more follow them", short-1))
			}
		}
		junk := append(append([]byte(nil), b...), bytes.Repeat([]byte{0xa5}, 100)...)
		f, err := readBytes(junk)
		require.NoError(t, err)
		assert.Len(t, f.Tensors, n)
	}
}
