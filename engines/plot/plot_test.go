package plot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/engines/runs"
)

// render draws a plot through LossPNG and decodes the PNG back.
func render(t *testing.T, train, held []Point, opts Options) image.Image {
	t.Helper()
	var buf bytes.Buffer
	require.NoError(t, LossPNG(&buf, train, held, opts))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	return img
}

// count returns how many pixels of img have exactly colour c, in all of img or in r.
func count(img image.Image, c color.RGBA, r image.Rectangle) int {
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == c {
				n++
			}
		}
	}
	return n
}

func curve(n, every int, f func(i int) float64) []Point {
	var ps []Point
	for i := 0; i < n; i += every {
		ps = append(ps, Point{Step: i, Loss: f(i)})
	}
	return ps
}

func TestLossPNG(t *testing.T) {
	train := curve(1000, 1, func(i int) float64 { return 2 + 8*math.Exp(-float64(i)/150) + 0.2*math.Sin(float64(i)) })
	held := curve(1000, 100, func(i int) float64 { return 2.3 + 8*math.Exp(-float64(i)/150) })
	// A sample image for people to look at.
	path := filepath.Join(t.TempDir(), "loss.png")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, LossPNG(f, train, held, Options{Title: "sample"}))
	require.NoError(t, f.Close())
	if out := os.Getenv("TOY_PLOT_SAMPLE"); out != "" {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, b, 0o644))
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(1000))

	img := render(t, train, held, Options{Title: "tiny-llama on Go source"})

	assert.Equal(t, image.Rect(0, 0, 900, 500), img.Bounds())
	all := img.Bounds()
	assert.Greater(t, count(img, TrainColor, all), 1000, "train line drawn")
	assert.Greater(t, count(img, HeldOutColor, all), 200, "held-out line and markers drawn")
	white := color.RGBA{255, 255, 255, 255}
	assert.Greater(t, count(img, white, all), 900*500/2, "white background")
	assert.Equal(t, white, color.RGBAModel.Convert(img.At(2, 2)))
	// Black for the axes; dark text (ticks, title) left of and below the plot area.
	assert.Greater(t, count(img, color.RGBA{0, 0, 0, 255}, all), 800)
	assert.Greater(t, count(img, textColor, image.Rect(0, 40, 80, 460)), 50, "y tick labels")
	assert.Greater(t, count(img, textColor, image.Rect(0, 450, 900, 475)), 50, "x tick labels")
	assert.Greater(t, count(img, color.RGBA{0, 0, 0, 255}, image.Rect(250, 0, 650, 30)), 50, "title")

	// The train curve starts high on the left and ends low on the right: its pixels in the
	// left tenth lie above (smaller y) those in the right tenth.
	meanY := func(r image.Rectangle) float64 {
		var sum, n float64
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				if color.RGBAModel.Convert(img.At(x, y)).(color.RGBA) == TrainColor {
					sum += float64(y)
					n++
				}
			}
		}
		require.NotZero(t, n)
		return sum / n
	}
	// (Below the legend, which holds a train-coloured swatch.)
	assert.Less(t, meanY(image.Rect(60, 120, 150, 500)), meanY(image.Rect(780, 120, 870, 500))-150)

}

func TestLossPNGEdgeCases(t *testing.T) {
	all := image.Rect(0, 0, 900, 500)
	cases := []struct {
		name                string
		train, held         []Point
		wantTrain, wantHeld bool
	}{
		{"train only", curve(50, 1, func(i int) float64 { return 5 - float64(i)/20 }), nil, true, false},
		{"held-out only", nil, curve(50, 10, func(i int) float64 { return 5 - float64(i)/20 }), false, true},
		{"single point", []Point{{Step: 7, Loss: 3}}, nil, true, false},
		{"single each, same step", []Point{{Step: 7, Loss: 3}}, []Point{{Step: 7, Loss: 3.5}}, true, true},
		{"flat", curve(100, 1, func(int) float64 { return 2.5 }), curve(100, 10, func(int) float64 { return 2.5 }), true, true},
		{"flat zero", curve(100, 1, func(int) float64 { return 0 }), nil, true, false},
		{"non-finite", []Point{{0, math.NaN()}, {1, 4}, {2, math.Inf(1)}, {3, 3}, {4, math.Inf(-1)}, {5, 2}},
			[]Point{{0, math.NaN()}, {5, 2.5}}, true, true},
		{"unsorted", []Point{{30, 1}, {10, 3}, {20, 2}}, nil, true, false},
		{"negative and huge", []Point{{0, -1e6}, {1_000_000, 1e6}}, nil, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := render(t, tc.train, tc.held, Options{})
			assert.Equal(t, all, img.Bounds())
			assert.Equal(t, tc.wantTrain, count(img, TrainColor, all) > 0)
			assert.Equal(t, tc.wantHeld, count(img, HeldOutColor, all) > 0)
		})
	}

	var buf bytes.Buffer
	err := LossPNG(&buf, nil, nil, Options{})
	assert.Error(t, err)
	err = LossPNG(&buf, []Point{{0, math.NaN()}}, []Point{{1, math.Inf(1)}}, Options{})
	assert.ErrorContains(t, err, "no points")
	assert.Zero(t, buf.Len(), "nothing written on error")
	assert.Error(t, LossPNG(&buf, []Point{{0, -math.MaxFloat64}, {1, math.MaxFloat64}}, nil, Options{}))
	assert.Error(t, LossPNG(&buf, []Point{{0, 1}}, nil, Options{Width: 100, Height: 50}))

	img := render(t, []Point{{0, 1}, {1, 2}}, nil, Options{Width: 320, Height: 200})
	assert.Equal(t, image.Rect(0, 0, 320, 200), img.Bounds())
}

