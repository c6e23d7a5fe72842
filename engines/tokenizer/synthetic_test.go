package tokenizer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSynthetic(t *testing.T) {
	for _, n := range []int{256, 300, 1000, 49152} {
		tok, err := Synthetic(n)
		require.NoError(t, err, n)
		assert.Equal(t, n, tok.VocabSize())
		assert.EqualValues(t, -1, tok.EOS())
		text := "hello world, the quick brown fox\n"
		ids := tok.Encode(text, EncodeOptions{})
		got, err := tok.Decode(ids, DecodeOptions{})
		require.NoError(t, err)
		assert.Equal(t, text, got, n)
		if n == 256 {
			assert.Len(t, ids, len(text), "bytes only")
		}
		if n == 49152 {
			// 256 bytes, then 27² two-character strings, then three-character ones.
			for id, want := range map[int32]string{256: "aa", 256 + 27 + 1: "bb", 256 + 27*27 + (7*27+4)*27 + 11: "hel"} {
				got, err := tok.Piece(id, DecodeOptions{})
				require.NoError(t, err)
				assert.Equal(t, want, got, id)
			}
			assert.Equal(t, []int32{256 + 7*27 + 4}, tok.Encode("he", EncodeOptions{}))
		}
	}
	_, err := Synthetic(255)
	assert.Error(t, err)
}
