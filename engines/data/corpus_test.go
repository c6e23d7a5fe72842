package data

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeCorpus writes ids, in batches of the given size, to a new corpus in a temp dir.
func writeCorpus(t *testing.T, width, vocab int, ids []int32, batch int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.toks")
	w, err := NewWriter(path, width, vocab)
	require.NoError(t, err)
	for i := 0; i < len(ids); i += batch {
		require.NoError(t, w.Write(ids[i:min(i+batch, len(ids))]))
	}
	require.EqualValues(t, len(ids), w.Count())
	require.NoError(t, w.Close())
	return path
}

func seq(n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i*7919 + 13) % vocab)
	}
	return ids
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct{ width, vocab int }{{2, 65536}, {2, 50}, {4, 1 << 20}, {4, 3}} {
		ids := seq(100_003, tc.vocab) // more than one ReadAt chunk at either width
		path := writeCorpus(t, tc.width, tc.vocab, ids, 997)

		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.EqualValues(t, HeaderSize+len(ids)*tc.width, st.Size())

		c, err := Open(path)
		require.NoError(t, err)
		assert.EqualValues(t, len(ids), c.Len())
		assert.Equal(t, tc.vocab, c.Vocab())
		assert.Equal(t, tc.width, c.Width())

		all := make([]int32, len(ids))
		n, err := c.ReadAt(all, 0)
		require.NoError(t, err)
		assert.Equal(t, len(ids), n)
		assert.Equal(t, ids, all)

		// A read running past the end returns what there is and io.EOF.
		tail := make([]int32, 10)
		n, err = c.ReadAt(tail, int64(len(ids)-4))
		assert.ErrorIs(t, err, io.EOF)
		assert.Equal(t, 4, n)
		assert.Equal(t, ids[len(ids)-4:], tail[:4])

		win, err := c.Window(12345, 77)
		require.NoError(t, err)
		assert.Equal(t, ids[12345:12345+77], win)
		require.NoError(t, c.Close())
	}
}

func TestHeaderBytes(t *testing.T) {
	path := writeCorpus(t, 2, 300, []int32{1, 2, 299}, 10)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, b, HeaderSize+6)
	assert.Equal(t, "TOYTOKS\n", string(b[:8]))
	assert.EqualValues(t, 1, binary.LittleEndian.Uint32(b[8:]))
	assert.EqualValues(t, 2, binary.LittleEndian.Uint32(b[12:]))
	assert.EqualValues(t, 300, binary.LittleEndian.Uint32(b[16:]))
	assert.EqualValues(t, 3, binary.LittleEndian.Uint64(b[20:]))
	assert.Equal(t, []byte{1, 0, 2, 0, 43, 1}, b[28:])
}

func TestEmptyCorpus(t *testing.T) {
	path := writeCorpus(t, 4, 10, nil, 1)
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()
	assert.Zero(t, c.Len())
	n, err := c.ReadAt(make([]int32, 1), 0)
	assert.Zero(t, n)
	assert.ErrorIs(t, err, io.EOF)
	_, err = c.Window(0, 1)
	assert.Error(t, err)
}

func TestWriterRejects(t *testing.T) {
	dir := t.TempDir()
	_, err := NewWriter(filepath.Join(dir, "a"), 3, 10)
	assert.ErrorContains(t, err, "width 3")
	_, err = NewWriter(filepath.Join(dir, "a"), 2, 70000)
	assert.ErrorContains(t, err, "vocab size 70000")
	_, err = NewWriter(filepath.Join(dir, "a"), 4, 0)
	assert.Error(t, err)

	for _, bad := range [][]int32{{1, 10}, {-1}, {0, 5, 11}} {
		path := filepath.Join(dir, "bad.toks")
		w, err := NewWriter(path, 4, 10)
		require.NoError(t, err)
		require.NoError(t, w.Write([]int32{0, 1, 9}))
		assert.ErrorContains(t, w.Write(bad), "outside [0, 10)")
		// The error is sticky and Close commits nothing.
		assert.Error(t, w.Write([]int32{1}))
		assert.Error(t, w.Close())
		assert.NoFileExists(t, path)
	}
	assertNoTemps(t, dir)
}

func TestWriterAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toks")

	// Abandoned (never closed): nothing at path while writing, nothing after Abort.
	w, err := NewWriter(path, 2, 100)
	require.NoError(t, err)
	require.NoError(t, w.Write(seq(1000, 100)))
	assert.NoFileExists(t, path)
	w.Abort()
	assert.NoFileExists(t, path)
	assertNoTemps(t, dir)

	// An existing corpus is replaced only when the new one is complete.
	old := writeCorpus(t, 2, 100, seq(10, 100), 10)
	require.NoError(t, os.Rename(old, path))
	w, err = NewWriter(path, 2, 100)
	require.NoError(t, err)
	require.NoError(t, w.Write(seq(20, 100)))
	c, err := Open(path)
	require.NoError(t, err)
	assert.EqualValues(t, 10, c.Len(), "old corpus intact while the new one is written")
	c.Close()
	require.NoError(t, w.Close())
	assert.Error(t, w.Close(), "second Close")
	c, err = Open(path)
	require.NoError(t, err)
	assert.EqualValues(t, 20, c.Len())
	c.Close()
	assertNoTemps(t, dir)
}

func assertNoTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		assert.False(t, strings.Contains(e.Name(), ".tmp-"), "leftover temp file %s", e.Name())
	}
}

func TestOpenRejects(t *testing.T) {
	good, err := os.ReadFile(writeCorpus(t, 2, 100, seq(50, 100), 50))
	require.NoError(t, err)
	dir := t.TempDir()
	cases := []struct {
		name   string
		edit   func(b []byte) []byte
		expect string
	}{
		{"short", func(b []byte) []byte { return b[:10] }, "shorter than the 28-byte header"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"version", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 2); return b }, "version 2"},
		{"width", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 3); return b }, "width 3"},
		{"vocab0", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 0); return b }, "vocab size 0"},
		{"vocabwide", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 70000); return b }, "vocab size 70000"},
		{"truncated", func(b []byte) []byte { return b[:len(b)-1] }, "truncated or trailing"},
		{"trailing", func(b []byte) []byte { return append(b, 0, 0) }, "truncated or trailing"},
		{"count", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[20:], 51); return b }, "need exactly"},
		{"hugecount", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[20:], 1<<63); return b }, "impossibly large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".toks")
			require.NoError(t, os.WriteFile(path, tc.edit(append([]byte(nil), good...)), 0o644))
			_, err := Open(path)
			require.Error(t, err)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), tc.expect)
		})
	}
	_, err = Open(filepath.Join(dir, "missing"))
	assert.Error(t, err)
}

func TestReadAtCorruptAndBounds(t *testing.T) {
	path := writeCorpus(t, 2, 100, seq(50, 100), 50)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	binary.LittleEndian.PutUint16(b[HeaderSize+2*7:], 100) // token 7 := vocab
	require.NoError(t, os.WriteFile(path, b, 0o644))
	c, err := Open(path)
	require.NoError(t, err)
	defer c.Close()
	dst := make([]int32, 10)
	n, err := c.ReadAt(dst, 0)
	assert.Equal(t, 7, n)
	assert.ErrorContains(t, err, "token 7 is 100")
	_, err = c.ReadAt(dst, -1)
	assert.Error(t, err)
	_, err = c.ReadAt(dst, 51)
	assert.Error(t, err)
	_, err = c.Window(45, 6)
	assert.Error(t, err)
	_, err = c.Window(-1, 1)
	assert.Error(t, err)
	w, err := c.Window(40, 0)
	assert.NoError(t, err)
	assert.Empty(t, w)
}
