package blasgemm

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loaded skips where OpenBLAS is not installed (CI installs libopenblas-dev, so it runs there).
func loaded(t *testing.T) {
	if err := Load(); err != nil {
		t.Skipf("OpenBLAS is not installed: %v", err)
	}
}

// TestMatMulMatchesGo checks OpenBLAS's product, as bound, against a float64 loop.
func TestMatMulMatchesGo(t *testing.T) {
	loaded(t)
	const m, n, k = 7, 5, 9
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = rng.Float32()*2 - 1
	}
	for i := range b {
		b[i] = rng.Float32()*2 - 1
	}
	got, err := MatMul(a, b, m, n, k)
	require.NoError(t, err)
	for j := 0; j < n; j++ {
		for i := 0; i < m; i++ {
			want := 0.0
			for l := 0; l < k; l++ {
				want += float64(a[i*k+l]) * float64(b[j*k+l])
			}
			assert.InDelta(t, want, float64(got[j*m+i]), 1e-5, "C[%d,%d]", j, i)
		}
	}
	_, err = MatMul(a, b[1:], m, n, k)
	assert.ErrorContains(t, err, "want 7×9 and 5×9")
}

func TestMeasure(t *testing.T) {
	loaded(t)
	r, err := Measure(1, 64, 32, 128, 10*time.Millisecond)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, r.Reps, 2)
	assert.Greater(t, r.GFLOPS, 0.0)
	assert.GreaterOrEqual(t, r.Best, r.GFLOPS*0.999)
	_, err = Measure(0, 64, 32, 128, time.Millisecond)
	assert.Error(t, err)
}
