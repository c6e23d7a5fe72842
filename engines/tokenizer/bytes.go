package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteRune maps each byte to the rune that stands for it in token strings;
// runeByte is the reverse for runes below 512 (-1 where none).
var (
	byteRune   [256]rune
	byteRuneS  [256]string
	runeByte   [512]int16
	byteRuneSz [256]uint8
)

func init() {
	for i := range runeByte {
		runeByte[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		var r rune
		if printableByte(b) {
			r = rune(b)
		} else {
			r = rune(256 + n)
			n++
		}
		byteRune[b] = r
		byteRuneS[b] = string(r)
		byteRuneSz[b] = uint8(utf8.RuneLen(r))
		runeByte[r] = int16(b)
	}
}

// printableByte reports whether GPT-2's byte-level mapping keeps byte b as
// the rune of the same value.
func printableByte(b int) bool {
	return ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF)
}

// MapBytes returns the byte-level form of raw: each byte replaced by the rune
// GPT-2 maps it to. Normal tokens and merges are stored in this form.
func MapBytes(raw string) string {
	n := 0
	for i := 0; i < len(raw); i++ {
		n += int(byteRuneSz[raw[i]])
	}
	var sb strings.Builder
	sb.Grow(n)
	for i := 0; i < len(raw); i++ {
		sb.WriteString(byteRuneS[raw[i]])
	}
	return sb.String()
}

// UnmapBytes reverses MapBytes. It returns false if s holds a rune that no
// byte maps to (or invalid UTF-8).
func UnmapBytes(s string) (string, bool) {
	buf := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r >= rune(len(runeByte)) || runeByte[r] < 0 || (r == utf8.RuneError && size == 1) {
			return "", false
		}
		buf = append(buf, byte(runeByte[r]))
		i += size
	}
	return string(buf), true
}
