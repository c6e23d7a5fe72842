package data

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // ImageFolder reads JPEG
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Images is a labelled image data set in memory, as an image classifier reads it: every image
// is Size×Size pixels, row by row, each pixel's Channels values together ([C, W, H] in ggml's
// order, "HWC"), already normalised.
type Images struct {
	Size, Channels int
	// Classes is the number of classes; every label lies in [0, Classes).
	Classes int
	// ClassNames names the classes (an ImageFolder's subfolders, sorted; "0".."9" for IDX).
	ClassNames []string
	Pixels     [][]float32
	Labels     []int32
	// Paths names where each image came from (a file, or an IDX file and index).
	Paths []string
}

// ImageOptions say how images become model input: resized (the shorter side to Size, then
// the centre Size×Size crop, as torchvision's Resize+CenterCrop), to Channels (1: grayscale by
// ITU-R 601 luma, 3: RGB), then each channel normalised as (x-Mean)/Std with x in [0, 1].
type ImageOptions struct {
	Size, Channels int
	// Mean and Std per channel; empty means 0.5 and 0.5 (inputs in [-1, 1]).
	Mean, Std []float32
	// NoResize refuses images that are not already Size×Size instead of resizing them.
	NoResize bool
	// MaxPixels is the most pixels (width × height) an image file may claim: its header is
	// read first, and a larger image is refused before it is decoded. 0 means MaxImagePixels.
	MaxPixels int64
}

// MaxImagePixels is the default ImageOptions.MaxPixels: 2²⁵ pixels (33.5 megapixels, an 8K
// frame), whose decoding takes at most about 0.3 GB where a header claiming 20000×20000
// pixels would take 4 GB or more.
const MaxImagePixels = 1 << 25

func (o ImageOptions) maxPixels() int64 {
	if o.MaxPixels > 0 {
		return o.MaxPixels
	}
	return MaxImagePixels
}

func (o ImageOptions) check() error {
	switch {
	case o.Size < 1:
		return fmt.Errorf("images: size %d must be positive", o.Size)
	case o.Channels != 1 && o.Channels != 3:
		return fmt.Errorf("images: %d channels: want 1 (grayscale) or 3 (RGB)", o.Channels)
	case len(o.Mean) != 0 && len(o.Mean) != o.Channels, len(o.Std) != 0 && len(o.Std) != o.Channels:
		return fmt.Errorf("images: mean and std need one value per channel (%d)", o.Channels)
	}
	for _, s := range o.Std {
		if !(s > 0) {
			return fmt.Errorf("images: std %g must be positive", s)
		}
	}
	return nil
}

func (o ImageOptions) normalise(c int, x float32) float32 {
	mean, std := float32(0.5), float32(0.5)
	if len(o.Mean) > 0 {
		mean = o.Mean[c]
	}
	if len(o.Std) > 0 {
		std = o.Std[c]
	}
	return (x - mean) / std
}

// CheckClasses refuses a data set whose labels do not fit a model of n classes.
func (im *Images) CheckClasses(n int) error {
	for i, l := range im.Labels {
		if l < 0 || int(l) >= n {
			return fmt.Errorf("images: %s has label %d, outside the model's %d classes", im.Paths[i], l, n)
		}
	}
	return nil
}

// Len is the number of images.
func (im *Images) Len() int { return len(im.Pixels) }

// Subset is the images at the given indices.
func (im *Images) Subset(idx []int) *Images {
	out := &Images{Size: im.Size, Channels: im.Channels, Classes: im.Classes, ClassNames: im.ClassNames}
	for _, i := range idx {
		out.Pixels, out.Labels, out.Paths = append(out.Pixels, im.Pixels[i]), append(out.Labels, im.Labels[i]), append(out.Paths, im.Paths[i])
	}
	return out
}

// Split shuffles the images with seed and holds out the last held of them.
func (im *Images) Split(held int, seed uint64) (train, heldOut *Images, err error) {
	if held < 1 || held >= im.Len() {
		return nil, nil, fmt.Errorf("images: a held-out split of %d from %d images", held, im.Len())
	}
	perm := rand.New(rand.NewPCG(seed, 0x696d67)).Perm(im.Len())
	return im.Subset(perm[:im.Len()-held]), im.Subset(perm[im.Len()-held:]), nil
}

