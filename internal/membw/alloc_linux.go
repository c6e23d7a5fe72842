package membw

import (
	"syscall"
	"unsafe"
)

// allocate maps n bytes (a multiple of 4 KiB) of anonymous memory, backed by transparent huge
// pages where the system allows them, as toy's weights are; free unmaps it.
func allocate(n int) (buf []uint64, free func(), err error) {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	_ = syscall.Madvise(mem, syscall.MADV_HUGEPAGE) // a refusal changes speed, not the result's meaning
	return unsafe.Slice((*uint64)(unsafe.Pointer(&mem[0])), n/8), func() { _ = syscall.Munmap(mem) }, nil
}
