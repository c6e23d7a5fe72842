package llamacpp

import . "github.com/toyml/toy/specs/spec"

// API is the part of llama.h the oracle calls. Each method binds llama_NAME.
//
//kernelgen:functions prefix=llama_
type API interface {
	// BackendInit initialises llama.cpp's backends; call it once before anything else.
	BackendInit()
	// PrintSystemInfo describes the CPU features and backends llama.cpp was built with.
	PrintSystemInfo() string
	// FlashAttnTypeName is t's name ("auto", "disabled", "enabled").
	FlashAttnTypeName(t FlashAttnType) string

	// ModelDefaultParams are the default ModelParams.
	ModelDefaultParams() ModelParams
	// ContextDefaultParams are the default ContextParams.
	ContextDefaultParams() ContextParams

	// ModelLoadFromFile loads the GGUF at pathModel; nil on failure (llama.cpp logs why).
	ModelLoadFromFile(pathModel string, params ModelParams) Model
	// ModelFree releases model and its adapters.
	ModelFree(model Model)
	// ModelGetVocab is model's vocabulary.
	ModelGetVocab(model Const[Model]) Const[Vocab]
	// ModelNCtxTrain is the context length model was trained with.
	ModelNCtxTrain(model Const[Model]) int32
	// ModelNEmbd is model's embedding width.
	ModelNEmbd(model Const[Model]) int32

	// InitFromModel makes a context over model; nil on failure.
	InitFromModel(model Model, params ContextParams) Context
	// Free releases ctx.
	Free(ctx Context)
	// NCtx is ctx's context size in tokens.
	NCtx(ctx Const[Context]) uint32
	// NBatch is the most tokens one Decode on ctx may be given.
	NBatch(ctx Const[Context]) uint32
	// GetMemory is ctx's sequence memory (KV cache).
	GetMemory(ctx Const[Context]) Memory
	// MemoryClear empties mem (and its data buffers, with data).
	MemoryClear(mem Memory, data bool)

	// VocabNTokens is the number of tokens in vocab.
	VocabNTokens(vocab Const[Vocab]) int32
	// VocabKind is vocab's tokenizer type.
	//kernelgen:c llama_vocab_type
	VocabKind(vocab Const[Vocab]) VocabType
	// Tokenize writes the tokens of text's first textLen bytes into tokens (room for
	// nTokensMax) and returns their number, or minus the number it needs when there is not
	// enough room. addSpecial adds BOS/EOS as the vocabulary says; parseSpecial matches the
	// text of special tokens.
	Tokenize(vocab Const[Vocab], text string, textLen int32, tokens []int32, nTokensMax int32, addSpecial, parseSpecial bool) int32
	// TokenToPiece writes token's text into buf (length bytes, no NUL) and returns its length,
	// or minus the length it needs. lstrip skips up to that many leading spaces; special
	// renders special tokens.
	TokenToPiece(vocab Const[Vocab], token int32, buf []Char, length int32, lstrip int32, special bool) int32

	// BatchGetOne makes a Batch of nTokens tokens of one sequence, numbered after the memory's
	// last position; the batch points into tokens.
	BatchGetOne(tokens []int32, nTokens int32) Batch
	// Decode runs the model on batch: 0 on success, 1 when the KV cache has no room, 2 when
	// aborted, -1 for an invalid batch, below -1 on a fatal error.
	Decode(ctx Context, batch Batch) int32
	// GetLogitsIth is the logits of the i-th output of the last Decode (negative i counts from
	// the end), or nil for an invalid i; it stays valid until the next Decode.
	GetLogitsIth(ctx Context, i int32) *float32

	// AdapterLoraInit loads the LoRA adapter at pathLora for model; nil on failure.
	AdapterLoraInit(model Model, pathLora string) AdapterLora
	// AdapterLoraFree releases adapter before its model.
	AdapterLoraFree(adapter AdapterLora)
	// SetAdapterLora applies adapter to ctx with the given scale (0 on success).
	SetAdapterLora(ctx Context, adapter AdapterLora, scale float32) int32
	// ClearAdapterLora removes every adapter from ctx.
	ClearAdapterLora(ctx Context)
}
