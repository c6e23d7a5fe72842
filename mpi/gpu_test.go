package mpi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLocalGPU: a cuda build's rank takes the GPU of its local rank, among CUDA_VISIBLE_DEVICES
// when set, and a rank with no GPU left, or no local rank, is an error that says why.
func TestLocalGPU(t *testing.T) {
	for _, c := range []struct{ local, visible, want string }{
		{"0", "", "0"},
		{"3", "", "3"},
		{"1", "4,5,6", "5"},
		{"0", "GPU-8f2c1d3e", "GPU-8f2c1d3e"},
		{"2", "1, 3, 7", "7"},
	} {
		got, err := localGPU(c.local, c.visible)
		require.NoError(t, err, "%+v", c)
		assert.Equal(t, c.want, got, "%+v", c)
	}
	_, err := localGPU("2", "0,1")
	assert.ErrorContains(t, err, "mpi: local rank 2 has no GPU: CUDA_VISIBLE_DEVICES=0,1 lists 2")
	_, err = localGPU("", "")
	assert.ErrorContains(t, err, "OMPI_COMM_WORLD_LOCAL_RANK")
}