// ReadIDX reads MNIST-style IDX files: images (magic 0x00000803, unsigned bytes, count × rows ×
// columns, grayscale) and labels (magic 0x00000801, one byte each). Either may be gzipped
// (a .gz name). Labels at or above classes are refused (classes ≤ 0: 10).
func ReadIDX(imagesPath, labelsPath string, classes int, o ImageOptions) (*Images, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if classes <= 0 {
		classes = 10
	}
	dims, pix, err := readIDX(imagesPath, 0x0803)
	if err != nil {
		return nil, err
	}
	if len(dims) != 3 {
		return nil, fmt.Errorf("idx %s: %d dimensions, want 3 (count, rows, columns)", imagesPath, len(dims))
	}
	ldims, labels, err := readIDX(labelsPath, 0x0801)
	if err != nil {
		return nil, err
	}
	n, rows, cols := dims[0], dims[1], dims[2]
	if len(ldims) != 1 || ldims[0] != n {
		return nil, fmt.Errorf("idx %s: %v labels for %d images in %s", labelsPath, ldims, n, imagesPath)
	}
	im := &Images{Size: o.Size, Channels: o.Channels, Classes: classes}
	for c := 0; c < classes; c++ {
		im.ClassNames = append(im.ClassNames, fmt.Sprint(c))
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s[%d]", imagesPath, i)
		if int(labels[i]) >= classes {
			return nil, fmt.Errorf("idx %s: image %d has label %d, outside %d classes", labelsPath, i, labels[i], classes)
		}
		g := image.NewGray(image.Rect(0, 0, cols, rows))
		copy(g.Pix, pix[i*rows*cols:(i+1)*rows*cols])
		px, err := toInput(g, name, o)
		if err != nil {
			return nil, err
		}
		im.Pixels, im.Labels, im.Paths = append(im.Pixels, px), append(im.Labels, int32(labels[i])), append(im.Paths, name)
	}
	return im, nil
}

// readIDX reads an IDX file of unsigned bytes with the given magic: its dimensions and data.
func readIDX(path string, magic uint32) ([]int, []byte, error) {
	f, err := openRegular(path, "idx")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, nil, fmt.Errorf("idx %s: %w", path, err)
		}
		r = z
	}
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, nil, fmt.Errorf("idx %s: no header: %w", path, err)
	}
	if got := binary.BigEndian.Uint32(hdr[:]); got != magic {
		return nil, nil, fmt.Errorf("idx %s: magic %#08x, want %#08x (unsigned bytes)", path, got, magic)
	}
	nd := int(hdr[3])
	dims := make([]int, nd)
	total := 1
	for i := range dims {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, nil, fmt.Errorf("idx %s: truncated header: %w", path, err)
		}
		dims[i] = int(binary.BigEndian.Uint32(hdr[:]))
		if dims[i] <= 0 || dims[i] > 1<<28 || total > (1<<31)/dims[i] {
			return nil, nil, fmt.Errorf("idx %s: dimension %d is %d", path, i, dims[i])
		}
		total *= dims[i]
	}
	// The buffer grows as data arrives: a header may claim up to 2 GiB that the file lacks.
	buf, err := io.ReadAll(io.LimitReader(r, int64(total)))
	if err != nil {
		return nil, nil, fmt.Errorf("idx %s: %w", path, err)
	}
	if len(buf) < total {
		return nil, nil, fmt.Errorf("idx %s: truncated: the header's dimensions %v want %d bytes of data, the file has %d", path, dims, total, len(buf))
	}
	return dims, buf, nil
}

// imageExts are the files ReadImageFolder reads.
var imageExts = map[string]bool{".png": true, ".jpg": true, ".jpeg": true}

