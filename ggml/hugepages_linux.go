package ggml

import (
	"syscall"
	"unsafe"
)

// adviseHugePages asks Linux to back the n bytes at p with transparent huge pages (2 MiB) as
// they are first written, where the system allows it (transparent_hugepage "madvise" or
// "always"); elsewhere it does nothing. Weights streamed by every decoding step then cost a
// TLB entry per 2 MiB instead of per 4 KiB (docs/PERFORMANCE.md, "Weights read into huge pages"). Only
// the whole pages inside the range are advised, and a refusal is ignored: it changes speed,
// never a value.
func adviseHugePages(p unsafe.Pointer, n int) {
	const page = 4096
	skip := int((page - uintptr(p)%page) % page)
	if n-skip < page {
		return
	}
	_ = syscall.Madvise(unsafe.Slice((*byte)(unsafe.Add(p, skip)), (n-skip)/page*page), syscall.MADV_HUGEPAGE)
}

// releasePages drops the process's pages of b, part of a read-only mapping of a file
// (MappedGGUF.Release): the next read faults them back in from the page cache or the file.
func releasePages(b []byte) bool {
	return len(b) > 0 && syscall.Madvise(b, syscall.MADV_DONTNEED) == nil
}
