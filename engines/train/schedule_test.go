package train

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConstant(t *testing.T) {
	c := Constant{Rate: 3e-4}
	require.NoError(t, c.Validate())
	for _, s := range []int{0, 1, 1000, -3} {
		assert.Equal(t, 3e-4, c.LR(s))
	}
	assert.Error(t, Constant{}.Validate())
	assert.Error(t, Constant{Rate: math.Inf(1)}.Validate())
	var _ Schedule = c
}

func TestCosineBoundaries(t *testing.T) {
	c := Cosine{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 110}
	require.NoError(t, c.Validate())
	const tol = 1e-15
	assert.InDelta(t, 1e-4, c.LR(0), tol, "step 0 is Peak/Warmup, not 0")
	assert.InDelta(t, 5e-4, c.LR(4), tol)
	assert.InDelta(t, 1e-3, c.LR(9), tol, "warmup-1 reaches Peak")
	assert.InDelta(t, 1e-3, c.LR(10), tol, "decay starts at Peak")
	assert.InDelta(t, 1e-4+0.9e-3*0.5, c.LR(60), tol, "halfway through decay")
	assert.InDelta(t, 1e-4+0.9e-3*0.5*(1+math.Cos(math.Pi*99/100)), c.LR(109), tol)
	assert.Equal(t, 1e-4, c.LR(110), "Total gives Min")
	assert.Equal(t, 1e-4, c.LR(111))
	assert.Equal(t, 1e-4, c.LR(1_000_000))
	assert.Equal(t, c.LR(0), c.LR(-5), "negative steps act as step 0")

	// Monotone: up during warmup, down afterwards.
	for s := 1; s < 10; s++ {
		assert.Greater(t, c.LR(s), c.LR(s-1), "step %d", s)
	}
	for s := 11; s <= 110; s++ {
		assert.Less(t, c.LR(s), c.LR(s-1), "step %d", s)
	}
}

func TestCosineNoWarmup(t *testing.T) {
	c := Cosine{Peak: 2, Min: 0, Warmup: 0, Total: 4}
	require.NoError(t, c.Validate())
	assert.Equal(t, 2.0, c.LR(0))
	assert.InDelta(t, 1.0, c.LR(2), 1e-15)
	assert.Equal(t, 0.0, c.LR(4))
	one := Cosine{Peak: 1, Min: 0.5, Warmup: 1, Total: 2}
	require.NoError(t, one.Validate())
	assert.Equal(t, 1.0, one.LR(0), "a 1-step warmup is Peak at once")
	assert.Equal(t, 1.0, one.LR(1))
	assert.Equal(t, 0.5, one.LR(2))
}

func TestCosineValidate(t *testing.T) {
	for _, c := range []struct {
		c    Cosine
		want string
	}{
		{Cosine{Peak: 0, Total: 10}, "peak"},
		{Cosine{Peak: math.NaN(), Total: 10}, "peak"},
		{Cosine{Peak: 1, Min: -0.1, Total: 10}, "minimum"},
		{Cosine{Peak: 1, Min: 2, Total: 10}, "minimum"},
		{Cosine{Peak: 1, Min: math.NaN(), Total: 10}, "minimum"},
		{Cosine{Peak: 1, Warmup: -1, Total: 10}, "warmup"},
		{Cosine{Peak: 1, Warmup: 10, Total: 10}, "exceed warmup"},
		{Cosine{Peak: 1}, "exceed warmup"},
	} {
		assert.ErrorContains(t, c.c.Validate(), c.want, "%+v", c.c)
	}
}

func TestParseSchedule(t *testing.T) {
	s, err := ParseSchedule("cosine", 1e-3, 1e-4, 10, 100)
	require.NoError(t, err)
	assert.Equal(t, Cosine{Peak: 1e-3, Min: 1e-4, Warmup: 10, Total: 100}, s)
	s, err = ParseSchedule(" Constant ", 3e-4, 1e-5, 100, 10)
	require.NoError(t, err, "constant ignores min, warmup and total")
	assert.Equal(t, Constant{Rate: 3e-4}, s)

	_, err = ParseSchedule("linear", 1e-3, 0, 0, 10)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"linear"`)
	assert.Contains(t, err.Error(), "cosine")
	_, err = ParseSchedule("cosine", 1e-3, 0, 10, 5)
	assert.ErrorContains(t, err, "exceed warmup")
	_, err = ParseSchedule("constant", 0, 0, 0, 0)
	assert.ErrorContains(t, err, "constant learning rate")
}

func TestScheduleNamesParse(t *testing.T) {
	for _, n := range ScheduleNames() {
		_, err := ParseSchedule(n, 1e-3, 1e-4, 1, 10)
		assert.NoError(t, err, n)
	}
}
