// Package export is toy export: it converts a GGUF model to a file type as llama-quantize
// does, merging LoRA adapters into its weights first when given (decoding.Export does the
// work; Run is its command line).
package export