// ReadImageFolder reads the ImageFolder layout: one subfolder per class (sorted by name: the
// class index), PNG or JPEG files inside. A file that does not decode is an error naming it.
// classNames, when not nil (a trained model's), fixes the classes: a subfolder not among
// them is refused.
func ReadImageFolder(dir string, classNames []string, o ImageOptions) (*Images, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var subs []string
	for _, e := range entries {
		if e.IsDir() {
			subs = append(subs, e.Name())
		}
	}
	sort.Strings(subs)
	if len(subs) == 0 {
		return nil, fmt.Errorf("images %s: no class subfolders", dir)
	}
	index := map[string]int{}
	if classNames == nil {
		classNames = subs
	}
	for i, n := range classNames {
		index[n] = i
	}
	im := &Images{Size: o.Size, Channels: o.Channels, Classes: len(classNames), ClassNames: classNames}
	for _, sub := range subs {
		label, ok := index[sub]
		if !ok {
			return nil, fmt.Errorf("images %s: class folder %q is not one of the model's %d classes", dir, sub, len(classNames))
		}
		files, err := os.ReadDir(filepath.Join(dir, sub))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			if f.IsDir() || !imageExts[strings.ToLower(filepath.Ext(f.Name()))] {
				continue
			}
			path := filepath.Join(dir, sub, f.Name())
			px, err := LoadImage(path, o)
			if err != nil {
				return nil, err
			}
			im.Pixels, im.Labels, im.Paths = append(im.Pixels, px), append(im.Labels, int32(label)), append(im.Paths, path)
		}
	}
	if im.Len() == 0 {
		return nil, fmt.Errorf("images %s: no PNG or JPEG files in its class folders", dir)
	}
	return im, nil
}

// LoadImage reads one PNG or JPEG file as model input (see ImageOptions). The file must be a
// regular file (a FIFO would block the read forever), and the size its header claims at most
// o.MaxPixels, checked before the image is decoded.
func LoadImage(path string, o ImageOptions) ([]float32, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	f, err := openRegular(path, "image")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, _, err := image.DecodeConfig(f)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	if px := int64(cfg.Width) * int64(cfg.Height); px > o.maxPixels() {
		return nil, fmt.Errorf("image %s: its header claims %d×%d pixels (%.1f megapixels), more than the %.1f toy decodes",
			path, cfg.Width, cfg.Height, float64(px)/1e6, float64(o.maxPixels())/1e6)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", path, err)
	}
	if b := img.Bounds(); b.Dx() != cfg.Width || b.Dy() != cfg.Height {
		return nil, fmt.Errorf("image %s: decodes to %d×%d pixels where its header claims %d×%d", path, b.Dx(), b.Dy(), cfg.Width, cfg.Height)
	}
	return toInput(img, path, o)
}

// openRegular opens path for reading if it is a regular file (symbolic links followed): opening
// a FIFO blocks until a writer comes, and a device may never end. what names the kind of file
// in errors ("image", "idx").
func openRegular(path, what string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s %s: not a regular file but %s", what, path, fileKind(st.Mode()))
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() { // replaced since the first look
		f.Close()
		return nil, fmt.Errorf("%s %s: not a regular file", what, path)
	}
	return f, nil
}

// fileKind names the kind of a file that is not a regular one.
func fileKind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO), which would block"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return "a special file (" + m.Type().String() + ")"
}

