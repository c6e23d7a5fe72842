package train

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBatch(t *testing.T) {
	seqs := [][]int32{{0, 1, 2, 3}, {4, 3, 2, 1}}
	b, err := NewBatch(seqs, 3, 5)
	require.NoError(t, err)
	assert.Equal(t, 2, b.B)
	assert.Equal(t, 3, b.T)
	assert.Equal(t, 5, b.Vocab)
	assert.Equal(t, 6, b.Rows())
	assert.Equal(t, []int32{0, 1, 2, 4, 3, 2}, b.Inputs())
	assert.Equal(t, []int32{1, 2, 3, 3, 2, 1}, b.Targets())
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2}, b.Positions())
	// NewBatch copied its input.
	seqs[0][1] = 99
	assert.Equal(t, int32(1), b.Tokens[0][1])
}

func TestNewBatchErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		seqs    [][]int32
		context int
		vocab   int
		want    string
	}{
		{"no sequences", nil, 4, 5, "at least one sequence"},
		{"too short", [][]int32{{1}}, 4, 5, "at least 2"},
		{"too long", [][]int32{{1, 2, 3, 4, 0, 1}}, 4, 5, "T = 5 positions, more than the context length 4"},
		{"ragged", [][]int32{{1, 2, 3}, {1, 2}}, 4, 5, "sequence 1 has 2 ids"},
		{"id too big", [][]int32{{1, 2, 3}, {1, 5, 2}}, 4, 5, "sequence 1 position 1: token id 5"},
		{"negative id", [][]int32{{-2, 2, 3}}, 4, 5, "sequence 0 position 0: token id -2"},
		{"bad context", [][]int32{{1, 2}}, 0, 5, "context"},
		{"bad vocab", [][]int32{{1, 2}}, 4, 0, "vocabulary"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewBatch(c.seqs, c.context, c.vocab)
			assert.ErrorContains(t, err, c.want)
		})
	}
	_, err := NewBatch([][]int32{{1, 2, 3, 4, 0}}, 4, 5)
	assert.NoError(t, err, "T = context is allowed")
}

func TestClassificationBatch(t *testing.T) {
	pix := [][]float32{{1, 2, 3}, {4, 5, 6}}
	c, err := NewClassificationBatch(pix, []int32{1, 0}, 3, 2)
	require.NoError(t, err)
	assert.Equal(t, 2, c.N)
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, c.Pixels)
	assert.Equal(t, []int32{1, 0}, c.Labels)
	assert.Equal(t, []float32{0, 1, 1, 0}, c.OneHot())
	pix[0][0] = 42
	assert.Equal(t, float32(1), c.Pixels[0], "pixels were copied")

	nan := float32(math.NaN())
	for _, e := range []struct {
		name   string
		pix    [][]float32
		labels []int32
		ppi, k int
		want   string
	}{
		{"empty", nil, nil, 3, 2, "at least one image"},
		{"label count", pix, []int32{0}, 3, 2, "2 images but 1 labels"},
		{"image size", [][]float32{{1, 2, 3}, {1, 2}}, []int32{0, 1}, 3, 2, "image 1 has 2 floats, want 3"},
		{"label range", pix, []int32{0, 2}, 3, 2, "image 1 has label 2"},
		{"negative label", pix, []int32{-1, 0}, 3, 2, "image 0 has label -1"},
		{"nan pixel", [][]float32{{1, nan, 3}}, []int32{0}, 3, 2, "image 0 value 1"},
		{"bad ppi", pix, []int32{0, 1}, 0, 2, "pixels per image"},
		{"bad classes", pix, []int32{0, 1}, 3, 0, "classes"},
	} {
		t.Run(e.name, func(t *testing.T) {
			_, err := NewClassificationBatch(e.pix, e.labels, e.ppi, e.k)
			assert.ErrorContains(t, err, e.want)
		})
	}
}

func TestNewMaskedBatch(t *testing.T) {
	seqs := [][]int32{{1, 2, 3}, {4, 5, 6}}
	b, err := NewMaskedBatch(seqs, [][]bool{{false, true}, {true, false}}, 4, 8)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.Kept(), []bool{false, true, true, false}; !slices.Equal(got, want) {
		t.Errorf("Kept = %v, want %v", got, want)
	}
	if got := (&Batch{B: 1, T: 2, Tokens: [][]int32{{1, 2, 3}}}).Kept(); !slices.Equal(got, []bool{true, true}) {
		t.Errorf("unmasked Kept = %v", got)
	}
	for _, keep := range [][][]bool{
		{{false, false}, {false, false}}, // nothing kept
		{{true, true}},                   // one mask for two sequences
		{{true}, {true, true}},           // a short mask
	} {
		if _, err := NewMaskedBatch(seqs, keep, 4, 8); err == nil {
			t.Errorf("NewMaskedBatch(%v): no error", keep)
		}
	}
}
