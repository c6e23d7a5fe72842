package reference

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestF16KnownValues(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3C00},
		{-2, 0xC000},
		{0.5, 0x3800},
		{65504, 0x7BFF},                            // largest half
		{65519.996, 0x7BFF},                        // just below the rounding boundary
		{65520, 0x7C00},                            // ties to even: overflows to +Inf
		{1e6, 0x7C00},                              //
		{float32(math.Inf(-1)), 0xFC00},            //
		{0, 0x0000},                                //
		{float32(math.Copysign(0, -1)), 0x8000},    //
		{0x1p-24, 0x0001},                          // smallest subnormal
		{0x1p-14, 0x0400},                          // smallest normal
		{0x1p-14 - 0x1p-24, 0x03FF},                // largest subnormal
		{0x1p-25, 0x0000},                          // tie between 0 and 2^-24: even (0)
		{0x1.8p-25, 0x0001},                        // above the tie
		{0x1.8p-24, 0x0002},                        // tie between 1 and 2 ulps: even (2)
		{0x1p-26, 0x0000},                          //
		{0x1p-30, 0x0000},                          //
		{1e-45, 0x0000},                            // float32 subnormal
		{-0x1p-24, 0x8001},                         //
		{1 + 0x1p-11, 0x3C00},                      // tie: even
		{1 + 3*0x1p-11, 0x3C02},                    // tie: even (up)
		{1 + 0x1p-11 + 0x1p-20, 0x3C01},            // just above the tie
		{0.1, 0x2E66},                              //
		{1.0 / 3, 0x3555},                          //
		{-3.14159265, 0xC248},                      //
		{2047.5, 0x67FF + 1},                       // spacing 1 at 2^10..2^11: tie → even 2048
		{0x1.ffcp-15, 0x0400},                      // rounds up from subnormal into the normal range
		{float32(math.NaN()), 0x7E00},              //
		{math.Float32frombits(0xFF800001), 0xFE00}, // negative signalling NaN → quiet, sign kept
		{math.Float32frombits(0x7FC12345), 0x7E00}, // payload dropped
	}
	for _, c := range cases {
		assert.Equal(t, c.h, F32ToF16(c.f), "F32ToF16(%g = %#08x)", c.f, math.Float32bits(c.f))
	}
}

func TestF16ToF32KnownValues(t *testing.T) {
	assert.Equal(t, float32(1), F16ToF32(0x3C00))
	assert.Equal(t, float32(-2), F16ToF32(0xC000))
	assert.Equal(t, float32(65504), F16ToF32(0x7BFF))
	assert.Equal(t, float32(0x1p-24), F16ToF32(0x0001))
	assert.Equal(t, float32(1023*0x1p-24), F16ToF32(0x03FF))
	assert.Equal(t, float32(0x1p-14), F16ToF32(0x0400))
	assert.Equal(t, float32(-0x1p-24), F16ToF32(0x8001))
	assert.True(t, math.IsInf(float64(F16ToF32(0x7C00)), 1))
	assert.True(t, math.IsInf(float64(F16ToF32(0xFC00)), -1))
	assert.True(t, math.IsNaN(float64(F16ToF32(0x7E00))))
	assert.Equal(t, uint32(0x7FC02000), math.Float32bits(F16ToF32(0x7C01)), "NaN comes out quiet, payload kept")
	assert.Equal(t, uint32(0xFFFFE000), math.Float32bits(F16ToF32(0xFFFF)))
	negZero := F16ToF32(0x8000)
	assert.True(t, negZero == 0 && math.Signbit(float64(negZero)))
	assert.Equal(t, float32(0.0999755859375), F16ToF32(0x2E66))
}

func TestF16Exhaustive(t *testing.T) {
	// Every non-NaN half survives a round trip.
	for h := 0; h < 1<<16; h++ {
		f := F16ToF32(uint16(h))
		if math.IsNaN(float64(f)) {
			assert.Equal(t, uint16(h&0x8000|0x7E00), F32ToF16(f))
			continue
		}
		require.Equal(t, uint16(h), F32ToF16(f), "round trip of %#04x (%g)", h, f)
	}
	// Between consecutive positive halves: the midpoint goes to the even one,
	// the float32 values just around it go to the nearer one (including the
	// step from 65504 to Inf, whose "midpoint" is 65520).
	for h := uint16(0); h < 0x7C00; h++ {
		lo := float64(F16ToF32(h))
		var hi float64
		if h+1 == 0x7C00 {
			hi = 65536 // the next value if the exponent range continued
		} else {
			hi = float64(F16ToF32(h + 1))
		}
		mid := float32((lo + hi) / 2)
		require.Equal(t, float64(mid), (lo+hi)/2, "midpoint exact in float32")
		even := h
		if h&1 == 1 {
			even = h + 1
		}
		require.Equal(t, even, F32ToF16(mid), "midpoint above %#04x", h)
		require.Equal(t, h, F32ToF16(math.Nextafter32(mid, 0)), "below midpoint above %#04x", h)
		require.Equal(t, h+1, F32ToF16(math.Nextafter32(mid, float32(math.Inf(1)))), "above midpoint above %#04x", h)
		require.Equal(t, h|0x8000, F32ToF16(-math.Nextafter32(mid, 0)), "negative mirror of %#04x", h)
	}
	assert.Equal(t, 1.0, RoundF16(1.0001))
	assert.Equal(t, 65504.0, RoundF16(65519))
}

