// Package top is importgraph's test tree: its imports are what the walk must list.
package top

import (
	"fmt"

	"example.com/m/low"
)

var _ = fmt.Sprint(low.N)
