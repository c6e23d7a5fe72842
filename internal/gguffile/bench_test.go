package gguffile

import (
	"fmt"
	"testing"
)

// BenchmarkReadTokens reads a header with a tokenizer-sized string array.
func BenchmarkReadTokens(b *testing.B) {
	toks := make([]string, 200000)
	scores := make([]float32, 200000)
	types := make([]int32, 200000)
	for i := range toks {
		toks[i] = fmt.Sprintf("tok%d", i)
	}
	data := buildFile(b, []KV{{"tokenizer.ggml.tokens", toks}, {"tokenizer.ggml.scores", scores}, {"tokenizer.ggml.token_type", types}}, someTensors)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := readBytes(data); err != nil {
			b.Fatal(err)
		}
	}
}
