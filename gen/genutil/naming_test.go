package genutil

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestGoDoc(t *testing.T) {
	for _, c := range []struct{ goName, specName, doc, want string }{
		{"BackendCPUInit", "CPUInit", "CPUInit makes a CPU backend.", "BackendCPUInit makes a CPU backend."},
		{"BackendFree", "Free", "Free frees b.", "BackendFree frees b."},
		{"Add", "Add", "Add adds.", "Add adds."},
		{"BackendName", "Name", "BackendName is already right.", "BackendName is already right."},
		// A word that only starts with the spec name is not the spec name.
		{"BackendName", "Name", "Names are copied.", "BackendName — Names are copied."},
		{"GGUFInit", "Init", "Returns a new context.", "GGUFInit — Returns a new context."},
		{"Init", "Init", "Init, with no arguments, starts.", "Init, with no arguments, starts."},
		{"X", "X", "", ""},
	} {
		assert.Equal(t, c.want, GoDoc(c.goName, c.specName, c.doc), c.doc)
	}
}
