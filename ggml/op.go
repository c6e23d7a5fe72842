package ggml

import (
	"fmt"
	"math"

	"github.com/toyml/toy/generated/ggmlc"
)

// op runs one graph-building call after its checks: every input must be valid and live, the
// context must have room for results more tensors, and check (if any) must pass. Otherwise
// the first error is recorded on c and op returns nil without calling into C.
func (c *Context) op(name string, inputs []*Tensor, results int, check func() error, call func() ggmlc.Tensor) *Tensor {
	for i, in := range inputs {
		if in == nil {
			if c.err == nil {
				c.setErr(name, fmt.Errorf("operand %d is invalid", i))
			}
			return nil
		}
		if in.ctx.c.IsNil() {
			return c.setErr(name, fmt.Errorf("operand %d belongs to a closed context", i))
		}
	}
	if err := c.room(results); err != nil {
		return c.setErr(name, err)
	}
	if check != nil {
		if err := check(); err != nil {
			return c.setErr(name, err)
		}
	}
	return c.wrap(call())
}

func isFloat(t Type) bool { return t == F32 || t == F16 || t == BF16 }

func needFloat(ts ...*Tensor) error {
	for _, t := range ts {
		if !isFloat(t.Type()) {
			return fmt.Errorf("%s: want f32, f16 or bf16", t.describe())
		}
	}
	return nil
}

func needType(t *Tensor, want Type, role string) error {
	if t.Type() != want {
		return fmt.Errorf("%s %s: want %s", role, t.describe(), TypeName(want))
	}
	return nil
}

// needF32Rows checks that t is f32 with contiguous rows, as toy's own kernels read their
// activations.
func needF32Rows(t *Tensor, role string) error {
	if err := needType(t, F32, role); err != nil {
		return err
	}
	if t.Nb()[0] != 4 {
		return fmt.Errorf("%s: want rows with contiguous elements", t.describe())
	}
	return nil
}

// needFiniteScale checks a scale that a kernel multiplies scores by.
func needFiniteScale(scale float32) error {
	if math.IsNaN(float64(scale)) || math.IsInf(float64(scale), 0) {
		return fmt.Errorf("scale %g: want a finite number", scale)
	}
	return nil
}

func needContiguous(ts ...*Tensor) error {
	for _, t := range ts {
		if !t.IsContiguous() {
			return fmt.Errorf("%s is not contiguous (use Cont first)", t.describe())
		}
	}
	return nil
}

// needRows checks that each row is dense (nb[0] is the element size), which most CPU kernels
// assume without checking.
func needRows(ts ...*Tensor) error {
	for _, t := range ts {
		if t.Ne()[0] != 1 && t.Nb()[0] != ggmlc.TypeSize(t.Type()) {
			return fmt.Errorf("%s has strided rows (use Cont first)", t.describe())
		}
	}
	return nil
}

// needContiguous1 is ggml_is_contiguous_1: dense rows, and dimensions 2 and 3 dense over
// dimension 1 (which may be strided), as ggml's unary ops require.
func needContiguous1(t *Tensor) error {
	ne, nb := t.Ne(), t.Nb()
	next := ggmlc.TypeSize(t.Type())
	if ne[0] != 1 && nb[0] != next {
		return fmt.Errorf("%s has strided rows (use Cont first)", t.describe())
	}
	next *= int(ne[0])
	for i := 1; i < 4; i++ {
		if ne[i] == 1 {
			continue
		}
		if i > 1 && nb[i] != next {
			return fmt.Errorf("%s is permuted beyond its rows (use Cont first)", t.describe())
		}
		next = int(ne[i]) * nb[i]
	}
	return nil
}

// canRepeat is ggml_can_repeat(small, big): small tiles big in every dimension.
func canRepeat(small, big *Tensor) error {
	s, b := small.Ne(), big.Ne()
	for i := range s {
		if b[i]%s[i] != 0 {
			return fmt.Errorf("%s does not broadcast over %s (dimension %d: %d is not a multiple of %d)", small.describe(), big.describe(), i, b[i], s[i])
		}
	}
	return nil
}

func sameShape(a, b *Tensor) error {
	if a.Ne() != b.Ne() {
		return fmt.Errorf("shapes differ: %s and %s", a.describe(), b.describe())
	}
	return nil
}
