package decoding

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/toyml/toy/ggml"
)

// BaseFingerprintKey is the metadata key of an adapter toy finetune wrote that holds the
// fingerprint of the base it was trained on (ModelFingerprint), beside toy.finetune.base (its
// file name).
const BaseFingerprintKey = "toy.finetune.base_fingerprint"

// fingerprintSpan is how much of each end of a tensor's data a fingerprint reads.
const fingerprintSpan = 4 << 10

// ModelFingerprint identifies the weights of the GGUF model at path without reading them all:
// the SHA-256 (its first 16 bytes, in hex) of every tensor's name, type and shape and of the
// first and last 4 KiB of its data, in file order. Two models of the same shapes trained apart
// (or the same model fine-tuned) differ in it; the same file copied or renamed does not. It
// reads a few pages a tensor, where the file's SHA-256 reads gigabytes.
func ModelFingerprint(path string) (string, error) {
	g, err := ggml.OpenGGUF(path)
	if err != nil {
		return "", err
	}
	defer g.Close()
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	h := sha256.New()
	buf := make([]byte, 2*fingerprintSpan)
	for _, t := range g.Tensors() {
		fmt.Fprintf(h, "%s\x00%d", t.Name, t.Type)
		binary.Write(h, binary.LittleEndian, t.Ne)
		spans := [][2]int64{{t.Offset, min(t.Size, fingerprintSpan)}}
		if t.Size > fingerprintSpan {
			n := min(t.Size-fingerprintSpan, fingerprintSpan)
			spans = append(spans, [2]int64{t.Offset + t.Size - n, n})
		}
		for _, s := range spans {
			b := buf[:s[1]]
			if _, err := fh.ReadAt(b, s[0]); err != nil {
				return "", fmt.Errorf("fingerprint %s: tensor %q: %w", path, t.Name, err)
			}
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}
