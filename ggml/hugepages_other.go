//go:build !linux

package ggml

import "unsafe"

// adviseHugePages does nothing off Linux.
func adviseHugePages(p unsafe.Pointer, n int) {}
