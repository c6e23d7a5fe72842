package tokenizer

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
)

// Fingerprint identifies the tokenizer: the SHA-256 of everything that decides its token ids
// and special tokens, as GGUF stores it (the model, the pre-tokenizer, the tokens, their types
// and scores, the merges, the special ids and flags). Two tokenizers with the same fingerprint
// turn any text into the same ids; a token corpus records the fingerprint of the one that made
// it, so that it is not trained with another.
func (t *Tokenizer) Fingerprint() [32]byte {
	h := sha256.New()
	var n [8]byte
	str := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	for _, kv := range t.GGUF() {
		str(kv.Key)
		switch v := kv.Value.(type) {
		case string:
			str(v)
		case []string:
			binary.LittleEndian.PutUint64(n[:], uint64(len(v)))
			h.Write(n[:])
			for _, s := range v {
				str(s)
			}
		case []int32:
			binary.Write(h, binary.LittleEndian, uint64(len(v)))
			binary.Write(h, binary.LittleEndian, v)
		case []float32:
			binary.Write(h, binary.LittleEndian, uint64(len(v)))
			for _, f := range v {
				binary.Write(h, binary.LittleEndian, math.Float32bits(f))
			}
		case uint32:
			binary.Write(h, binary.LittleEndian, v)
		case bool:
			binary.Write(h, binary.LittleEndian, v)
		default:
			str(fmt.Sprintf("%T %v", v, v))
		}
	}
	var fp [32]byte
	copy(fp[:], h.Sum(nil))
	return fp
}
