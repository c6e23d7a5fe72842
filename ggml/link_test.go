package ggml

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/ggmlc"
)

// TestCheckLinked asks the linked ggml for the name of every type, op, unary op and GLU op the
// spec declares: a renumbered enum in the library would fail here (and at start-up).
func TestCheckLinked(t *testing.T) {
	require.NoError(t, ggmlc.CheckLinked())
}
