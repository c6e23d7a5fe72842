package data

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encodePNG is a w×h RGB gradient as PNG bytes.
func encodePNG(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			img.Set(x, y, color.RGBA{uint8(x * 9), uint8(y * 5), uint8(x + y), 255})
		}
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// encodeJPEG is the same image as JPEG bytes.
func encodeJPEG(t testing.TB, w, h int) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	require.NoError(t, jpeg.Encode(&b, img, nil))
	return b.Bytes()
}

// claimPNG rewrites a PNG's IHDR to claim w×h pixels (with a valid checksum), its data left as
// it is: what a hostile or corrupt file does.
func claimPNG(b []byte, w, h uint32) []byte {
	b = append([]byte(nil), b...)
	// Signature (8), IHDR length (4), "IHDR" (4), width, height, ..., CRC over type and data.
	binary.BigEndian.PutUint32(b[16:], w)
	binary.BigEndian.PutUint32(b[20:], h)
	binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
	return b
}

// claimJPEG rewrites the first baseline frame header (SOF0) of a JPEG to claim w×h pixels.
func claimJPEG(b []byte, w, h uint16) []byte {
	b = append([]byte(nil), b...)
	if i := bytes.Index(b, []byte{0xff, 0xc0}); i >= 0 && i+9 <= len(b) {
		binary.BigEndian.PutUint16(b[i+5:], h)
		binary.BigEndian.PutUint16(b[i+7:], w)
	}
	return b
}

// goAllocated is the Go memory allocated while f runs.
func goAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestImageClaimsHugeSize: a PNG or JPEG whose header claims 20000×20000 pixels (which would
// decode to 1.6 GB and more) is refused from its header, naming the file and the size, with
// next to no memory allocated; a real image of many pixels is refused below its MaxPixels and
// read within it.
func TestImageClaimsHugeSize(t *testing.T) {
	dir := t.TempDir()
	o := ImageOptions{Size: 8, Channels: 3}
	for name, b := range map[string][]byte{
		"huge.png": claimPNG(encodePNG(t, 4, 4), 20000, 20000),
		"huge.jpg": claimJPEG(encodeJPEG(t, 16, 16), 20000, 20000),
	} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		var err error
		alloc := goAllocated(func() { _, err = LoadImage(p, o) })
		assert.ErrorContains(t, err, p)
		assert.ErrorContains(t, err, "claims 20000×20000 pixels (400.0 megapixels)")
		assert.Less(t, alloc, uint64(1<<20), "%s: refused before decoding", name)
	}
	p := filepath.Join(dir, "wide.png")
	require.NoError(t, os.WriteFile(p, encodePNG(t, 300, 200), 0o644))
	_, err := LoadImage(p, ImageOptions{Size: 8, Channels: 1, MaxPixels: 300*200 - 1})
	assert.ErrorContains(t, err, "claims 300×200 pixels")
	px, err := LoadImage(p, ImageOptions{Size: 8, Channels: 1, MaxPixels: 300 * 200})
	require.NoError(t, err)
	assert.Len(t, px, 8*8)
}

// TestImageNotRegular: a FIFO, a directory or a device given as an image (to classify, or in
// a training folder) is refused at once, naming it, instead of blocking on the open.
func TestImageNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.png")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	sub := filepath.Join(dir, "adir.png")
	require.NoError(t, os.Mkdir(sub, 0o755))
	o := ImageOptions{Size: 8, Channels: 1}
	for path, kind := range map[string]string{fifo: "named pipe", sub: "directory", "/dev/null": "device"} {
		done := make(chan error, 1)
		go func() { _, err := LoadImage(path, o); done <- err }()
		select {
		case err := <-done:
			assert.ErrorContains(t, err, path)
			assert.ErrorContains(t, err, "not a regular file but a "+kind)
		case <-time.After(10 * time.Second):
			t.Fatalf("LoadImage(%s) blocked", path)
		}
	}

	// In an ImageFolder, and as an IDX file.
	folder := t.TempDir()
	require.NoError(t, WriteShapesFolder(folder, 6, 8, 1))
	inFolder := filepath.Join(folder, "cross", "pipe.png")
	require.NoError(t, syscall.Mkfifo(inFolder, 0o644))
	_, err := ReadImageFolder(folder, nil, o)
	assert.ErrorContains(t, err, inFolder)
	assert.ErrorContains(t, err, "named pipe")
	_, err = ReadIDX(fifo, fifo, 10, o)
	assert.ErrorContains(t, err, "not a regular file")
}

// TestIDXClaimsMoreThanItHolds: an IDX header claiming a gigabyte of pixels that the file does
// not hold is refused as truncated without allocating the gigabyte.
func TestIDXClaimsMoreThanItHolds(t *testing.T) {
	dir := t.TempDir()
	imgs, lbls := filepath.Join(dir, "images-idx3-ubyte"), filepath.Join(dir, "labels-idx1-ubyte")
	writeIDX(t, imgs, 0x803, []int{1 << 14, 256, 256}, make([]byte, 100))
	writeIDX(t, lbls, 0x801, []int{1 << 14}, make([]byte, 1<<14))
	var err error
	alloc := goAllocated(func() { _, err = ReadIDX(imgs, lbls, 10, ImageOptions{Size: 8, Channels: 1}) })
	assert.ErrorContains(t, err, "truncated")
	assert.Less(t, alloc, uint64(16<<20))
}

// FuzzLoadImage feeds arbitrary bytes to LoadImage as a PNG or JPEG file, from seeds that are
// valid images and images whose headers claim huge or empty sizes: it must return pixels of
// the asked size or an error, never panic, and allocate no more than its MaxPixels allow.
func FuzzLoadImage(f *testing.F) {
	f.Add(encodePNG(f, 5, 3), false)
	f.Add(encodeJPEG(f, 17, 9), true)
	f.Add(claimPNG(encodePNG(f, 4, 4), 20000, 20000), false)
	f.Add(claimPNG(encodePNG(f, 4, 4), 1<<31-1, 1), false)
	f.Add(claimPNG(encodePNG(f, 4, 4), 0, 4), false)
	f.Add(claimJPEG(encodeJPEG(f, 16, 16), 20000, 20000), true)
	f.Add(claimJPEG(encodeJPEG(f, 16, 16), 0, 0), true)
	f.Add([]byte("\x89PNG\r\n\x1a\n"), false)
	f.Add([]byte{}, true)
	const maxPixels = 1 << 16
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte, rgb bool) {
		p := filepath.Join(dir, "fuzz.img")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		o := ImageOptions{Size: 6, Channels: 1, MaxPixels: maxPixels}
		if rgb {
			o.Channels = 3
		}
		var px []float32
		var err error
		alloc := goAllocated(func() { px, err = LoadImage(p, o) })
		if err == nil {
			assert.Len(t, px, 6*6*o.Channels)
		}
		// Decoding (up to 8 bytes a pixel), the float copy (4 a channel) and the decoders'
		// own buffers: within a few dozen bytes a pixel allowed, plus the file.
		assert.Less(t, alloc, uint64(64*maxPixels+8*len(b)+4<<20))
	})
}
