// Package input is a test input, left out under Options.SkipTestdata.
package input

import "example.com/m/forbidden"

var _ = forbidden.N
