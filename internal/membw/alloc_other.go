//go:build !linux

package membw

// allocate makes n bytes of Go memory; free leaves them to the collector.
func allocate(n int) (buf []uint64, free func(), err error) {
	return make([]uint64, n/8), func() {}, nil
}
