package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBenchTrainProfile runs bench train -profile on a tiny shape: the table by op covers the
// whole step (its shares add up to 100 %) and holds the training graph's ops, and the table of
// kinds of node has the rows asked for.
func TestBenchTrainProfile(t *testing.T) {
	out, errOut, code := runToy("bench", "train", "-preset", "tiny", "-seq", "16", "-steps", "1", "-t", "1", "-ceiling=false", "-profile", "3")
	require.Equal(t, 0, code, errOut)
	_, profile, ok := strings.Cut(out, "one step node by node")
	require.True(t, ok, out)
	tables := strings.Split(profile, "  wall ms")
	require.Len(t, tables, 3, profile) // the title line, the table by op, the table by kind
	rows := func(table string) [][]string {
		var r [][]string
		for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
			r = append(r, strings.Fields(line))
		}
		return r
	}
	share, ops := 0.0, map[string]bool{}
	for _, f := range rows(tables[1]) {
		require.GreaterOrEqual(t, len(f), 5, f)
		pct, err := strconv.ParseFloat(f[2], 64)
		require.NoError(t, err)
		share += pct
		ops[f[4]] = true
	}
	assert.InDelta(t, 100, share, 1, "shares of the step by op")
	for _, op := range []string{"MUL_MAT", "SOFT_MAX", "OPT_STEP_ADAMW", "CONT"} {
		assert.True(t, ops[op], "%s in %v", op, ops)
	}
	assert.Len(t, rows(tables[2]), 3)
}
