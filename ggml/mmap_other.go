//go:build !unix

package ggml

import (
	"errors"
	"os"
)

// mmapFile is unavailable here; MapGGUF reads the file instead.
func mmapFile(f *os.File, size int64) ([]byte, error) {
	return nil, errors.New("memory mapping is not supported on this platform")
}

func munmapFile(b []byte) error { return nil }
