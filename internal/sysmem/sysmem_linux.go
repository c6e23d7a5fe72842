//go:build linux

// Package sysmem reads how much memory the machine has, which loaders compare what a file's
// header asks them to allocate with before they allocate it.
package sysmem

import "syscall"

// Total is the machine's physical memory in bytes, 0 where it cannot be read.
func Total() int64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit)
}
