package train

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnigramLossHandComputed(t *testing.T) {
	// vocab 3, train counts {0: 2, 1: 1, 2: 0}, N = 3. Add-one smoothing gives
	// P = (c+1)/(N+V) = 3/6, 2/6, 1/6. Held out [0, 2]:
	// -(ln(1/2) + ln(1/6))/2 = ln(12)/2 ≈ 1.2424533.
	u, err := NewUnigram([]int32{0, 0, 1}, 3)
	require.NoError(t, err)
	got, err := u.CrossEntropy([]int32{0, 2})
	require.NoError(t, err)
	assert.InDelta(t, math.Log(12)/2, got, 1e-12)
	assert.InDelta(t, 1.2424533248940002, got, 1e-12)

	assert.InDelta(t, 0.5, u.Prob(0), 1e-15)
	assert.InDelta(t, 1.0/3, u.Prob(1), 1e-15)
	assert.InDelta(t, 1.0/6, u.Prob(2), 1e-15)
	assert.Equal(t, 0.0, u.Prob(3))
}

func TestUnigramUniform(t *testing.T) {
	// No training data: uniform, so the loss is ln V whatever is held out.
	u, err := NewUnigram(nil, 7)
	require.NoError(t, err)
	got, err := u.CrossEntropy([]int32{0, 6, 3})
	require.NoError(t, err)
	assert.InDelta(t, math.Log(7), got, 1e-12)
}

func TestUnigramErrors(t *testing.T) {
	_, err := NewUnigram([]int32{0, 3}, 3)
	assert.ErrorContains(t, err, "id 3 at position 1")
	_, err = NewUnigram(nil, 0)
	assert.Error(t, err)
	u, err := NewUnigram([]int32{0}, 2)
	require.NoError(t, err)
	_, err = u.CrossEntropy(nil)
	assert.Error(t, err)
	_, err = u.CrossEntropy([]int32{1, -1})
	assert.ErrorContains(t, err, "id -1 at position 1")
}
