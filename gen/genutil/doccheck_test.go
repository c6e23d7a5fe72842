package genutil

import (
	"go/token"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckDocs(t *testing.T) {
	good := `package p

// T is a type.
type T int

// String returns t's name.
func (t T) String() string { return "" }

func (t unexported) Exported() {}

type unexported int

// F does things.
func F() {}

// The values of T; a group member may go undocumented.
const (
	// A is the first.
	A T = 1
	B T = 2
)

// V, W are two variables.
var V, W = 1, 2

// Sonames is a variable.
var Sonames []string
`
	require.NoError(t, checkDocs("good.go", []byte(good), nil))

	bad := `package p

// CPUInit makes a backend.
func BackendCPUInit() {}

func Undocumented() {}

// a lower-case start.
type T int

const (
	// kernels/x.cu
	Module T = 1
)

// Value is wrong in a lone declaration.
var Other = 1

// TypeName names t.
func (t T) Name() string { return "" }
`
	err := checkDocs("bad.go", []byte(bad), map[string]token.Position{
		"BackendCPUInit": {Filename: "specs/ggml/backend.go", Line: 12},
	})
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, `specs/ggml/backend.go:12 (emitted at bad.go:4:6): the doc comment of BackendCPUInit must start with its name, not "CPUInit makes a backend."`)
	assert.Contains(t, msg, "bad.go:6:6: Undocumented has no doc comment")
	assert.Contains(t, msg, "bad.go:9:6: the doc comment of T must start")
	assert.Contains(t, msg, "bad.go:13:2: the doc comment of Module must start")
	assert.Contains(t, msg, "bad.go:17:5: the doc comment of Other must start")
	assert.Contains(t, msg, "bad.go:20:12: the doc comment of Name must start")
}
