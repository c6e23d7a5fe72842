package data

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/toyml/toy/internal/fsutil"
)

// Magic is the first eight bytes of every token-corpus file.
const Magic = "TOYTOKS\n"

// Version is the token-corpus format version NewWriter writes: a header without the
// tokenizer's fingerprint. The package reads it and VersionFingerprint.
const Version = 1

// VersionFingerprint is the format version NewTokenizedWriter writes: Version's header followed
// by the 32-byte fingerprint of the tokenizer that made the ids (tokenizer.Tokenizer.Fingerprint).
const VersionFingerprint = 2

// HeaderSize is the size in bytes of a Version corpus header, which precedes the tokens.
const HeaderSize = 28

// HeaderSizeFingerprint is the size of a VersionFingerprint header: HeaderSize and the
// fingerprint.
const HeaderSizeFingerprint = HeaderSize + FingerprintSize

// FingerprintSize is the size in bytes of a tokenizer fingerprint.
const FingerprintSize = 32

// countOffset is the byte offset of the token count in the header.
const countOffset = 20

// MaxVocab returns the largest vocabulary a token width can hold: 65536 for width 2 and
// 2^31 for width 4 (ids are int32). It returns 0 for any other width.
func MaxVocab(width int) int64 {
	switch width {
	case 2:
		return 1 << 16
	case 4:
		return 1 << 31
	}
	return 0
}

// checkShape validates a token width and vocabulary size.
func checkShape(width int, vocab int64) error {
	maxV := MaxVocab(width)
	if maxV == 0 {
		return fmt.Errorf("token width %d: want 2 or 4", width)
	}
	if vocab <= 0 || vocab > maxV {
		return fmt.Errorf("vocab size %d: want 1..%d for width %d", vocab, maxV, width)
	}
	return nil
}

// Writer streams token ids into a new corpus file. It writes to a temporary file in the
// destination's directory; only a successful [Writer.Close] moves the file to its path.
// A Writer is not safe for concurrent use.
type Writer struct {
	path  string
	tmp   *os.File
	buf   *bufio.Writer
	width int
	vocab int64
	count uint64
	enc   []byte
	err   error // sticky: the first failure; Close then discards the file
	done  bool
}

// NewWriter starts a corpus at path with the given token width (2 or 4 bytes) and vocabulary
// size, in the Version format. Nothing appears at path until Close succeeds.
func NewWriter(path string, width, vocab int) (*Writer, error) {
	return newWriter(path, width, vocab, nil)
}

// NewTokenizedWriter is NewWriter for ids a tokenizer made: the corpus (VersionFingerprint)
// records the tokenizer's vocabulary size and its fingerprint, which Corpus.Fingerprint reads
// back, so that training can refuse another tokenizer.
func NewTokenizedWriter(path string, width, vocab int, fingerprint [FingerprintSize]byte) (*Writer, error) {
	return newWriter(path, width, vocab, fingerprint[:])
}

func newWriter(path string, width, vocab int, fingerprint []byte) (*Writer, error) {
	if err := checkShape(width, int64(vocab)); err != nil {
		return nil, fmt.Errorf("data: new corpus %s: %w", path, err)
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := fsutil.CreateTemp(dir, "."+base+".tmp-*") // 0666 less the umask
	if err != nil {
		return nil, fmt.Errorf("data: new corpus %s: %w", path, err)
	}
	w := &Writer{path: path, tmp: tmp, buf: bufio.NewWriterSize(tmp, 1<<16), width: width, vocab: int64(vocab)}
	hdr := make([]byte, HeaderSize, HeaderSizeFingerprint)
	version := uint32(Version)
	if fingerprint != nil {
		version, hdr = VersionFingerprint, append(hdr, fingerprint...)
	}
	copy(hdr[:8], Magic)
	binary.LittleEndian.PutUint32(hdr[8:], version)
	binary.LittleEndian.PutUint32(hdr[12:], uint32(width))
	binary.LittleEndian.PutUint32(hdr[16:], uint32(vocab))
	// The count (bytes 20..28) stays zero until Close patches it.
	if _, err := w.buf.Write(hdr); err != nil {
		w.Abort()
		return nil, fmt.Errorf("data: new corpus %s: %w", path, err)
	}
	return w, nil
}

// Write appends token ids. The whole call is rejected, and nothing of it written, if any id
// is outside [0, vocab) or does not fit the token width. Any error is sticky: later Writes
// fail and Close discards the file, so a corpus with a missing piece is never committed.
func (w *Writer) Write(ids []int32) error {
	if w.done {
		return fmt.Errorf("data: write %s: writer is closed", w.path)
	}
	if w.err != nil {
		return w.err
	}
	maxID := MaxVocab(w.width) - 1
	for i, id := range ids {
		if id < 0 || int64(id) >= w.vocab || int64(id) > maxID {
			w.err = fmt.Errorf("data: write %s: token %d of this batch is %d, outside [0, %d) for width %d",
				w.path, i, id, w.vocab, w.width)
			return w.err
		}
	}
	if need := len(ids) * w.width; cap(w.enc) < need {
		w.enc = make([]byte, need)
	}
	b := w.enc[:len(ids)*w.width]
	if w.width == 2 {
		for i, id := range ids {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(id))
		}
	} else {
		for i, id := range ids {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(id))
		}
	}
	if _, err := w.buf.Write(b); err != nil {
		w.err = fmt.Errorf("data: write %s: %w", w.path, err)
		return w.err
	}
	w.count += uint64(len(ids))
	return nil
}