func TestBF16(t *testing.T) {
	cases := []struct {
		bits uint32
		h    uint16
	}{
		{0x3F800000, 0x3F80}, // 1
		{0x40400000, 0x4040}, // 3
		{0xC0490FDB, 0xC049}, // -pi (low half 0x0FDB < 0x8000)
		{0x3F808000, 0x3F80}, // tie, even stays
		{0x3F818000, 0x3F82}, // tie, odd rounds up
		{0x3F808001, 0x3F81}, // above the tie
		{0x3F807FFF, 0x3F80}, // below the tie
		{0x7F7FFFFF, 0x7F80}, // FLT_MAX rounds to +Inf
		{0x7F800000, 0x7F80}, // +Inf
		{0xFF800000, 0xFF80}, // -Inf
		{0x00000001, 0x0000}, // subnormal rounds to 0
		{0x00018000, 0x0002}, // subnormal tie, odd → up: kept, not flushed
		{0x7FC00000, 0x7FC0}, // quiet NaN
		{0x7F800001, 0x7FC0}, // signalling NaN: quiet bit forced
		{0xFFA12345, 0xFFE1}, // NaN payload's top bits kept
		{0x80000000, 0x8000}, // -0
	}
	for _, c := range cases {
		assert.Equal(t, c.h, F32ToBF16(math.Float32frombits(c.bits)), "F32ToBF16(%#08x)", c.bits)
	}
	assert.Equal(t, float32(1), BF16ToF32(0x3F80))
	assert.Equal(t, float32(-2), BF16ToF32(0xC000))
	assert.Equal(t, uint32(0x3F810000), math.Float32bits(BF16ToF32(0x3F81)))
	for h := 0; h < 1<<16; h++ {
		f := BF16ToF32(uint16(h))
		if !math.IsNaN(float64(f)) {
			require.Equal(t, uint16(h), F32ToBF16(f))
		}
	}
	assert.Equal(t, 1.0, RoundBF16(1.001))
	assert.Equal(t, 1.0078125, RoundBF16(1.006))
	assert.Equal(t, float64(float32(0.1)), RoundF32(0.1))
}

func TestQ8_0KnownBlock(t *testing.T) {
	x := make([]float32, 64)
	// Block 0: amax = 127, so d = 1 exactly and q = roundf(x) (ties away from zero).
	copy(x, []float32{127, -127, 0.4, 0.6, -0.4, -0.6, 2.5, -2.5, 1.49, -1.51, 100.5, 3})
	// Block 1 is all zeros: d = 0, q = 0.
	b := QuantizeQ8_0(x)
	require.Len(t, b, 2*BlockQ8_0Len)
	assert.Equal(t, []byte{0x00, 0x3C}, b[0:2], "fp16 1.0, little-endian")
	wantQ := []int8{127, -127, 0, 1, 0, -1, 3, -3, 1, -2, 101, 3}
	for j, q := range wantQ {
		assert.Equal(t, q, int8(b[2+j]), "q[%d]", j)
	}
	for j := len(wantQ); j < 32; j++ {
		assert.Equal(t, byte(0), b[2+j])
	}
	assert.Equal(t, make([]byte, BlockQ8_0Len), b[BlockQ8_0Len:])

	y := DequantizeQ8_0(b)
	require.Len(t, y, 64)
	for j, q := range wantQ {
		assert.Equal(t, float32(q), y[j])
	}

	// d = amax/127 in float32, stored as fp16; q = roundf(x/d).
	z := make([]float32, 32)
	z[5] = -3 // amax 3
	z[6] = 1
	bz := QuantizeQ8_0(z)
	d := float32(3) / 127
	assert.Equal(t, F32ToF16(d), binary.LittleEndian.Uint16(bz))
	assert.Equal(t, int8(-127), int8(bz[2+5]))
	assert.Equal(t, int8(42), int8(bz[2+6])) // 127/3 = 42.33
	assert.Panics(t, func() { QuantizeQ8_0(make([]float32, 31)) })
	assert.Panics(t, func() { DequantizeQ8_0(make([]byte, 33)) })
}

