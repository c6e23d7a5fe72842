package data

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeTokenized writes ids into a VersionFingerprint corpus with fingerprint fp.
func writeTokenized(t testing.TB, dir string, width, vocab int, fp [FingerprintSize]byte, ids []int32) string {
	path := filepath.Join(dir, "fp.tok")
	w, err := NewTokenizedWriter(path, width, vocab, fp)
	require.NoError(t, err)
	require.NoError(t, w.Write(ids))
	require.NoError(t, w.Close())
	return path
}

// TestCorpusFingerprint: a corpus NewTokenizedWriter writes is version 2, with the fingerprint
// after the first header's fields and the ids after it; Open reads it back with its
// fingerprint and its ids, reads version 1 corpora (no fingerprint) as before, and refuses a
// version 2 file too short for its header.
func TestCorpusFingerprint(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 9))
	var fp [FingerprintSize]byte
	for i := range fp {
		fp[i] = byte(rng.Uint32())
	}
	for _, width := range []int{2, 4} {
		ids := seq(70_001, 3000)
		path := writeTokenized(t, t.TempDir(), width, 3000, fp, ids)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.Len(t, b, HeaderSizeFingerprint+len(ids)*width)
		assert.Equal(t, Magic, string(b[:8]))
		assert.EqualValues(t, VersionFingerprint, binary.LittleEndian.Uint32(b[8:]))
		assert.EqualValues(t, width, binary.LittleEndian.Uint32(b[12:]))
		assert.EqualValues(t, 3000, binary.LittleEndian.Uint32(b[16:]))
		assert.EqualValues(t, len(ids), binary.LittleEndian.Uint64(b[20:]))
		assert.Equal(t, fp[:], b[28:60])
		c, err := Open(path)
		require.NoError(t, err)
		got, ok := c.Fingerprint()
		assert.True(t, ok)
		assert.Equal(t, fp, got)
		all := make([]int32, len(ids))
		_, err = c.ReadAt(all, 0)
		require.NoError(t, err)
		assert.Equal(t, ids, all)
		win, err := c.Window(123, 45)
		require.NoError(t, err)
		assert.Equal(t, ids[123:168], win)
		c.Close()
	}
	c, err := Open(writeCorpus(t, 2, 300, seq(100, 300), 7))
	require.NoError(t, err)
	_, ok := c.Fingerprint()
	assert.False(t, ok, "a version 1 corpus records no fingerprint")
	c.Close()

	short := filepath.Join(t.TempDir(), "short.tok")
	b, err := os.ReadFile(writeTokenized(t, t.TempDir(), 2, 10, fp, nil))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(short, b[:40], 0o644))
	_, err = Open(short)
	assert.ErrorContains(t, err, "shorter than the 60-byte header of version 2")
}

// FuzzOpenCorpus: Open takes any file without panicking; a corpus it accepts has exactly the
// size its header says, and its tokens read back whole or with an error (an id outside the
// vocabulary). The seeds are corpora of both versions.
func FuzzOpenCorpus(f *testing.F) {
	dir := f.TempDir()
	for _, width := range []int{2, 4} {
		b, err := os.ReadFile(writeTokenized(f, dir, width, 50, [FingerprintSize]byte{1, 2, 3}, seq(40, 50)))
		require.NoError(f, err)
		f.Add(b)
		v1 := filepath.Join(dir, "v1.tok")
		w, err := NewWriter(v1, width, 50)
		require.NoError(f, err)
		require.NoError(f, w.Write(seq(17, 50)))
		require.NoError(f, w.Close())
		if b, err = os.ReadFile(v1); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "c.tok")
		require.NoError(t, os.WriteFile(path, b, 0o644))
		c, err := Open(path)
		if err != nil {
			return
		}
		defer c.Close()
		header := int64(HeaderSize)
		if _, ok := c.Fingerprint(); ok {
			header = HeaderSizeFingerprint
		}
		require.Equal(t, int64(len(b)), header+c.Len()*int64(c.Width()))
		ids := make([]int32, min(c.Len(), 1<<16))
		n, err := c.ReadAt(ids, 0)
		if err == nil {
			for _, id := range ids[:n] {
				require.Less(t, int(id), c.Vocab())
			}
		}
	})
}
