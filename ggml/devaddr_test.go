package ggml

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeviceAddress: a tensor without memory, and one in host memory (the CPU backend's), have
// no device address.
func TestDeviceAddress(t *testing.T) {
	ctx, err := NewContext(ContextOptions{MaxTensors: 1})
	require.NoError(t, err)
	defer ctx.Close()
	x := ctx.NewTensor(F32, 8)
	_, err = x.DeviceAddress()
	assert.ErrorContains(t, err, "no memory yet")
	be, err := NewCPUBackend(1)
	require.NoError(t, err)
	defer be.Close()
	buf, err := be.Alloc(ctx)
	require.NoError(t, err)
	defer buf.Close()
	_, err = x.DeviceAddress()
	assert.ErrorContains(t, err, "host memory")
}
