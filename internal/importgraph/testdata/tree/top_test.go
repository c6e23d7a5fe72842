package top

import "example.com/m/high" // test-only: listed when Options.Tests asks for test files

var _ = high.N
