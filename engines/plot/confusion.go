package plot

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"io"
	"strconv"

	"github.com/toyml/toy/engines/runs"
)

// Accuracy is the held-out accuracy curve of a run's event log, in percent: the evaluations
// that carry an accuracy (a classifier's), replaced from a resumed step on as FromEvents does.
func Accuracy(events []runs.Event) []Point {
	var acc []Point
	for _, e := range events {
		if d, ok := e.Data.(runs.Eval); ok && d.Accuracy != nil {
			acc = addPoint(acc, Point{Step: d.Step, Loss: 100 * *d.Accuracy})
		}
	}
	return acc
}

// Confusion is the confusion matrix of a run's last evaluation that has one (a classifier's),
// with its step and accuracy; nil when there is none.
func Confusion(events []runs.Event) (m [][]int, step int, accuracy float64) {
	for _, e := range events {
		if d, ok := e.Data.(runs.Eval); ok && d.Confusion != nil {
			m, step = d.Confusion, d.Step
			if d.Accuracy != nil {
				accuracy = *d.Accuracy
			}
		}
	}
	return m, step, accuracy
}

// Stack places images one above the other, left-aligned on white.
func Stack(imgs ...*image.RGBA) *image.RGBA {
	w, h := 0, 0
	for _, im := range imgs {
		w, h = max(w, im.Bounds().Dx()), h+im.Bounds().Dy()
	}
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(out, out.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)
	y := 0
	for _, im := range imgs {
		r := im.Bounds()
		draw.Draw(out, image.Rect(0, y, r.Dx(), y+r.Dy()), im, r.Min, draw.Src)
		y += r.Dy()
	}
	return out
}

// Confusion-matrix colours: a cell is shaded from white (no image of its row) to
// ConfusionColor (every image of its row).
var ConfusionColor = color.RGBA{R: 8, G: 48, B: 107, A: 255}

// ConfusionPNG draws a confusion matrix (m[t][p]: images of class t predicted as p) as a grid
// of cells, rows the true class and columns the predicted one, each shaded by its share of its
// row and labelled with its count where the cell is large enough, and writes it to w as a PNG.
// names label the classes (missing ones are numbered).
func ConfusionPNG(w io.Writer, m [][]int, names []string, title string) error {
	img, err := RenderConfusion(m, names, title)
	return writePNG(w, img, err)
}

// RenderConfusion draws the image ConfusionPNG encodes.
func RenderConfusion(m [][]int, names []string, title string) (*image.RGBA, error) {
	n := len(m)
	if n == 0 {
		return nil, errors.New("plot: an empty confusion matrix")
	}
	for _, row := range m {
		if len(row) != n {
			return nil, fmt.Errorf("plot: the confusion matrix is not square (%d rows, a row of %d)", n, len(row))
		}
	}
	label := func(i int) string {
		if i < len(names) && names[i] != "" {
			return names[i]
		}
		return strconv.Itoa(i)
	}
	cell := max(2, min(48, 640/n)) // a 640-pixel grid at most, 48-pixel cells at best
	labelW := 0
	for i := range n {
		labelW = max(labelW, textWidth(label(i)))
	}
	showRows := face.Height <= cell           // a row label per row
	showCols := showRows && labelW+4 <= cell  // a column label under each column
	showCounts := textWidth("0000")+4 <= cell // counts up to four digits in the cells
	left := 40 + 8
	if showRows {
		left += labelW
	}
	top, grid := 44, cell*n
	bottom := 44
	if showCols {
		bottom += face.Height
	}
	width := max(left+grid+24, textWidth(title)+24, minWidth)
	img := image.NewRGBA(image.Rect(0, 0, width, top+grid+bottom))
	draw.Draw(img, img.Bounds(), image.NewUniform(white), image.Point{}, draw.Src)

	for t, row := range m {
		total := 0
		for _, c := range row {
			total += c
		}
		for p, c := range row {
			f := 0.0
			if total > 0 {
				f = float64(c) / float64(total)
			}
			shade := color.RGBA{mix(255, ConfusionColor.R, f), mix(255, ConfusionColor.G, f), mix(255, ConfusionColor.B, f), 255}
			r := image.Rect(left+p*cell, top+t*cell, left+(p+1)*cell, top+(t+1)*cell)
			draw.Draw(img, r, image.NewUniform(shade), image.Point{}, draw.Src)
			if showCounts && c > 0 {
				s := strconv.Itoa(c)
				ink := color.Color(textColor)
				if f > 0.5 {
					ink = white
				}
				drawText(img, s, r.Min.X+(cell-textWidth(s))/2, r.Min.Y+(cell+face.Ascent)/2, ink)
			}
		}
		if showRows {
			s := label(t)
			drawText(img, s, left-6-textWidth(s), top+t*cell+(cell+face.Ascent)/2, textColor)
		}
	}
	if showCols {
		for p := range n {
			s := label(p)
			drawText(img, s, left+p*cell+(cell-textWidth(s))/2, top+grid+4+face.Ascent, textColor)
		}
	}
	c := canvas{img: img}
	c.hline(left, left+grid-1, top, boxColor)
	c.hline(left, left+grid-1, top+grid-1, boxColor)
	c.vline(left, top, top+grid-1, boxColor)
	c.vline(left+grid-1, top, top+grid-1, boxColor)
	drawText(img, "predicted", left+(grid-textWidth("predicted"))/2, img.Bounds().Dy()-16, black)
	drawTextUp(img, "true", 8, top+(grid+textWidth("true"))/2, black)
	tx := (width - textWidth(title)) / 2
	drawText(img, title, tx, 26, black)
	drawText(img, title, tx+1, 26, black)
	return img, nil
}

// mix is a + (b-a)·f for a colour channel.
func mix(a, b uint8, f float64) uint8 { return uint8(float64(a) + (float64(b)-float64(a))*f + 0.5) }
