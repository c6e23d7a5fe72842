package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"
)

// Document is one source file of a text corpus.
type Document struct {
	// Path is the file's path relative to the walked tree, with forward slashes
	// (for the Go source corpus, relative to GOROOT/src, e.g. "fmt/print.go").
	Path string
	// Text is the file's contents.
	Text []byte
}

// MaxGoFileSize is the size above which GoSource skips a file (generated tables and the like).
const MaxGoFileSize = 256 << 10

// HeldOutPermille is the share of files, in thousandths, that GoSource puts in the held-out part.
const HeldOutPermille = 50

// IsHeldOut reports whether the file at relative path rel belongs to the held-out part. It
// depends only on the path (a SHA-256 hash of it), so a file always lands in the same part,
// whatever else the tree holds.
func IsHeldOut(rel string) bool {
	h := sha256.Sum256([]byte(rel))
	return binary.LittleEndian.Uint64(h[:8])%1000 < HeldOutPermille
}

// GoRoot returns the root of the running Go installation: the TOY_GOROOT environment variable
// when set (an override), otherwise runtime.GOROOT, otherwise the output of `go env GOROOT`
// (runtime.GOROOT is empty in binaries built with -trimpath). The directory must contain src.
func GoRoot() (string, error) {
	if r := os.Getenv("TOY_GOROOT"); r != "" {
		return checkGoRoot(r)
	}
	// runtime.GOROOT is deprecated and empty under -trimpath, but it is the cheap first try.
	if r := runtime.GOROOT(); r != "" {
		if _, err := checkGoRoot(r); err == nil {
			return r, nil
		}
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("data: find GOROOT: runtime.GOROOT is empty and `go env GOROOT` failed: %w", err)
	}
	r := strings.TrimSpace(string(out))
	if r == "" {
		return "", errors.New("data: find GOROOT: `go env GOROOT` printed nothing")
	}
	return checkGoRoot(r)
}

func checkGoRoot(r string) (string, error) {
	if st, err := os.Stat(filepath.Join(r, "src")); err != nil || !st.IsDir() {
		return "", fmt.Errorf("data: GOROOT %s has no src directory", r)
	}
	return r, nil
}

// GoSource reads the Go standard library's source as a text corpus: the .go files under
// root/src, where root is a Go installation (GoRoot() when root is empty). It skips directories
// named testdata, files that are not regular files, and files larger than MaxGoFileSize.
// maxBytes bounds the total text of both parts (0 means no bound): files are then chosen in the
// order of a hash of their paths, skipping any that would take the total past it, so a bounded
// corpus is a deterministic sample of the whole library rather than its first directories.
// Each file goes to heldOut when IsHeldOut(its relative path), else to train; both parts are
// in lexical path order.
func GoSource(root string, maxBytes int64) (train, heldOut []Document, err error) {
	if maxBytes < 0 {
		return nil, nil, fmt.Errorf("data: go source: maxBytes %d is negative", maxBytes)
	}
	if root == "" {
		if root, err = GoRoot(); err != nil {
			return nil, nil, err
		}
	}
	src := filepath.Join(root, "src")
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("data: go source: %s is not a directory", src)
	}
	type candidate struct {
		rel  string
		size int64
	}
	var files []candidate
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".go") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > MaxGoFileSize {
			return nil
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		files = append(files, candidate{filepath.ToSlash(rel), info.Size()})
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("data: go source %s: %w", src, err)
	}
	if maxBytes > 0 {
		sort.SliceStable(files, func(i, j int) bool {
			hi, hj := sha256.Sum256([]byte(files[i].rel)), sha256.Sum256([]byte(files[j].rel))
			return string(hi[:]) < string(hj[:])
		})
		var total int64
		kept := files[:0]
		for _, f := range files {
			if total+f.size <= maxBytes {
				kept = append(kept, f)
				total += f.size
			}
		}
		files = kept
		sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	}
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(f.rel)))
		if err != nil {
			return nil, nil, fmt.Errorf("data: go source: %w", err)
		}
		if int64(len(text)) != f.size { // changed since the walk: keep the bound honest
			continue
		}
		doc := Document{Path: f.rel, Text: text}
		if IsHeldOut(f.rel) {
			heldOut = append(heldOut, doc)
		} else {
			train = append(train, doc)
		}
	}
	return train, heldOut, nil
}

// Join concatenates the documents' texts, each followed by sep, in order: a simple way to turn
// a document list into one text for a tokenizer.
func Join(docs []Document, sep []byte) []byte {
	n := 0
	for _, d := range docs {
		n += len(d.Text) + len(sep)
	}
	var b bytes.Buffer
	b.Grow(n)
	for _, d := range docs {
		b.Write(d.Text)
		b.Write(sep)
	}
	return b.Bytes()
}

// ReadTexts reads the file at path, or every regular file below the directory at path in
// lexical order, as documents (paths relative to path, forward slashes), reading at most
// maxBytes in all (0: no bound; negative is an error): the file that reaches the bound is cut
// there, at the start of the UTF-8 character the bound falls in, and the files after it are not
// read. A single file larger than the bound is read only up to it.
func ReadTexts(path string, maxBytes int64) ([]Document, error) {
	if maxBytes < 0 {
		return nil, fmt.Errorf("data: reading %s: at most %d bytes: want 0 (no bound) or more", path, maxBytes)
	}
	var docs []Document
	var total int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		limit := int64(-1)
		if maxBytes > 0 {
			if total >= maxBytes {
				return filepath.SkipAll
			}
			limit = maxBytes - total
		}
		b, cut, err := readPrefix(p, limit)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(path, p)
		if err != nil || rel == "." {
			rel = filepath.Base(p)
		}
		docs = append(docs, Document{Path: filepath.ToSlash(rel), Text: b})
		total += int64(len(b))
		if cut {
			return filepath.SkipAll // the bound is reached (up to a character)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("data: reading %s: %w", path, err)
	}
	return docs, nil
}

// readPrefix reads the file at path, or its first limit bytes when limit ≥ 0 and the file is
// longer (cut), cut back to the start of the UTF-8 character the limit falls in (a text that
// is not UTF-8 there is cut at the limit).
func readPrefix(path string, limit int64) (b []byte, cut bool, err error) {
	if limit < 0 {
		b, err = os.ReadFile(path)
		return b, false, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if b, err = io.ReadAll(io.LimitReader(f, limit+1)); err != nil {
		return nil, false, err
	}
	if int64(len(b)) <= limit {
		return b, false, nil
	}
	n := int(limit)
	for back := 0; back < utf8.UTFMax && n > 0 && !utf8.RuneStart(b[n]); back++ {
		n--
	}
	if !utf8.RuneStart(b[n]) {
		n = int(limit) // not UTF-8 here: the bound itself
	}
	return b[:n], true, nil
}
