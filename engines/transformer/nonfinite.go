package transformer

import (
	"encoding/binary"
	"math"

	"github.com/toyml/toy/ggml"
)

// Finite reports whether v is neither NaN nor infinite.
func Finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// NonFiniteRaw is the index of the first NaN or infinity among raw values of type typ (f32,
// f16 or bf16, little-endian; an exponent of all ones), or -1; other types are not looked at.
func NonFiniteRaw(typ ggml.Type, raw []byte) int {
	switch typ {
	case ggml.F32:
		for i := 0; i+4 <= len(raw); i += 4 {
			if binary.LittleEndian.Uint32(raw[i:])&0x7f800000 == 0x7f800000 {
				return i / 4
			}
		}
	case ggml.F16, ggml.BF16:
		mask := uint16(0x7c00)
		if typ == ggml.BF16 {
			mask = 0x7f80
		}
		for i := 0; i+2 <= len(raw); i += 2 {
			if binary.LittleEndian.Uint16(raw[i:])&mask == mask {
				return i / 2
			}
		}
	}
	return -1
}
