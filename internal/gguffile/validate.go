package gguffile

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Rules shared by Read and Writer. Each returns an error whose message names
// the key or tensor; Read adds the byte offset.

func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty key") // ggml asserts on it
	case len(key) > MaxKeyLen:
		return fmt.Errorf("key %.40q...: %d bytes long, more than %d", key, len(key), MaxKeyLen)
	case strings.IndexByte(key, 0) >= 0:
		// ggml looks keys up with strcmp, so "general.alignment\x00x" would
		// shadow or stand in for "general.alignment".
		return fmt.Errorf("key %q contains a NUL byte", key)
	}
	return nil
}

func checkTensorName(name string) error {
	switch {
	case name == "":
		return errors.New("empty tensor name")
	case len(name) > MaxNameLen:
		return fmt.Errorf("tensor %.40q...: name is %d bytes long, ggml allows at most %d", name, len(name), MaxNameLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("tensor %q: name contains a NUL byte", name)
	}
	return nil
}

// checkAlignment checks the value of the general.alignment key.
func checkAlignment(v any) (int64, error) {
	a, ok := v.(uint32)
	if !ok {
		t, elem, _ := typeOf(v)
		what := t.String()
		if elem {
			what = "array of " + what
		}
		return 0, fmt.Errorf("key %q has type %s, must be uint32", AlignmentKey, what)
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("key %q is %d, must be a nonzero power of two", AlignmentKey, a)
	}
	return int64(a), nil
}

// checkValue checks what Read checks of a value: that it is a GGUF type.
func checkValue(key string, v any) error {
	if _, _, ok := typeOf(v); !ok {
		return fmt.Errorf("key %q: unsupported value type %T", key, v)
	}
	if key == AlignmentKey {
		_, err := checkAlignment(v)
		return err
	}
	return nil
}

// checkTensor checks a tensor's name, shape and type and returns its size in
// bytes. ne holds the stored dimensions (1 to 4 of them).
func checkTensor(name string, typ uint32, ne []int64) (full [MaxDims]int64, size int64, err error) {
	if err := checkTensorName(name); err != nil {
		return full, 0, err
	}
	if len(ne) < 1 || len(ne) > MaxDims {
		return full, 0, fmt.Errorf("tensor %q: %d dimensions, must be 1 to %d", name, len(ne), MaxDims)
	}
	for i := range full {
		full[i] = 1
	}
	copy(full[:], ne)
	for i, n := range full {
		if n < 0 {
			return full, 0, fmt.Errorf("tensor %q: dimension %d has %d elements, must not be negative", name, i, n)
		}
		if n == 0 && i > 0 {
			// ggml's overflow check divides INT64_MAX by ne[1], ne[2] and ne[3].
			return full, 0, fmt.Errorf("tensor %q: dimension %d has 0 elements, ggml requires at least 1 in dimensions 1 to 3", name, i)
		}
	}
	// ggml's own check that the element count is representable, verbatim.
	if math.MaxInt64/full[1] <= full[0] ||
		math.MaxInt64/full[2] <= full[0]*full[1] ||
		math.MaxInt64/full[3] <= full[0]*full[1]*full[2] {
		return full, 0, fmt.Errorf("tensor %q: shape %v has too many elements", name, ne)
	}
	if !validType(typ) {
		if typ < typeCount {
			return full, 0, fmt.Errorf("tensor %q: type %d (%s) is no longer supported by ggml", name, typ, traits[typ].name)
		}
		return full, 0, fmt.Errorf("tensor %q: unknown ggml type %d", name, typ)
	}
	tr := traits[typ]
	if full[0]%int64(tr.blockSize) != 0 {
		return full, 0, fmt.Errorf("tensor %q: type %s needs a multiple of %d elements per row, has %d", name, tr.name, tr.blockSize, full[0])
	}
	// ggml computes ne[0]*type_size before dividing by the block size.
	if hi, _ := bits.Mul64(uint64(full[0]), uint64(tr.typeSize)); hi != 0 {
		return full, 0, fmt.Errorf("tensor %q: shape %v of type %s is too large", name, ne, tr.name)
	}
	size, ok := int64(tr.typeSize), true
	size, ok = mulInt64(size, full[0]/int64(tr.blockSize))
	for i := 1; ok && i < MaxDims; i++ {
		size, ok = mulInt64(size, full[i])
	}
	if !ok {
		return full, 0, fmt.Errorf("tensor %q: shape %v of type %s is too large", name, ne, tr.name)
	}
	return full, size, nil
}

// pad rounds n up to a multiple of align (a power of two); n + align must not
// overflow.
func pad(n, align int64) int64 {
	return (n + align - 1) &^ (align - 1)
}