func TestTicks(t *testing.T) {
	tk := niceTicks(2.13, 10.9, 6, false)
	assert.Equal(t, 2.0, tk.step)
	assert.Equal(t, []float64{4, 6, 8, 10}, tk.values(), "multiples of the step inside the axis")
	assert.Equal(t, "10", tk.format(10))
	assert.Equal(t, []float64{2, 4, 6, 8, 10}, niceTicks(2, 10, 6, false).values(), "ends included")

	tk = niceTicks(2.41, 2.47, 6, false)
	assert.InDelta(t, 0.02, tk.step, 1e-12)
	assert.Equal(t, "2.44", tk.format(2.44))
	assert.Len(t, tk.values(), 3)

	tk = niceTicks(-1, 1, 6, false)
	for _, v := range tk.values() {
		assert.NotEqual(t, "-0.0", tk.format(v))
	}

	tk = niceTicks(0, 3, 8, true)
	assert.Equal(t, 1.0, tk.step, "integer axes never get fractional steps")
	tk = niceTicks(0, 1000, 8, true)
	assert.Equal(t, 200.0, tk.step)
	assert.Equal(t, []float64{0, 200, 400, 600, 800, 1000}, tk.values())
	assert.Equal(t, "1000", tk.format(1000))
	assert.Equal(t, "250k", tk.format(250_000))
	assert.Equal(t, "12.5k", tk.format(12_500))
	assert.Equal(t, "1.5M", tk.format(1_500_000))
	assert.Equal(t, "1234567", tk.format(1_234_567))

	// fitTicks gives up ticks until they fit.
	tk = fitTicks(0, 1000, 10, true, func(t ticks) bool { return len(t.values()) <= 3 })
	assert.Equal(t, []float64{0, 500, 1000}, tk.values())
}

func TestFromEvents(t *testing.T) {
	ev := func(d any) runs.Event {
		switch d.(type) {
		case runs.Step:
			return runs.Event{Type: runs.TypeStep, Data: d}
		case runs.Eval:
			return runs.Event{Type: runs.TypeEval, Data: d}
		case runs.RunStart:
			return runs.Event{Type: runs.TypeRunStart, Data: d}
		}
		return runs.Event{Type: runs.TypeRunEnd, Data: d}
	}
	events := []runs.Event{
		ev(runs.RunStart{}),
		ev(runs.Step{Step: 1, Loss: 5}),
		ev(runs.Step{Step: 2, Loss: 4}),
		ev(runs.Eval{Step: 2, Loss: 4.5}),
		ev(runs.Step{Step: 3, Loss: 3.5}),
		ev(runs.Step{Step: 4, Loss: 3.2}),
		// Crash after step 4; resumed from the checkpoint at step 2.
		ev(runs.RunStart{}),
		ev(runs.Step{Step: 3, Loss: 3.4}),
		ev(runs.Eval{Step: 4, Loss: 3.9}),
		ev(runs.Step{Step: 4, Loss: 3.1}),
		ev(runs.Step{Step: 5, Loss: 3.0}),
		ev(runs.RunEnd{Step: 5, Loss: 3.0, Reason: runs.ReasonDone}),
	}
	train, held := FromEvents(events)
	assert.Equal(t, []Point{{1, 5}, {2, 4}, {3, 3.4}, {4, 3.1}, {5, 3.0}}, train)
	assert.Equal(t, []Point{{2, 4.5}, {4, 3.9}}, held)

	train, held = FromEvents(nil)
	assert.Empty(t, train)
	assert.Empty(t, held)
}

// TestFromRunLog goes through a real event log: write with runs, read back, plot.
func TestFromRunLog(t *testing.T) {
	r, err := runs.Create(t.TempDir(), "r")
	require.NoError(t, err)
	require.NoError(t, r.LogStart(runs.RunStart{}))
	for i := range 300 {
		require.NoError(t, r.LogStep(runs.Step{Step: i, Loss: 6 * math.Exp(-float64(i)/80), LR: 1e-3}))
		if i%50 == 0 {
			require.NoError(t, r.LogEval(runs.Eval{Step: i, Loss: 6.2 * math.Exp(-float64(i)/90)}))
		}
	}
	require.NoError(t, r.Close())
	events, err := runs.ReadEvents(r.EventsPath())
	require.NoError(t, err)
	train, held := FromEvents(events)
	assert.Len(t, train, 300)
	assert.Len(t, held, 6)
	img := render(t, train, held, Options{})
	assert.Greater(t, count(img, TrainColor, img.Bounds()), 300)
	assert.Greater(t, count(img, HeldOutColor, img.Bounds()), 100)
}
