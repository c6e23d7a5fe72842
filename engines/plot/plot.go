// Package plot draws training-loss curves as PNG images: the training loss and the held-out
// loss against the step, with axes, numbered ticks, a legend and a title, in pure Go (image,
// image/png and the basicfont bitmap font from golang.org/x/image).
package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"
	"sort"
	"strconv"

	"github.com/toyml/toy/engines/runs"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Point is one measurement: a loss, or an accuracy (Accuracy).
type Point struct {
	// Step is the training step.
	Step int
	// Loss is the value at that step (the loss, or the accuracy in percent); NaN and ±Inf
	// values are not drawn.
	Loss float64
}

// Options controls a plot. The zero value gives the defaults.
type Options struct {
	// Title is drawn centred above the plot; default "loss".
	Title string
	// Width and Height are the image size in pixels; default 900×500, at least 240×160.
	Width, Height int
	// TrainLabel and HeldOutLabel name the series in the legend; defaults "train" and "held-out".
	TrainLabel, HeldOutLabel string
	// XLabel and YLabel name the axes; defaults "step" and "loss".
	XLabel, YLabel string
	// LegendBottom puts the legend in the bottom right corner instead of the top right: the
	// free corner of a rising curve such as an accuracy.
	LegendBottom bool
}

// Series colours.
var (
	// TrainColor is the colour of the training-loss line.
	TrainColor = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	// HeldOutColor is the colour of the held-out-loss line and its markers.
	HeldOutColor = color.RGBA{R: 230, G: 85, B: 13, A: 255}
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	gridColor = color.RGBA{232, 232, 232, 255}
	textColor = color.RGBA{40, 40, 40, 255}
	boxColor  = color.RGBA{170, 170, 170, 255}
)

var face = basicfont.Face7x13

// Minimum image size: room for the margins, ticks and legend.
const minWidth, minHeight = 240, 160

// LossPNG draws train and heldOut as lines on one chart and writes it to w as a PNG. Points
// need not be sorted (they are drawn in step order) and non-finite losses are skipped. Either
// series may be empty, and a series of one point is drawn as a marker; it is an error for both
// together to have no finite point.
func LossPNG(w io.Writer, train, heldOut []Point, opts Options) error {
	img, err := Render(train, heldOut, opts)
	return writePNG(w, img, err)
}

// writePNG encodes the image a renderer returned, or returns its error.
func writePNG(w io.Writer, img image.Image, err error) error {
	if err != nil {
		return err
	}
	if err := png.Encode(w, img); err != nil {
		return fmt.Errorf("plot: encode png: %w", err)
	}
	return nil
}

