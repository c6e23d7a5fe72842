// Package infer holds toy's commands that run a GGUF model on text in the terminal: toy
// generate (generate.go, with speculative decoding in speculative.go), toy chat and generate
// -cnv (chat.go; reply.go is the reply loop both share, and common.go their standard input and
// drawn seed), toy perplexity (perplexity.go) and toy inspect (inspect.go). Opening the model,
// its template and its presets is cli's, which toy serve shares.
package infer
