package train

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNextToken(t *testing.T) {
	got, err := NextToken([]int32{2, 0, 3, 1}, 4)
	require.NoError(t, err)
	assert.Equal(t, []float32{
		1, 0, 0, 0, // position 0 predicts ids[1] = 0
		0, 0, 0, 1, // position 1 predicts 3
		0, 1, 0, 0, // position 2 predicts 1
	}, got)
	requireRowsSumToOne(t, got, 4)

	_, err = NextToken([]int32{1}, 4)
	assert.ErrorContains(t, err, "at least 2")
	_, err = NextToken([]int32{1, 2}, 0)
	assert.ErrorContains(t, err, "vocabulary")
	_, err = NextToken([]int32{1, 2, 4}, 4)
	assert.ErrorContains(t, err, "id 4 at position 2")
	_, err = NextToken([]int32{1, -1, 2}, 4)
	assert.ErrorContains(t, err, "id -1 at position 1")
	_, err = NextToken([]int32{9, 1}, 4)
	assert.NoError(t, err, "NextToken does not check the input-only ids[0]")
}

func TestNextTokenChecked(t *testing.T) {
	got, err := NextTokenChecked([]int32{0, 1}, 2)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1}, got)
	_, err = NextTokenChecked([]int32{9, 1}, 4)
	assert.ErrorContains(t, err, "id 9 at position 0")
	_, err = NextTokenChecked([]int32{0, 1, 2, 7}, 4)
	assert.ErrorContains(t, err, "id 7 at position 3")
	_, err = NextTokenChecked(nil, 4)
	assert.Error(t, err)
}

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

// requireRowsSumToOne checks the invariant ggml's cross-entropy backward relies on.
func requireRowsSumToOne(t *testing.T, labels []float32, width int) {
	t.Helper()
	require.Zero(t, len(labels)%width)
	for r := 0; r < len(labels)/width; r++ {
		var s float32
		for _, x := range labels[r*width : (r+1)*width] {
			s += x
		}
		require.Equalf(t, float32(1), s, "row %d", r)
	}
}
