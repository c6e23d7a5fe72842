package data

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGoRoot builds a small GOROOT-like tree and returns its root and the .go files GoSource
// should take, in order.
func fakeGoRoot(t *testing.T) (string, []string) {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"a/a.go":                 "package a\n",
		"a/a_test.go":            "package a\n\nfunc TestA() {}\n",
		"a/README":               "not go\n",
		"a/testdata/skip.go":     "package skip\n",
		"b/c/deep.go":            "package c\n// deep\n",
		"b/testdata/x/skip.go":   "package x\n",
		"b/notes.go.txt":         "not go either\n",
		"z.go":                   "package z\n",
		"big/big.go":             "package big\n//" + strings.Repeat("x", MaxGoFileSize) + "\n",
		"m/m.go":                 "package m\n",
		"testdatax/included.go":  "package t\n",
		"cmd/vendor/v/v.go":      "package v\n",
		"../outside/outside.go":  "package outside\n", // beside src: not walked
		"runtime/internal/r.go":  "package r\n",
		"runtime/internal/zz.go": "package zz\n",
	}
	for rel, text := range files {
		p := filepath.Join(root, "src", filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
	// Enough files for both parts of the split to be non-empty.
	var want []string
	for i := range 200 {
		rel := fmt.Sprintf("gen/f%03d.go", i)
		p := filepath.Join(root, "src", "gen", fmt.Sprintf("f%03d.go", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("package gen\n"), 0o644))
		want = append(want, rel)
	}
	want = append(want, "a/a.go", "a/a_test.go", "b/c/deep.go", "z.go", "m/m.go",
		"testdatax/included.go", "cmd/vendor/v/v.go", "runtime/internal/r.go", "runtime/internal/zz.go")
	sort.Strings(want) // lexical order of the whole path equals WalkDir order for these names
	return root, want
}

func paths(docs []Document) []string {
	var p []string
	for _, d := range docs {
		p = append(p, d.Path)
	}
	return p
}

func TestGoSourceFakeTree(t *testing.T) {
	root, want := fakeGoRoot(t)
	train, held, err := GoSource(root, 0)
	require.NoError(t, err)

	// Every wanted file exactly once, in the right part, each part in walk order.
	var gotTrain, gotHeld []string
	for _, p := range want {
		if IsHeldOut(p) {
			gotHeld = append(gotHeld, p)
		} else {
			gotTrain = append(gotTrain, p)
		}
	}
	assert.Equal(t, gotTrain, paths(train))
	assert.Equal(t, gotHeld, paths(held))
	assert.NotEmpty(t, held, "about 5%% of 209 files should be held out")
	assert.Less(t, len(held), 30)
	for _, d := range append(train, held...) {
		b, err := os.ReadFile(filepath.Join(root, "src", filepath.FromSlash(d.Path)))
		require.NoError(t, err)
		assert.Equal(t, b, d.Text)
	}

	// Determinism.
	train2, held2, err := GoSource(root, 0)
	require.NoError(t, err)
	assert.Equal(t, train, train2)
	assert.Equal(t, held, held2)
}

func TestGoSourceMaxBytes(t *testing.T) {
	root, _ := fakeGoRoot(t)
	train, held, err := GoSource(root, 0)
	require.NoError(t, err)
	all := map[string]bool{}
	for _, d := range append(train, held...) {
		all[d.Path] = true
	}

	// "gen/fNNN.go" files are 12 bytes each and come after "a/", "b/", "cmd/" in the walk.
	const limit = 500
	tr, ho, err := GoSource(root, limit)
	require.NoError(t, err)
	var total int
	for _, d := range append(tr, ho...) {
		total += len(d.Text)
		assert.True(t, all[d.Path])
	}
	assert.LessOrEqual(t, total, limit)
	assert.Greater(t, total, limit-12, "fills the bound up to less than one small file")
	// The bounded corpus is a sample of the whole tree, not its first directories: it reaches
	// files from more than one top-level directory, in path order.
	dirs := map[string]bool{}
	for _, p := range paths(append(tr, ho...)) {
		dirs[strings.SplitN(p, "/", 2)[0]] = true
	}
	assert.Greater(t, len(dirs), 1, "sampled across directories")
	assert.IsNonDecreasing(t, paths(tr))
	tr2, ho2, err := GoSource(root, limit)
	require.NoError(t, err)
	assert.Equal(t, paths(tr), paths(tr2), "deterministic")
	assert.Equal(t, paths(ho), paths(ho2))

	_, _, err = GoSource(root, -1)
	assert.Error(t, err)
	_, _, err = GoSource(filepath.Join(root, "nope"), 0)
	assert.Error(t, err)
}

func TestIsHeldOutShare(t *testing.T) {
	held := 0
	for i := range 20000 {
		if IsHeldOut(fmt.Sprintf("pkg%d/file%d.go", i%97, i)) {
			held++
		}
	}
	assert.InDelta(t, 1000, held, 150) // 5% of 20000
	assert.Equal(t, IsHeldOut("fmt/print.go"), IsHeldOut("fmt/print.go"))
}

func TestGoRootOverride(t *testing.T) {
	root, _ := fakeGoRoot(t)
	t.Setenv("TOY_GOROOT", root)
	got, err := GoRoot()
	require.NoError(t, err)
	assert.Equal(t, root, got)
	t.Setenv("TOY_GOROOT", t.TempDir()) // no src
	_, err = GoRoot()
	assert.Error(t, err)
}

func TestGoSourceRealGoRoot(t *testing.T) {
	root, err := GoRoot()
	if err != nil {
		t.Skipf("no Go installation: %v", err)
	}
	const limit = 8 << 20
	train, held, err := GoSource("", limit)
	require.NoError(t, err)
	require.NotEmpty(t, train)
	require.NotEmpty(t, held)
	var total int64
	for _, d := range append(train, held...) {
		total += int64(len(d.Text))
		assert.True(t, strings.HasSuffix(d.Path, ".go"))
		assert.NotContains(t, "/"+d.Path, "/testdata/")
		assert.LessOrEqual(t, len(d.Text), MaxGoFileSize)
	}
	assert.LessOrEqual(t, total, int64(limit))
	assert.Greater(t, total, int64(limit-MaxGoFileSize))
	share := float64(len(held)) / float64(len(train)+len(held))
	assert.InDelta(t, 0.05, share, 0.03)

	train2, held2, err := GoSource(root, limit)
	require.NoError(t, err)
	assert.Equal(t, paths(train), paths(train2))
	assert.Equal(t, paths(held), paths(held2))
	assert.Equal(t, Join(train, []byte{0}), Join(train2, []byte{0}))
	assert.Equal(t, Join(held, nil), Join(held2, nil))
}

func TestReadTexts(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	for name, text := range map[string]string{"b.txt": "bbbb", "a.txt": "aa", "sub/c.txt": "cccccc"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	docs, err := ReadTexts(dir, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt", "b.txt", "sub/c.txt"}, paths(docs))
	docs, err = ReadTexts(dir, 5)
	require.NoError(t, err)
	assert.Equal(t, []string{"a.txt", "b.txt"}, paths(docs), "stops once the bound is reached")
	one, err := ReadTexts(filepath.Join(dir, "b.txt"), 0)
	require.NoError(t, err)
	require.Len(t, one, 1)
	assert.Equal(t, "b.txt", one[0].Path)
	_, err = ReadTexts(filepath.Join(dir, "none"), 0)
	assert.ErrorContains(t, err, "none")
}

// TestReadTextsBound: the bound holds for a single file (read only up to it, not whole) and for
// a tree, the cut falls on a UTF-8 character boundary, and it is the longest such prefix within
// the bound. Random texts of one- to four-byte characters, random bounds; a negative bound is
// an error.
func TestReadTextsBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	alphabet := []rune{'a', 'z', '\n', 'é', 'Ж', '€', '語', '😀'}
	dir := t.TempDir()
	var names []string
	var texts []string
	for i := range 4 {
		var sb strings.Builder
		for range 20 + rng.IntN(200) {
			sb.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		name := fmt.Sprintf("f%d.txt", i)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(sb.String()), 0o644))
		names, texts = append(names, name), append(texts, sb.String())
	}
	// longestPrefix is the longest prefix of s of at most n bytes that ends on a character.
	longestPrefix := func(s string, n int) string {
		if n >= len(s) {
			return s
		}
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		return s[:n]
	}
	for range 200 {
		bound := 1 + rng.IntN(1200)
		one, err := ReadTexts(filepath.Join(dir, names[0]), int64(bound))
		require.NoError(t, err)
		require.Len(t, one, 1)
		assert.Equal(t, longestPrefix(texts[0], bound), string(one[0].Text), "a single file, bound %d", bound)
		assert.True(t, utf8.Valid(one[0].Text))

		docs, err := ReadTexts(dir, int64(bound))
		require.NoError(t, err)
		left := bound
		for i, d := range docs {
			require.Equal(t, names[i], d.Path)
			assert.Equal(t, longestPrefix(texts[i], left), string(d.Text), "file %d, bound %d", i, bound)
			left -= len(d.Text)
			if len(d.Text) < len(texts[i]) {
				assert.Len(t, docs, i+1, "nothing is read after the cut file")
			}
		}
		assert.GreaterOrEqual(t, left, 0, "never more than the bound")
		if len(docs) < len(names) {
			assert.Less(t, left, utf8.UTFMax, "stops only when the bound is (nearly) reached")
		}
	}
	_, err := ReadTexts(dir, -5)
	assert.ErrorContains(t, err, "-5")
	all, err := ReadTexts(dir, 0)
	require.NoError(t, err)
	for i, d := range all {
		assert.Equal(t, texts[i], string(d.Text), "0 reads everything")
	}
}
