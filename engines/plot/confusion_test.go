package plot

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/engines/runs"
)

// TestAccuracyAndConfusion reads a classifier's curves from its events: the accuracy in
// percent, replaced from a resumed step on, and the last confusion matrix with its step.
func TestAccuracyAndConfusion(t *testing.T) {
	acc := func(a float64) *float64 { return &a }
	eval := func(e runs.Eval) runs.Event { return runs.Event{Type: runs.TypeEval, Data: e} }
	events := []runs.Event{
		eval(runs.Eval{Step: 2, Loss: 1, Accuracy: acc(0.5), Confusion: [][]int{{1, 1}, {1, 1}}}),
		eval(runs.Eval{Step: 4, Loss: 0.8, Accuracy: acc(0.6)}),
		eval(runs.Eval{Step: 3, Loss: 0.7, Accuracy: acc(0.75), Confusion: [][]int{{2, 0}, {1, 1}}}), // resumed at 2
		eval(runs.Eval{Step: 5, Loss: 0.5}),                                                          // a language model's: no accuracy
	}
	assert.Equal(t, []Point{{2, 50}, {3, 75}}, Accuracy(events))
	m, step, a := Confusion(events)
	assert.Equal(t, [][]int{{2, 0}, {1, 1}}, m)
	assert.Equal(t, 3, step)
	assert.Equal(t, 0.75, a)
	m, _, _ = Confusion(events[3:])
	assert.Nil(t, m)
}

// TestConfusionPNG draws a 3-class matrix: a cell holding its whole row is ConfusionColor, an
// empty one white, a cell holding a third of its row a third of the way between; the grid's
// cells lie where the layout puts them. A matrix that is not square is refused.
func TestConfusionPNG(t *testing.T) {
	m := [][]int{{10, 0, 0}, {0, 5, 10}, {3, 3, 3}}
	var buf bytes.Buffer
	require.NoError(t, ConfusionPNG(&buf, m, []string{"a", "b"}, "confusion"))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	// The layout RenderConfusion makes for 3 classes with row labels: 48-pixel cells.
	const cell, top = 48, 44
	left := 48 + textWidth("a")
	centre := func(t, p int) image.Point { return image.Pt(left+p*cell+3, top+t*cell+3) } // clear of the counts
	at := func(p image.Point) [3]uint32 {
		r, g, b, _ := img.At(p.X, p.Y).RGBA()
		return [3]uint32{r >> 8, g >> 8, b >> 8}
	}
	assert.Equal(t, [3]uint32{uint32(ConfusionColor.R), uint32(ConfusionColor.G), uint32(ConfusionColor.B)}, at(centre(0, 0)), "a whole row")
	assert.Equal(t, [3]uint32{255, 255, 255}, at(centre(0, 1)), "an empty cell")
	third := at(centre(2, 1))
	assert.InDelta(t, 255-(255-float64(ConfusionColor.R))/3, float64(third[0]), 1, "a third of its row")
	assert.InDelta(t, 255-(255-float64(ConfusionColor.B))/3, float64(third[2]), 1)
	twoThirds := at(centre(1, 2))
	assert.InDelta(t, 255-2*(255-float64(ConfusionColor.G))/3, float64(twoThirds[1]), 1, "two thirds of its row")
	assert.Greater(t, count(img, white, image.Rect(left+2*cell+4, top+cell+4, left+3*cell-4, top+2*cell-4)), 5, "the count is written in white on a dark cell")

	big := make([][]int, 300) // too many classes for labels: small cells, no text
	for i := range big {
		big[i] = make([]int, 300)
		big[i][(i*7)%300] = 4
	}
	im, err := RenderConfusion(big, nil, "big")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, im.Bounds().Dx(), 600)

	_, err = RenderConfusion([][]int{{1, 2}, {3}}, nil, "bad")
	assert.ErrorContains(t, err, "not square")
	_, err = RenderConfusion(nil, nil, "none")
	assert.ErrorContains(t, err, "empty")
}
