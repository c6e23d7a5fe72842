package reference

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ---- IEEE half precision (GGML_TYPE_F16) ----

// F32ToF16 converts f to IEEE binary16 bits with round-to-nearest-even, as
// ggml's portable ggml_compute_fp32_to_fp16: values from 65520 up overflow to
// ±Inf, magnitudes below 2^-25 flush to ±0, results between are normal or
// subnormal halves; every NaN becomes the quiet NaN 0x7E00 with f's sign bit.
// (ggml builds using the F16C instruction instead keep NaN payload bits; the
// results agree on all non-NaN inputs.)
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	if exp == 0 {
		return sign // float32 subnormals are far below half's smallest subnormal
	}
	e := exp - 127 // unbiased exponent; value = 1.mant * 2^e
	if e > 15 {
		return sign | 0x7c00
	}
	if e >= -14 { // normal half: keep 10 of 23 mantissa bits
		h := uint32(e+15)<<10 | mant>>13
		rem := mant & 0x1fff
		if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
			h++ // may carry into the exponent, up to 0x7c00 = Inf: both correct
		}
		return sign | uint16(h)
	}
	// Subnormal half: value / 2^-24 = (mant|1<<23) * 2^(e+1).
	m := mant | 0x800000
	shift := uint(-(e + 1)) // >= 14
	if shift > 24 {
		return sign // below half of the smallest subnormal
	}
	h := m >> shift
	rem := m & (1<<shift - 1)
	halfway := uint32(1) << (shift - 1)
	if rem > halfway || (rem == halfway && h&1 == 1) {
		h++ // may become 0x400, the smallest normal: correct
	}
	return sign | uint16(h)
}

// F16ToF32 converts IEEE binary16 bits to float32 exactly (every half is a
// float32), including subnormals and infinities, bit-identical to
// ggml_compute_fp16_to_fp32: a NaN keeps its sign and payload and comes out
// quiet (bit 22 set), because ggml's conversion passes it through a float
// multiply.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f && mant != 0:
		return math.Float32frombits(sign | 0x7fc00000 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	}
	v := float32(mant) * (1.0 / (1 << 24)) // subnormal (or zero): mant * 2^-24, exact
	return math.Float32frombits(sign | math.Float32bits(v))
}

// RoundF16 rounds x to float32 and then to half precision and back: the value
// an F16 tensor stores for x. Use it with Tensor.Map.
func RoundF16(x float64) float64 { return float64(F16ToF32(F32ToF16(float32(x)))) }

// ---- bfloat16 (GGML_TYPE_BF16) ----

// F32ToBF16 converts f to bfloat16 bits as ggml_compute_fp32_to_bf16: the top
// 16 bits of f rounded to nearest even (so large finite values may round to
// ±Inf and subnormals are kept, not flushed); a NaN keeps its top bits with
// the quiet bit (0x40) forced on.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// BF16ToF32 converts bfloat16 bits to float32 exactly (a 16-bit shift).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// RoundBF16 is the value a BF16 tensor stores for x (via float32).
func RoundBF16(x float64) float64 { return float64(BF16ToF32(F32ToBF16(float32(x)))) }

// RoundF32 is the value an F32 tensor stores for x.
func RoundF32(x float64) float64 { return float64(float32(x)) }

// ---- Q8_0 and Q4_0 blocks (ggml-common.h) ----

// Block geometry of ggml's Q8_0 and Q4_0 types.
const (
	QK8_0        = 32          // values per block_q8_0
	BlockQ8_0Len = 2 + QK8_0   // bytes per block_q8_0: fp16 d, then 32 int8 qs
	QK4_0        = 32          // values per block_q4_0
	BlockQ4_0Len = 2 + QK4_0/2 // bytes per block_q4_0: fp16 d, then 16 bytes of nibbles
)

func checkBlocks(fn string, n, qk int) {
	if n%qk != 0 {
		panic(fmt.Sprintf("reference.%s: %d values is not a multiple of the block size %d", fn, n, qk))
	}
}

func checkBytes(fn string, n, blockLen int) {
	if n%blockLen != 0 {
		panic(fmt.Sprintf("reference.%s: %d bytes is not a multiple of the block size %d", fn, n, blockLen))
	}
}

