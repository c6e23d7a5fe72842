package train

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFixedTarget(t *testing.T) {
	got, err := FixedTarget(3, 2, 1)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 0, 1, 0, 1}, got)
	_, err = FixedTarget(0, 2, 1)
	assert.Error(t, err)
	_, err = FixedTarget(2, 0, 0)
	assert.Error(t, err)
	_, err = FixedTarget(2, 2, 2)
	assert.ErrorContains(t, err, "fixed target id 2")
	_, err = FixedTarget(2, 2, -1)
	assert.Error(t, err)
}

func TestOneHotClass(t *testing.T) {
	got, err := OneHotClass([]int32{2, 0}, 3)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 1, 1, 0, 0}, got)
	_, err = OneHotClass(nil, 3)
	assert.Error(t, err)
	_, err = OneHotClass([]int32{1}, 0)
	assert.ErrorContains(t, err, "classes")
	_, err = OneHotClass([]int32{0, 1, 3}, 3)
	assert.ErrorContains(t, err, "id 3 at position 2")
}