func TestQ8_0RoundTripError(t *testing.T) {
	rng := newRNG(100)
	x := make([]float32, 32*50)
	for i := range x {
		x[i] = float32((rng.Float64()*2 - 1) * math.Pow(10, float64(i/32%7)-3))
	}
	y := DequantizeQ8_0(QuantizeQ8_0(x))
	for blk := 0; blk < 50; blk++ {
		amax := 0.0
		for _, v := range x[blk*32 : (blk+1)*32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		d := float64(float32(amax) / 127)
		d16 := float64(F16ToF32(F32ToF16(float32(d))))
		for j := blk * 32; j < (blk+1)*32; j++ {
			// half a step, plus the fp16 error of d (subnormal for tiny blocks) times up to 127 steps.
			assert.InDelta(t, float64(x[j]), float64(y[j]), 0.5*d*1.001+127*math.Abs(d16-d)+1e-12, "element %d", j)
		}
	}
}

func TestQ4_0KnownBlock(t *testing.T) {
	x := make([]float32, 32)
	// max-magnitude element is -8 (first), so d = -8/-8 = 1 and q = min(15, trunc(x + 8.5)).
	copy(x, []float32{-8, 7, 0, 0.49, 0.5, -0.5, -0.51, 7.4, 7.6, -3})
	x[16], x[17], x[31] = 1, -7.9, 6
	b := QuantizeQ4_0(x)
	require.Len(t, b, BlockQ4_0Len)
	assert.Equal(t, []byte{0x00, 0x3C}, b[0:2])
	low := []byte{0, 15, 8, 8, 9, 8, 7, 15, 15, 5, 8, 8, 8, 8, 8, 8}
	high := []byte{9, 0, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 14}
	for j := 0; j < 16; j++ {
		assert.Equal(t, low[j]|high[j]<<4, b[2+j], "byte %d", j)
	}
	y := DequantizeQ4_0(b)
	for j := 0; j < 16; j++ {
		assert.Equal(t, float32(int(low[j])-8), y[j])
		assert.Equal(t, float32(int(high[j])-8), y[j+16])
	}

	// A positive max gives a negative scale: d = 8/-8 = -1, q = trunc(-x + 8.5).
	p := make([]float32, 32)
	p[0], p[1], p[2] = 8, -7, -8
	p[3], p[4] = 4, -4
	bp := QuantizeQ4_0(p)
	assert.Equal(t, []byte{0x00, 0xBC}, bp[0:2], "fp16 -1.0")
	assert.Equal(t, byte(0), bp[2]&0xf)  // 8 → trunc(0.5) = 0
	assert.Equal(t, byte(15), bp[3]&0xf) // -7 → trunc(15.5) = 15
	assert.Equal(t, byte(15), bp[4]&0xf) // -8 → trunc(16.5) = 16, clamped to 15
	assert.Equal(t, byte(4), bp[5]&0xf)  // 4 → trunc(4.5) = 4
	assert.Equal(t, byte(12), bp[6]&0xf) // -4 → 12
	assert.Equal(t, float32(8), DequantizeQ4_0(bp)[0])

	// Ties in magnitude: the first one sets the sign of d.
	q := make([]float32, 32)
	q[0], q[1] = 4, -4
	assert.Equal(t, F32ToF16(-0.5), binary.LittleEndian.Uint16(QuantizeQ4_0(q)))
	q[0], q[1] = -4, 4
	assert.Equal(t, F32ToF16(0.5), binary.LittleEndian.Uint16(QuantizeQ4_0(q)))

	// All zeros: d = -0 and every nibble is 8.
	bz := QuantizeQ4_0(make([]float32, 32))
	assert.Equal(t, []byte{0x00, 0x80}, bz[0:2], "d = 0.0f / -8 = -0.0f")
	for j := 0; j < 16; j++ {
		assert.Equal(t, byte(0x88), bz[2+j])
	}
	assert.Panics(t, func() { QuantizeQ4_0(make([]float32, 16)) })
	assert.Panics(t, func() { DequantizeQ4_0(make([]byte, 17)) })
}

func TestQ4_0RoundTripError(t *testing.T) {
	rng := newRNG(101)
	x := make([]float32, 32*40)
	for i := range x {
		x[i] = float32(rng.Float64()*6 - 3)
	}
	y := DequantizeQ4_0(QuantizeQ4_0(x))
	for blk := 0; blk < 40; blk++ {
		amax := 0.0
		for _, v := range x[blk*32 : (blk+1)*32] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		d := amax / 8
		for j := blk * 32; j < (blk+1)*32; j++ {
			// half a step, except at the clamped top end (q = 16 → 15) where it is a full step.
			assert.InDelta(t, float64(x[j]), float64(y[j]), d*(1+16*0x1p-11)*1.001, "element %d", j)
		}
	}
}