// QuantizeQ8_0 quantizes x (len a multiple of 32) into ggml's block_q8_0
// layout, bit-identical to quantize_row_q8_0_ref: per block of 32,
// amax = max|x|, d = amax/127 (float32), q = roundf(x * (1/d)) (half away from
// zero; q = 0 when d == 0), stored as the little-endian fp16 bits of d followed
// by the 32 int8 values.
//
// Caveat: ggml_quantize_chunk uses this reference quantizer, but the CPU
// backend's own Q8_0 conversion (e.g. of a matmul's src1, or ggml_cpy to Q8_0)
// may use a SIMD path that rounds exact .5 ties to even.
func QuantizeQ8_0(x []float32) []byte {
	checkBlocks("QuantizeQ8_0", len(x), QK8_0)
	out := make([]byte, len(x)/QK8_0*BlockQ8_0Len)
	for b := 0; b < len(x)/QK8_0; b++ {
		xs := x[b*QK8_0 : (b+1)*QK8_0]
		blk := out[b*BlockQ8_0Len : (b+1)*BlockQ8_0Len]
		amax := float32(0)
		for _, v := range xs {
			if av := float32(math.Abs(float64(v))); !(amax > av) {
				amax = av
			}
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j, v := range xs {
			blk[2+j] = byte(int8(math.Round(float64(float32(v * id)))))
		}
	}
	return out
}

// DequantizeQ8_0 expands block_q8_0 data (len a multiple of 34) as
// dequantize_row_q8_0: y = q * d in float32, d being the block's fp16 scale.
func DequantizeQ8_0(data []byte) []float32 {
	checkBytes("DequantizeQ8_0", len(data), BlockQ8_0Len)
	nb := len(data) / BlockQ8_0Len
	out := make([]float32, nb*QK8_0)
	for b := 0; b < nb; b++ {
		blk := data[b*BlockQ8_0Len : (b+1)*BlockQ8_0Len]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < QK8_0; j++ {
			out[b*QK8_0+j] = float32(int8(blk[2+j])) * d
		}
	}
	return out
}

// QuantizeQ4_0 quantizes x (len a multiple of 32) into ggml's block_q4_0
// layout, bit-identical to quantize_row_q4_0_ref: per block of 32, max is the
// first element of largest magnitude (with its sign), d = max / -8 (float32),
// and value j becomes q = min(15, trunc(x_j*(1/d) + 8.5)) in [0, 15] (0 where
// d == 0 gives 8). Byte j (0 <= j < 16) holds q_j in its low nibble and
// q_{j+16} in its high nibble; the block is the little-endian fp16 bits of d
// followed by those 16 bytes.
func QuantizeQ4_0(x []float32) []byte {
	checkBlocks("QuantizeQ4_0", len(x), QK4_0)
	out := make([]byte, len(x)/QK4_0*BlockQ4_0Len)
	for b := 0; b < len(x)/QK4_0; b++ {
		xs := x[b*QK4_0 : (b+1)*QK4_0]
		blk := out[b*BlockQ4_0Len : (b+1)*BlockQ4_0Len]
		amax, maxv := float32(0), float32(0)
		for _, v := range xs {
			if av := float32(math.Abs(float64(v))); amax < av {
				amax, maxv = av, v
			}
		}
		d := maxv / -8
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		q := func(v float32) byte {
			t := int8(float32(float32(v*id) + 8.5)) // C's (int8_t) truncates toward zero
			if t > 15 {
				t = 15
			}
			return byte(t)
		}
		for j := 0; j < QK4_0/2; j++ {
			blk[2+j] = q(xs[j]) | q(xs[j+QK4_0/2])<<4
		}
	}
	return out
}

// DequantizeQ4_0 expands block_q4_0 data (len a multiple of 18) as
// dequantize_row_q4_0: value j = (low nibble of byte j - 8) * d and value
// j+16 = (high nibble of byte j - 8) * d, in float32.
func DequantizeQ4_0(data []byte) []float32 {
	checkBytes("DequantizeQ4_0", len(data), BlockQ4_0Len)
	nb := len(data) / BlockQ4_0Len
	out := make([]float32, nb*QK4_0)
	for b := 0; b < nb; b++ {
		blk := data[b*BlockQ4_0Len : (b+1)*BlockQ4_0Len]
		d := F16ToF32(binary.LittleEndian.Uint16(blk))
		for j := 0; j < QK4_0/2; j++ {
			out[b*QK4_0+j] = float32(int(blk[2+j]&0x0f)-8) * d
			out[b*QK4_0+j+QK4_0/2] = float32(int(blk[2+j]>>4)-8) * d
		}
	}
	return out
}
