// Package low is a subfolder of the test tree, read when Options.Subdirs asks for them.
package low

import "strings"

// N is what top imports low for.
var N = strings.Count("a", "")