// toInput resizes, crops, converts and normalises img.
func toInput(img image.Image, name string, o ImageOptions) ([]float32, error) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if w < 1 || h < 1 {
		return nil, fmt.Errorf("image %s: empty", name)
	}
	if o.NoResize && (w != o.Size || h != o.Size) {
		return nil, fmt.Errorf("image %s: %d×%d pixels, want %d×%d", name, w, h, o.Size, o.Size)
	}
	// Source values in [0, 1], C channels, row by row.
	src := make([]float32, w*h*o.Channels)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, bl, _ := img.At(b.Min.X+x, b.Min.Y+y).RGBA()
			i := (y*w + x) * o.Channels
			if o.Channels == 1 {
				src[i] = float32(color.GrayModel.Convert(color.RGBA64{uint16(r), uint16(g), uint16(bl), 0xffff}).(color.Gray).Y) / 255
			} else {
				src[i], src[i+1], src[i+2] = float32(r)/65535, float32(g)/65535, float32(bl)/65535
			}
		}
	}
	// Resize the shorter side to Size (bilinear, pixel centres aligned), crop the centre.
	scale := float64(o.Size) / float64(min(w, h))
	rw, rh := max(o.Size, int(math.Round(float64(w)*scale))), max(o.Size, int(math.Round(float64(h)*scale)))
	x0, y0 := (rw-o.Size)/2, (rh-o.Size)/2
	out := make([]float32, o.Size*o.Size*o.Channels)
	sample := func(sx, sy float64, c int) float32 {
		sx, sy = math.Max(0, math.Min(sx, float64(w-1))), math.Max(0, math.Min(sy, float64(h-1)))
		ix, iy := int(sx), int(sy)
		fx, fy := float32(sx-float64(ix)), float32(sy-float64(iy))
		ix1, iy1 := min(ix+1, w-1), min(iy+1, h-1)
		at := func(x, y int) float32 { return src[(y*w+x)*o.Channels+c] }
		top := at(ix, iy)*(1-fx) + at(ix1, iy)*fx
		bot := at(ix, iy1)*(1-fx) + at(ix1, iy1)*fx
		return top*(1-fy) + bot*fy
	}
	sx, sy := float64(w)/float64(rw), float64(h)/float64(rh)
	for y := 0; y < o.Size; y++ {
		for x := 0; x < o.Size; x++ {
			for c := 0; c < o.Channels; c++ {
				var v float32
				if rw == w && rh == h {
					v = src[((y+y0)*w+x+x0)*o.Channels+c]
				} else {
					v = sample((float64(x+x0)+0.5)*sx-0.5, (float64(y+y0)+0.5)*sy-0.5, c)
				}
				out[(y*o.Size+x)*o.Channels+c] = o.normalise(c, v)
			}
		}
	}
	return out, nil
}

// ShapeNames are the classes of Shapes.
var ShapeNames = []string{"square", "cross", "circle"}

// Shapes renders n grayscale images of size×size pixels of three classes — a filled square,
// a cross and a circle outline, of random size and position, with noise — labelled by
// ShapeNames: a tiny data set that needs nothing external. The same seed gives the same set.
func Shapes(n, size int, seed uint64) []*image.Gray {
	rng := rand.New(rand.NewPCG(seed, 0x736870))
	var out []*image.Gray
	for i := 0; i < n; i++ {
		g := image.NewGray(image.Rect(0, 0, size, size))
		for j := range g.Pix {
			g.Pix[j] = uint8(rng.IntN(48))
		}
		r := float64(size) * (0.2 + 0.15*rng.Float64())
		cx := r + 1 + rng.Float64()*(float64(size)-2*r-2)
		cy := r + 1 + rng.Float64()*(float64(size)-2*r-2)
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				dx, dy := float64(x)+0.5-cx, float64(y)+0.5-cy
				var on bool
				switch i % 3 {
				case 0:
					on = math.Max(math.Abs(dx), math.Abs(dy)) <= r
				case 1:
					on = (math.Abs(dx) <= 1 && math.Abs(dy) <= r) || (math.Abs(dy) <= 1 && math.Abs(dx) <= r)
				case 2:
					d := math.Hypot(dx, dy)
					on = d <= r && d >= r-1.5
				}
				if on {
					g.Pix[y*size+x] = uint8(200 + rng.IntN(56))
				}
			}
		}
		out = append(out, g)
	}
	return out
}

// ShapesImages is Shapes as a data set (labels i%3).
func ShapesImages(n, size int, seed uint64, o ImageOptions) (*Images, error) {
	im := &Images{Size: o.Size, Channels: o.Channels, Classes: len(ShapeNames), ClassNames: ShapeNames}
	for i, g := range Shapes(n, size, seed) {
		name := fmt.Sprintf("shape %d", i)
		px, err := toInput(g, name, o)
		if err != nil {
			return nil, err
		}
		im.Pixels, im.Labels, im.Paths = append(im.Pixels, px), append(im.Labels, int32(i%3)), append(im.Paths, name)
	}
	return im, nil
}

// WriteShapesFolder writes Shapes as an ImageFolder under dir (dir/square/0000.png, ...).
func WriteShapesFolder(dir string, n, size int, seed uint64) error {
	for i, g := range Shapes(n, size, seed) {
		sub := filepath.Join(dir, ShapeNames[i%3])
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(sub, fmt.Sprintf("%04d.png", i)))
		if err != nil {
			return err
		}
		if err := png.Encode(f, g); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
