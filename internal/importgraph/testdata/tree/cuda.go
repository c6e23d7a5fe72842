//go:build cuda

package top

import "example.com/m/forbidden" // the planted violation, in a file of one build only

var _ = forbidden.N
