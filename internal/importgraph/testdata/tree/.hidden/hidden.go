// Package hidden is in a hidden folder, left out under Options.SkipHidden.
package hidden

import "example.com/m/high"

var _ = high.N
