// Package cli is what toy's commands share, below the rooms that hold the commands
// (cmd/toy/internal/infer, serve, bench, train, export, tools), which import it and never
// each other:
//
//   - errors.go, flags.go: the usage and interrupted errors, Exit (how an error becomes
//     toy's exit status), and parsing a command's flags;
//   - counts.go: the least values of each command's count flags;
//   - gate.go: the kernel gate, which resolves a model against the compiled-in kernel table
//     and refuses an unresolved lookup unless allowed;
//   - model.go, template.go, preset.go: the decoder's flags, opening a GGUF model and its
//     tokenizer, the chat template and the sampling preset a model brings;
//   - server.go: toy serve's flags and loading a server over a model (toy serve and toy bench
//     serve);
//   - families.go: the model families and presets toy train makes (toy train and toy bench
//     train);
//   - output.go: what an output path may be overwritten with, and reading inputs.
package cli