// Render draws the chart LossPNG encodes and returns the image.
func Render(train, heldOut []Point, opts Options) (*image.RGBA, error) {
	opts = withDefaults(opts)
	if opts.Width < minWidth || opts.Height < minHeight {
		return nil, fmt.Errorf("plot: image %dx%d is smaller than %dx%d", opts.Width, opts.Height, minWidth, minHeight)
	}
	tr, ho := clean(train), clean(heldOut)
	if len(tr)+len(ho) == 0 {
		return nil, errors.New("plot: no points with a finite loss to draw")
	}

	// Data ranges over both series.
	xlo, xhi := math.Inf(1), math.Inf(-1)
	ylo, yhi := math.Inf(1), math.Inf(-1)
	for _, s := range [][]Point{tr, ho} {
		for _, p := range s {
			xlo, xhi = math.Min(xlo, float64(p.Step)), math.Max(xhi, float64(p.Step))
			ylo, yhi = math.Min(ylo, p.Loss), math.Max(yhi, p.Loss)
		}
	}
	if math.IsInf(yhi-ylo, 0) {
		return nil, fmt.Errorf("plot: loss range [%g, %g] is too wide to draw", ylo, yhi)
	}
	if xlo == xhi {
		xlo, xhi = xlo-1, xhi+1
	}
	if ylo == yhi {
		d := math.Abs(ylo) * 0.05
		if d == 0 {
			d = 1
		}
		ylo, yhi = ylo-d, yhi+d
	} else {
		// A margin, so that the lowest and highest losses do not sit on the frame.
		d := (yhi - ylo) * 0.05
		ylo, yhi = ylo-d, yhi+d
	}
	// The plot area's top and bottom are fixed; its left edge leaves room for the widest y
	// tick label and the vertical axis label. Tick counts shrink until the labels fit.
	top, bottom := 44, opts.Height-52
	yt := fitTicks(ylo, yhi, 7, false, func(t ticks) bool {
		return (bottom-top)/max(1, len(t.values())-1) >= 2*face.Height
	})
	labelW := 0
	for _, v := range yt.values() {
		labelW = max(labelW, textWidth(yt.format(v)))
	}
	pr := image.Rect(36+labelW, top, opts.Width-24, bottom) // plot area
	xt := fitTicks(xlo, xhi, 10, true, func(t ticks) bool {
		w := 0
		for _, v := range t.values() {
			w = max(w, textWidth(t.format(v)))
		}
		return pr.Dx()/max(1, len(t.values())-1) >= w+2*face.Advance
	})

	img := image.NewRGBA(image.Rect(0, 0, opts.Width, opts.Height))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	c := canvas{img: img, pr: pr, xlo: xt.lo, xhi: xt.hi, ylo: yt.lo, yhi: yt.hi}

	// Grid, ticks and tick labels.
	for _, v := range xt.values() {
		x := c.px(v)
		c.vline(x, pr.Min.Y, pr.Max.Y-1, gridColor)
		c.vline(x, pr.Max.Y, pr.Max.Y+4, black)
		s := xt.format(v)
		drawText(img, s, x-textWidth(s)/2, pr.Max.Y+18, textColor)
	}
	for _, v := range yt.values() {
		y := c.py(v)
		c.hline(pr.Min.X, pr.Max.X-1, y, gridColor)
		c.hline(pr.Min.X-5, pr.Min.X-1, y, black)
		s := yt.format(v)
		drawText(img, s, pr.Min.X-8-textWidth(s), y+4, textColor)
	}
	// Axes.
	c.hline(pr.Min.X, pr.Max.X-1, pr.Max.Y-1, black)
	c.vline(pr.Min.X, pr.Min.Y, pr.Max.Y-1, black)

	// Axis labels and title.
	drawText(img, opts.XLabel, pr.Min.X+(pr.Dx()-textWidth(opts.XLabel))/2, pr.Max.Y+40, black)
	drawTextUp(img, opts.YLabel, 8, pr.Min.Y+(pr.Dy()+textWidth(opts.YLabel))/2, black)
	tx := (opts.Width - textWidth(opts.Title)) / 2
	drawText(img, opts.Title, tx, 26, black)
	drawText(img, opts.Title, tx+1, 26, black) // bold

	// The series: training first, held-out on top (it is sparser).
	c.series(tr, TrainColor, false)
	c.series(ho, HeldOutColor, true)

	// Legend, top right inside the plot area, for the series that have points.
	var entries []legendEntry
	if len(tr) > 0 {
		entries = append(entries, legendEntry{opts.TrainLabel, TrainColor})
	}
	if len(ho) > 0 {
		entries = append(entries, legendEntry{opts.HeldOutLabel, HeldOutColor})
	}
	c.legend(entries, opts.LegendBottom)
	return img, nil
}

func withDefaults(o Options) Options {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&o.Title, "loss")
	def(&o.TrainLabel, "train")
	def(&o.HeldOutLabel, "held-out")
	def(&o.XLabel, "step")
	def(&o.YLabel, "loss")
	if o.Width == 0 {
		o.Width = 900
	}
	if o.Height == 0 {
		o.Height = 500
	}
	return o
}