// Count returns the number of tokens written so far.
func (w *Writer) Count() int64 { return int64(w.count) }

// Close finishes the corpus: it flushes the tokens, writes the count into the header, fsyncs
// the file, renames it to the destination path and fsyncs the directory. If any Write failed,
// or finishing fails, the temporary file is removed, nothing is left at the path, and the
// error is returned. Calling Close again returns an error.
func (w *Writer) Close() error {
	if w.done {
		return fmt.Errorf("data: close %s: writer is already closed", w.path)
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	err := w.finish()
	if err != nil {
		w.Abort()
		return fmt.Errorf("data: close %s: %w", w.path, err)
	}
	w.done = true
	return nil
}

func (w *Writer) finish() error {
	if err := w.buf.Flush(); err != nil {
		return err
	}
	var cnt [8]byte
	binary.LittleEndian.PutUint64(cnt[:], w.count)
	if _, err := w.tmp.WriteAt(cnt[:], countOffset); err != nil {
		return err
	}
	if err := w.tmp.Sync(); err != nil {
		return err
	}
	if err := w.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(w.tmp.Name(), w.path); err != nil {
		return err
	}
	syncDir(filepath.Dir(w.path))
	return nil
}

// Abort discards an unfinished corpus: it closes and removes the temporary file. It is a no-op
// after a successful Close. Use it (deferred, say) when the corpus is abandoned.
func (w *Writer) Abort() {
	if w.done {
		return
	}
	w.done = true
	w.tmp.Close()
	os.Remove(w.tmp.Name())
}

// syncDir fsyncs a directory so that a rename in it survives a crash. Errors are ignored:
// some systems cannot fsync directories, and the rename itself has already succeeded.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Corpus is an open token-corpus file, read by token index. Its methods are safe for
// concurrent use.
type Corpus struct {
	path  string
	f     *os.File
	width int
	vocab int
	count int64
	// dataOff is where the tokens start: the header's size.
	dataOff int64
	// fingerprint is the tokenizer's, in a VersionFingerprint corpus (hasFingerprint).
	fingerprint    [FingerprintSize]byte
	hasFingerprint bool
}

// Open opens and validates a corpus file of either version: the magic, the version, the token
// width, the vocabulary size and that the file size is exactly the header plus count*width
// bytes. Errors name the file and the problem.
func Open(path string) (*Corpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: open corpus: %w", err)
	}
	c, err := readHeader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

func readHeader(path string, f *os.File) (*Corpus, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("data: corpus %s: %s", path, fmt.Sprintf(format, args...))
	}
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("data: corpus %s: %w", path, err)
	}
	size := st.Size()
	if size < HeaderSize {
		return nil, bad("file is %d bytes, shorter than the %d-byte header", size, HeaderSize)
	}
	var hdr [HeaderSize]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return nil, fmt.Errorf("data: corpus %s: read header: %w", path, err)
	}
	if string(hdr[:8]) != Magic {
		return nil, bad("bad magic %q, want %q (not a token corpus)", hdr[:8], Magic)
	}
	version := binary.LittleEndian.Uint32(hdr[8:])
	if version != Version && version != VersionFingerprint {
		return nil, bad("unsupported format version %d, want %d or %d", version, Version, VersionFingerprint)
	}
	c := &Corpus{path: path, f: f, dataOff: HeaderSize}
	if version == VersionFingerprint {
		if size < HeaderSizeFingerprint {
			return nil, bad("file is %d bytes, shorter than the %d-byte header of version %d", size, HeaderSizeFingerprint, version)
		}
		if _, err := f.ReadAt(c.fingerprint[:], HeaderSize); err != nil {
			return nil, fmt.Errorf("data: corpus %s: read header: %w", path, err)
		}
		c.dataOff, c.hasFingerprint = HeaderSizeFingerprint, true
	}
	width := int(binary.LittleEndian.Uint32(hdr[12:]))
	vocab := int64(binary.LittleEndian.Uint32(hdr[16:]))
	if err := checkShape(width, vocab); err != nil {
		return nil, bad("%v", err)
	}
	count := binary.LittleEndian.Uint64(hdr[countOffset:])
	if count > uint64(math.MaxInt64-c.dataOff)/uint64(width) {
		return nil, bad("token count %d is impossibly large", count)
	}
	if want := c.dataOff + int64(count)*int64(width); size != want {
		return nil, bad("file is %d bytes, but a version %d header and its %d tokens of %d bytes need exactly %d (truncated or trailing data)",
			size, version, count, width, want)
	}
	c.width, c.vocab, c.count = width, int(vocab), int64(count)
	return c, nil
}

