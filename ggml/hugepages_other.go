//go:build !linux

package ggml

import "unsafe"

// adviseHugePages does nothing off Linux.
func adviseHugePages(p unsafe.Pointer, n int) {}

// releasePages does nothing off Linux: the pages stay until the mapping is closed.
func releasePages(b []byte) bool { return false }
