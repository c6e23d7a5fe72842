package ggml

import (
	"fmt"

	"github.com/toyml/toy/generated/ggmlc"
)

// Reshape views the contiguous tensor a with a new shape of the same element count.
func (c *Context) Reshape(a *Tensor, ne ...int64) *Tensor {
	return c.op("Reshape", []*Tensor{a}, 1, func() error {
		if err := checkShape(a.Type(), ne); err != nil {
			return err
		}
		n := int64(1)
		for _, d := range ne {
			n *= d
		}
		if n != a.Len() {
			return fmt.Errorf("cannot reshape %s (%d elements) to %v", a.describe(), a.Len(), ne)
		}
		return needContiguous(a)
	}, func() ggmlc.Tensor {
		switch len(ne) {
		case 1:
			return ggmlc.Reshape1D(c.c, a.t, ne[0])
		case 2:
			return ggmlc.Reshape2D(c.c, a.t, ne[0], ne[1])
		case 3:
			return ggmlc.Reshape3D(c.c, a.t, ne[0], ne[1], ne[2])
		}
		return ggmlc.Reshape4D(c.c, a.t, ne[0], ne[1], ne[2], ne[3])
	})
}

// View is a view of a with shape ne (1 to 4 dimensions), byte strides nb for dimensions 1 up to
// len(ne)-1, starting offset bytes into a. Every element it can reach must lie inside a.
func (c *Context) View(a *Tensor, ne []int64, nb []int, offset int) *Tensor {
	return c.op("View", []*Tensor{a}, 1, func() error {
		if err := checkShape(a.Type(), ne); err != nil {
			return err
		}
		if len(nb) != len(ne)-1 {
			return fmt.Errorf("%d dimensions need %d strides, got %d", len(ne), len(ne)-1, len(nb))
		}
		row, _ := RowSize(a.Type(), ne[0])
		end := offset + row
		for i, s := range nb {
			if s < 0 {
				return fmt.Errorf("stride %d is negative", s)
			}
			end += int(ne[i+1]-1) * s
		}
		if offset < 0 || end > a.Bytes() {
			return fmt.Errorf("view %v at byte %d reaches byte %d of %s, which has %d", ne, offset, end, a.describe(), a.Bytes())
		}
		return nil
	}, func() ggmlc.Tensor {
		switch len(ne) {
		case 1:
			return ggmlc.View1D(c.c, a.t, ne[0], offset)
		case 2:
			return ggmlc.View2D(c.c, a.t, ne[0], ne[1], nb[0], offset)
		case 3:
			return ggmlc.View3D(c.c, a.t, ne[0], ne[1], ne[2], nb[0], nb[1], offset)
		}
		return ggmlc.View4D(c.c, a.t, ne[0], ne[1], ne[2], ne[3], nb[0], nb[1], nb[2], offset)
	})
}

// Permute moves dimension i of a to position axes[i] (ggml_permute's convention); axes must be
// a permutation of 0..3.
func (c *Context) Permute(a *Tensor, axes [4]int) *Tensor {
	return c.op("Permute", []*Tensor{a}, 1, func() error {
		var seen [4]bool
		for _, ax := range axes {
			if ax < 0 || ax > 3 || seen[ax] {
				return fmt.Errorf("axes %v are not a permutation of 0..3", axes)
			}
			seen[ax] = true
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.Permute(c.c, a.t, axes[0], axes[1], axes[2], axes[3]) })
}

// Transpose swaps dimensions 0 and 1 (a view; Cont makes it dense).
func (c *Context) Transpose(a *Tensor) *Tensor {
	return c.op("Transpose", []*Tensor{a}, 1, nil, func() ggmlc.Tensor { return ggmlc.Transpose(c.c, a.t) })
}

// Cont is a dense copy of a (of a view, a permutation or a transpose).
func (c *Context) Cont(a *Tensor) *Tensor {
	return c.op("Cont", []*Tensor{a}, 1, nil, func() ggmlc.Tensor { return ggmlc.Cont(c.c, a.t) })
}

// Dup is a copy of a.
func (c *Context) Dup(a *Tensor) *Tensor {
	return c.op("Dup", []*Tensor{a}, 1, nil, func() ggmlc.Tensor { return ggmlc.Dup(c.c, a.t) })
}

// Cpy copies a into b (converting the type) and returns the view of b holding the result; they
// must have the same number of elements.
func (c *Context) Cpy(a, b *Tensor) *Tensor {
	return c.op("Cpy", []*Tensor{a, b}, 1, func() error {
		if a.Len() != b.Len() {
			return fmt.Errorf("%s and %s differ in element count", a.describe(), b.describe())
		}
		if b.Ne()[0]%int64(BlockSize(b.Type())) != 0 {
			return fmt.Errorf("%s rows do not split into %s blocks", b.describe(), TypeName(b.Type()))
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.Cpy(c.c, a.t, b.t) })
}

// Cast is a converted to type typ.
func (c *Context) Cast(a *Tensor, typ Type) *Tensor {
	return c.op("Cast", []*Tensor{a}, 2, func() error {
		if !ValidType(typ) {
			return fmt.Errorf("invalid type %v", typ)
		}
		if a.Ne()[0]%int64(BlockSize(typ)) != 0 {
			return fmt.Errorf("%s rows do not split into %s blocks", a.describe(), TypeName(typ))
		}
		return nil
	}, func() ggmlc.Tensor { return ggmlc.Cast(c.c, a.t, typ) })
}