// Fingerprint is the fingerprint of the tokenizer that made the corpus, and whether the corpus
// records one (VersionFingerprint; a Version corpus does not).
func (c *Corpus) Fingerprint() ([FingerprintSize]byte, bool) { return c.fingerprint, c.hasFingerprint }

// Path returns the file the corpus was opened from.
func (c *Corpus) Path() string { return c.path }

// Len returns the number of tokens in the corpus.
func (c *Corpus) Len() int64 { return c.count }

// Vocab returns the vocabulary size recorded in the header: every id is in [0, Vocab()).
func (c *Corpus) Vocab() int { return c.vocab }

// Width returns the token width in bytes (2 or 4).
func (c *Corpus) Width() int { return c.width }

// Close closes the file.
func (c *Corpus) Close() error { return c.f.Close() }

// readChunk is how many bytes ReadAt reads from the file at a time.
const readChunk = 1 << 16

// ReadAt reads tokens starting at token index tokenOffset into dst, like io.ReaderAt: it
// returns the number of tokens read, and io.EOF when fewer than len(dst) remain (including
// tokenOffset == Len()). A negative offset or one past the end is an error, and so is an id
// in the file outside [0, Vocab()) (a corrupt file).
func (c *Corpus) ReadAt(dst []int32, tokenOffset int64) (int, error) {
	if tokenOffset < 0 || tokenOffset > c.count {
		return 0, fmt.Errorf("data: corpus %s: token offset %d outside [0, %d]", c.path, tokenOffset, c.count)
	}
	n := len(dst)
	var eof error
	if rem := c.count - tokenOffset; int64(n) > rem {
		n, eof = int(rem), io.EOF
	}
	per := readChunk / c.width
	buf := make([]byte, min(n, per)*c.width)
	for done := 0; done < n; {
		k := min(n-done, per)
		b := buf[:k*c.width]
		off := c.dataOff + (tokenOffset+int64(done))*int64(c.width)
		if _, err := c.f.ReadAt(b, off); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the file shrank after Open
			}
			return done, fmt.Errorf("data: corpus %s: read tokens at %d: %w", c.path, tokenOffset+int64(done), err)
		}
		for i := range k {
			var id uint32
			if c.width == 2 {
				id = uint32(binary.LittleEndian.Uint16(b[2*i:]))
			} else {
				id = binary.LittleEndian.Uint32(b[4*i:])
			}
			if int64(id) >= int64(c.vocab) {
				return done + i, fmt.Errorf("data: corpus %s: token %d is %d, outside the vocabulary of %d (corrupt file)",
					c.path, tokenOffset+int64(done+i), id, c.vocab)
			}
			dst[done+i] = int32(id)
		}
		done += k
	}
	return n, eof
}

// Window returns a new slice holding the n tokens starting at token index offset. Unlike
// ReadAt it is an error for the window not to lie wholly inside the corpus.
func (c *Corpus) Window(offset int64, n int) ([]int32, error) {
	if n < 0 || offset < 0 || offset > c.count || int64(n) > c.count-offset {
		return nil, fmt.Errorf("data: corpus %s: window [%d, %d+%d) outside the %d tokens", c.path, offset, offset, n, c.count)
	}
	dst := make([]int32, n)
	if _, err := c.ReadAt(dst, offset); err != nil {
		return nil, err
	}
	return dst, nil
}