// clean returns the points with a finite loss, sorted by step (stably, so of points at the
// same step the later one is drawn last).
func clean(ps []Point) []Point {
	out := make([]Point, 0, len(ps))
	for _, p := range ps {
		if !math.IsNaN(p.Loss) && !math.IsInf(p.Loss, 0) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	return out
}

// ticks is an axis scale: the axis runs from lo to hi, with a tick at every multiple of step
// between them.
type ticks struct {
	lo, hi, step float64
	decimals     int
	integer      bool
}

// fitTicks returns niceTicks(lo, hi, n, integer) for the largest n, from the given one down
// to 2, that fits.
func fitTicks(lo, hi float64, n int, integer bool, fits func(ticks) bool) ticks {
	for ; n > 2; n-- {
		if t := niceTicks(lo, hi, n, integer); fits(t) {
			return t
		}
	}
	return niceTicks(lo, hi, 2, integer)
}

// niceTicks returns the scale for an axis from lo to hi (lo < hi) with ticks at the multiples
// of a "nice" step (1, 2 or 5 times a power of ten), at most n of them. Integer axes get a
// step of at least 1.
func niceTicks(lo, hi float64, n int, integer bool) ticks {
	step := niceNum((hi - lo) / float64(n-1))
	if integer && step < 1 {
		step = 1
	}
	t := ticks{lo: lo, hi: hi, step: step, integer: integer}
	if !integer {
		t.decimals = max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	}
	return t
}

// niceNum returns the smallest of 1, 2 or 5 times a power of ten that is at least x.
func niceNum(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if x <= m*p*(1+1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func (t ticks) values() []float64 {
	var vs []float64
	first := math.Ceil(t.lo/t.step - 1e-9)
	for i := 0; ; i++ {
		v := (first + float64(i)) * t.step
		if v > t.hi+t.step*1e-9 || i > 100 {
			return vs
		}
		if math.Abs(v) < t.step*1e-6 {
			v = 0 // no "-0"
		}
		vs = append(vs, v)
	}
}

// format writes a tick value: with the decimals the step needs, and on integer axes large
// round values shortened, 250000 as "250k" and 1500000 as "1.5M".
func (t ticks) format(v float64) string {
	if t.integer {
		switch a := math.Abs(v); {
		case a >= 1e6 && math.Mod(a, 1e5) == 0:
			return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
		case a >= 1e4 && math.Mod(a, 1e2) == 0:
			return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
		}
	}
	return strconv.FormatFloat(v, 'f', t.decimals, 64)
}

// canvas maps data coordinates into the plot area pr of img.
type canvas struct {
	img                *image.RGBA
	pr                 image.Rectangle
	xlo, xhi, ylo, yhi float64
}

func (c canvas) px(x float64) int {
	return c.pr.Min.X + int(math.Round((x-c.xlo)/(c.xhi-c.xlo)*float64(c.pr.Dx()-1)))
}

func (c canvas) py(y float64) int {
	return c.pr.Max.Y - 1 - int(math.Round((y-c.ylo)/(c.yhi-c.ylo)*float64(c.pr.Dy()-1)))
}

func (c canvas) hline(x0, x1, y int, col color.RGBA) {
	for x := x0; x <= x1; x++ {
		c.img.SetRGBA(x, y, col)
	}
}

func (c canvas) vline(x, y0, y1 int, col color.RGBA) {
	for y := y0; y <= y1; y++ {
		c.img.SetRGBA(x, y, col)
	}
}

// dot sets a 2×2 block, clipped to the plot area: the pen of the series lines.
func (c canvas) dot(x, y int, col color.RGBA) {
	for dy := range 2 {
		for dx := range 2 {
			if p := image.Pt(x+dx, y+dy); p.In(c.pr) {
				c.img.SetRGBA(p.X, p.Y, col)
			}
		}
	}
}

// line draws a 2-pixel-wide line from (x0, y0) to (x1, y1) (Bresenham).
func (c canvas) line(x0, y0, x1, y1 int, col color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		c.dot(x0, y0, col)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * e
		if e2 >= dy {
			e += dy
			x0 += sx
		}
		if e2 <= dx {
			e += dx
			y0 += sy
		}
	}
}

// marker draws a filled 5×5 square centred on (x, y).
func (c canvas) marker(x, y int, col color.RGBA) {
	for dy := -2; dy <= 2; dy++ {
		for dx := -2; dx <= 2; dx++ {
			if p := image.Pt(x+dx, y+dy); p.In(c.pr) {
				c.img.SetRGBA(p.X, p.Y, col)
			}
		}
	}
}

// series draws ps as a polyline; with markers, or when it is a single point, each point also
// gets a marker (markers are left out of long series, where they would merge into a band).
func (c canvas) series(ps []Point, col color.RGBA, markers bool) {
	for i := 1; i < len(ps); i++ {
		a, b := ps[i-1], ps[i]
		c.line(c.px(float64(a.Step)), c.py(a.Loss), c.px(float64(b.Step)), c.py(b.Loss), col)
	}
	if len(ps) == 1 || markers && len(ps) <= 200 {
		for _, p := range ps {
			c.marker(c.px(float64(p.Step)), c.py(p.Loss), col)
		}
	}
}

type legendEntry struct {
	label string
	col   color.RGBA
}

func (c canvas) legend(entries []legendEntry, bottom bool) {
	if len(entries) == 0 {
		return
	}
	w := 0
	for _, e := range entries {
		w = max(w, textWidth(e.label))
	}
	w += 8 + 24 + 6 + 8
	h := 8 + 18*len(entries)
	box := image.Rect(c.pr.Max.X-12-w, c.pr.Min.Y+10, c.pr.Max.X-12, c.pr.Min.Y+10+h)
	if bottom {
		box = box.Add(image.Pt(0, c.pr.Dy()-20-h))
	}
	draw.Draw(c.img, box, image.NewUniform(white), image.Point{}, draw.Src)
	c.hline(box.Min.X, box.Max.X-1, box.Min.Y, boxColor)
	c.hline(box.Min.X, box.Max.X-1, box.Max.Y-1, boxColor)
	c.vline(box.Min.X, box.Min.Y, box.Max.Y-1, boxColor)
	c.vline(box.Max.X-1, box.Min.Y, box.Max.Y-1, boxColor)
	for i, e := range entries {
		y := box.Min.Y + 4 + 18*i + 9
		for dy := -1; dy <= 1; dy++ {
			c.hline(box.Min.X+8, box.Min.X+8+24, y+dy, e.col)
		}
		drawText(c.img, e.label, box.Min.X+8+24+6, y+4, textColor)
	}
}

func textWidth(s string) int { return font.MeasureString(face, s).Round() }

// drawText draws s with its baseline starting at (x, y).
func drawText(img draw.Image, s string, x, y int, col color.Color) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(col), Face: face, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// drawTextUp draws s rotated a quarter turn anticlockwise (reading upwards), its glyphs'
// top edge at column x and the text starting at row y and running up.
func drawTextUp(img *image.RGBA, s string, x, y int, col color.Color) {
	m := face.Metrics()
	h := (m.Ascent + m.Descent).Ceil()
	w := textWidth(s)
	tmp := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: tmp, Src: image.Opaque, Face: face, Dot: fixed.P(0, m.Ascent.Ceil())}
	d.DrawString(s)
	r, g, b, _ := col.RGBA()
	c := color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}
	for ty := range h {
		for tx := range w {
			if tmp.AlphaAt(tx, ty).A >= 128 {
				img.SetRGBA(x+ty, y-tx, c)
			}
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// FromEvents extracts the loss curves of a run's event log: step events give the training
// series, eval events the held-out series. When a resumed run logs a step at or before one
// already seen (it went back to a checkpoint), the points from that step on are replaced by
// the resumed ones, so each series follows the run's final history.
func FromEvents(events []runs.Event) (train, heldOut []Point) {
	for _, e := range events {
		switch d := e.Data.(type) {
		case runs.Step:
			train = addPoint(train, Point{Step: d.Step, Loss: d.Loss})
		case runs.Eval:
			heldOut = addPoint(heldOut, Point{Step: d.Step, Loss: d.Loss})
		}
	}
	return train, heldOut
}

// addPoint appends p to a series, first dropping the points at or after its step (a resumed
// run went back to a checkpoint).
func addPoint(s []Point, p Point) []Point {
	i := len(s)
	for i > 0 && s[i-1].Step >= p.Step {
		i--
	}
	return append(s[:i], p)
}
