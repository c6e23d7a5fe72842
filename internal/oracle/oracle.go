// Package oracle runs llama.cpp as a differential oracle: an independent implementation of
// everything toy does at inference (tokenizing with a GGUF's vocabulary, the logits of a
// model, LoRA adapters), against which toy's tests and benchmarks compare its own results.
//
// It calls llama.cpp's C API through generated/llamacpp (bound by kernelgen from
// specs/llamacpp, proven against llama.h), which links llama.cpp's core from the ollama module
// toy already depends on, over the same ggml as toy's. Only tests and benchmarks import this
// package: the product binary (cmd/toy) never links llama.cpp, and a test checks it.
//
// Inputs are checked before they reach C (file kind, token ids, context size), so a bad input
// is an error rather than an abort. llama.cpp logs to stderr as it loads a model.
package oracle

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/toyml/toy/generated/llamacpp"
)

// Options say how Open loads a model.
type Options struct {
	// VocabOnly loads only the vocabulary: Tokenize and Piece work, Logits does not. A
	// vocabulary-only GGUF (llama.cpp's ggml-vocab-*.gguf) needs it.
	VocabOnly bool
	// Context is the most tokens one Logits call takes (0: 512, or the model's training
	// context if that is smaller).
	Context int
	// Threads is the number of CPU threads llama.cpp computes with (0: up to 4, at most the
	// usable cores).
	Threads int
	// FlashAttention makes llama.cpp use its fused attention.
	FlashAttention bool
	// KVF16 stores the KV cache as f16, llama.cpp's default, instead of f32 (for benchmarks:
	// the comparisons of logits keep f32).
	KVF16 bool
}

// Model is a GGUF loaded by llama.cpp (on the CPU, memory-mapped), with a context for decoding
// unless it was opened VocabOnly. A Model is not safe for concurrent use; its methods lock.
type Model struct {
	mu     sync.Mutex
	path   string
	model  llamacpp.Model
	vocab  llamacpp.Vocab
	ctx    llamacpp.Context // nil when VocabOnly
	pool   llamacpp.Threadpool
	last   []float32 // Eval's logits
	cp     llamacpp.ContextParams
	loras  []lora
	nVocab int
	nCtx   int
	pos    int // tokens in the KV cache
}

type lora struct {
	a     llamacpp.AdapterLora
	scale float32
}

var backendOnce sync.Once

// Open loads the GGUF at path with llama.cpp: weights on the CPU (no layer offloaded),
// memory-mapped, a KV cache of float32 so that comparisons measure the model, not the cache
// (unless KVF16), computed by a pool of Threads threads that persists until Close.
func Open(path string, opts Options) (*Model, error) {
	if opts.Context < 0 || opts.Context > math.MaxInt32 || opts.Threads < 0 || opts.Threads > 1024 {
		return nil, fmt.Errorf("oracle: context %d or threads %d out of range", opts.Context, opts.Threads)
	}
	// llama.cpp would block on a FIFO and fail obscurely on a directory: only regular files.
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("oracle: %s is not a regular file", path)
	}
	backendOnce.Do(llamacpp.BackendInit)

	mp := llamacpp.ModelDefaultParams()
	mp.NGpuLayers = 0
	mp.UseMmap = true
	mp.VocabOnly = opts.VocabOnly
	model := llamacpp.ModelLoadFromFile(path, mp)
	if model.IsNil() {
		return nil, fmt.Errorf("oracle: llama.cpp cannot load %s (its log on stderr says why)", path)
	}
	m := &Model{path: path, model: model, vocab: llamacpp.ModelGetVocab(model)}
	m.nVocab = int(llamacpp.VocabNTokens(m.vocab))
	if opts.VocabOnly {
		return m, nil
	}

	n := opts.Context
	if n == 0 {
		n = 512
		if train := int(llamacpp.ModelNCtxTrain(model)); train > 0 && train < n {
			n = train
		}
	}
	threads := opts.Threads
	if threads == 0 {
		threads = min(4, runtime.NumCPU())
	}
	cp := llamacpp.ContextDefaultParams()
	cp.NCtx, cp.NBatch, cp.NUbatch = uint32(n), uint32(n), uint32(n)
	cp.NSeqMax = 1
	cp.NThreads, cp.NThreadsBatch = int32(threads), int32(threads)
	cp.Embeddings = false
	cp.TypeK, cp.TypeV = llamacpp.GGMLTypeF32, llamacpp.GGMLTypeF32
	if opts.KVF16 {
		cp.TypeK, cp.TypeV = llamacpp.GGMLTypeF16, llamacpp.GGMLTypeF16
	}
	cp.FlashAttnType = llamacpp.FlashAttnTypeDisabled
	if opts.FlashAttention {
		cp.FlashAttnType = llamacpp.FlashAttnTypeEnabled
	}
	cp.NoPerf = true
	m.cp, m.nCtx = cp, n
	// A persistent pool, as llama-bench attaches: without one, every graph starts and joins its
	// worker threads.
	params := llamacpp.ThreadpoolParamsDefault(threads)
	if m.pool = llamacpp.ThreadpoolNew(&params); m.pool.IsNil() {
		llamacpp.ModelFree(model)
		return nil, fmt.Errorf("oracle: cannot start a pool of %d threads", threads)
	}
	if err := m.newContext(); err != nil {
		llamacpp.ModelFree(model)
		llamacpp.ThreadpoolFree(m.pool)
		return nil, err
	}
	return m, nil
}

// newContext (re)makes the context, with every adapter set so far.
func (m *Model) newContext() error {
	if !m.ctx.IsNil() {
		llamacpp.Free(m.ctx)
	}
	m.ctx, m.pos = llamacpp.InitFromModel(m.model, m.cp), 0
	if m.ctx.IsNil() {
		return fmt.Errorf("oracle: llama.cpp cannot make a context of %d tokens for %s", m.nCtx, m.path)
	}
	llamacpp.AttachThreadpool(m.ctx, m.pool, llamacpp.Threadpool{})
	for _, l := range m.loras {
		if rc := llamacpp.SetAdapterLora(m.ctx, l.a, l.scale); rc != 0 {
			return fmt.Errorf("oracle: llama_set_adapter_lora returned %d", rc)
		}
	}
	return nil
}

// PauseWorkers lets llama.cpp's pooled workers sleep until its next graph, which wakes them,
// instead of polling for it (ggml.Backend.PauseWorkers: for benchmarks that alternate engines).
func (m *Model) PauseWorkers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pool.IsNil() {
		llamacpp.ThreadpoolPause(m.pool)
	}
}

// Close releases the context and the model (with its adapters). It is safe to call twice.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.ctx.IsNil() {
		llamacpp.Free(m.ctx)
		m.ctx = llamacpp.Context{}
	}
	if !m.model.IsNil() {
		llamacpp.ModelFree(m.model)
		m.model = llamacpp.Model{}
	}
	if !m.pool.IsNil() {
		llamacpp.ThreadpoolFree(m.pool)
		m.pool = llamacpp.Threadpool{}
	}
	return nil
}

// NVocab is the number of tokens of the vocabulary.
func (m *Model) NVocab() int { return m.nVocab }

// Context is the most tokens one Logits call takes (0 for a VocabOnly model).
func (m *Model) Context() int { return m.nCtx }

// VocabType is llama.cpp's name for the kind of the tokenizer (SPM, BPE, ...).
func (m *Model) VocabType() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.model.IsNil() {
		return ""
	}
	return strings.ToUpper(strings.TrimPrefix(llamacpp.VocabKind(m.vocab).String(), "VocabType"))
}

var errClosed = errors.New("oracle: the model is closed")

// Tokenize returns llama.cpp's tokens of text (llama_tokenize). addSpecial adds BOS/EOS as
// the vocabulary says; parseSpecial matches the text of control tokens.
func (m *Model) Tokenize(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.model.IsNil() {
		return nil, errClosed
	}
	if len(text) > math.MaxInt32/2 {
		return nil, fmt.Errorf("oracle: text of %d bytes is too long to tokenize", len(text))
	}
	// A token covers at least one byte; add room for BOS, EOS and a space prefix. llama.cpp
	// says how many it needs when that is not enough.
	buf := make([]int32, len(text)+8)
	for range 2 {
		n := llamacpp.Tokenize(m.vocab, text, int32(len(text)), buf, int32(len(buf)), addSpecial, parseSpecial)
		switch {
		case n == math.MinInt32:
			return nil, fmt.Errorf("oracle: tokenizing %d bytes overflows llama.cpp's count", len(text))
		case n >= 0:
			return buf[:n:n], nil
		}
		buf = make([]int32, -n)
	}
	return nil, fmt.Errorf("oracle: llama.cpp kept asking for more room to tokenize %d bytes", len(text))
}

// Piece is the text of token id (llama_token_to_piece, no space stripped); special renders
// control tokens.
func (m *Model) Piece(id int32, special bool) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.model.IsNil() {
		return "", errClosed
	}
	if id < 0 || int(id) >= m.nVocab {
		return "", fmt.Errorf("oracle: token id %d out of range [0, %d)", id, m.nVocab)
	}
	buf := make([]byte, 64)
	for range 2 {
		n := llamacpp.TokenToPiece(m.vocab, id, buf, int32(len(buf)), 0, special)
		if n >= 0 {
			return string(buf[:n]), nil
		}
		buf = make([]byte, -n)
	}
	return "", fmt.Errorf("oracle: llama.cpp kept asking for more room for the text of token %d", id)
}

// Logits runs tokens through the model from an empty cache, as one batch, and returns the
// logits of every position (len(tokens) rows of NVocab).
func (m *Model) Logits(tokens []int32) ([][]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkTokens(tokens, m.nCtx); err != nil {
		return nil, err
	}
	llamacpp.MemoryClear(llamacpp.GetMemory(m.ctx), true)
	m.pos = 0

	toks := append([]int32(nil), tokens...)
	outputs := make([]int8, len(toks))
	for i := range outputs {
		outputs[i] = 1 // every position's logits, not only the last's
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&toks[0])
	pin.Pin(&outputs[0])
	batch := llamacpp.BatchGetOne(toks, int32(len(toks)))
	batch.Logits = unsafe.Pointer(&outputs[0])
	if rc := llamacpp.Decode(m.ctx, batch); rc != 0 {
		return nil, fmt.Errorf("oracle: llama_decode of %d tokens returned %d", len(toks), rc)
	}
	m.pos = len(toks)
	out := make([][]float32, len(toks))
	for i := range out {
		p := llamacpp.GetLogitsIth(m.ctx, int32(i))
		if p == nil {
			return nil, fmt.Errorf("oracle: llama.cpp has no logits for position %d", i)
		}
		out[i] = append([]float32(nil), unsafe.Slice(p, m.nVocab)...)
	}
	return out, nil
}

// Reset empties the KV cache: the next Eval starts at position 0.
func (m *Model) Reset() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.model.IsNil() {
		return errClosed
	}
	if m.ctx.IsNil() {
		return fmt.Errorf("oracle: %s was opened VocabOnly: no cache", m.path)
	}
	llamacpp.MemoryClear(llamacpp.GetMemory(m.ctx), true)
	m.pos = 0
	return nil
}

// Eval appends tokens to the sequence in the KV cache, as one batch at the next positions, and
// returns the logits after the last one (NVocab values, in a slice Eval reuses): one step of
// llama-bench's prompt processing (many tokens) or generation (one).
func (m *Model) Eval(tokens []int32) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkTokens(tokens, m.nCtx-m.pos); err != nil {
		return nil, err
	}
	toks := append([]int32(nil), tokens...)
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&toks[0])
	if rc := llamacpp.Decode(m.ctx, llamacpp.BatchGetOne(toks, int32(len(toks)))); rc != 0 {
		return nil, fmt.Errorf("oracle: llama_decode of %d tokens at position %d returned %d", len(toks), m.pos, rc)
	}
	m.pos += len(toks)
	p := llamacpp.GetLogitsIth(m.ctx, -1)
	if p == nil {
		return nil, fmt.Errorf("oracle: llama.cpp has no logits for the last token")
	}
	m.last = append(m.last[:0], unsafe.Slice(p, m.nVocab)...)
	return m.last, nil
}

// checkTokens refuses a closed or VocabOnly model and tokens that are none, more than room,
// or outside the vocabulary.
func (m *Model) checkTokens(tokens []int32, room int) error {
	if m.model.IsNil() {
		return errClosed
	}
	if m.ctx.IsNil() {
		return fmt.Errorf("oracle: %s was opened VocabOnly: no logits", m.path)
	}
	if len(tokens) == 0 || len(tokens) > room {
		return fmt.Errorf("oracle: %d tokens, want 1 to %d (the context's room)", len(tokens), room)
	}
	for i, t := range tokens {
		if t < 0 || int(t) >= m.nVocab {
			return fmt.Errorf("oracle: token %d (position %d) out of range [0, %d)", t, i, m.nVocab)
		}
	}
	return nil
}

// SetLoRA loads the LoRA adapter at path (a GGUF of general.type "adapter") and applies it, with
// scale, to every later Logits call; adapters set before stay applied. The adapter is freed
// with the model.
func (m *Model) SetLoRA(path string, scale float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.model.IsNil() {
		return errClosed
	}
	if m.ctx.IsNil() {
		return fmt.Errorf("oracle: %s was opened VocabOnly: no adapters", m.path)
	}
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("oracle: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("oracle: %s is not a regular file", path)
	}
	a := llamacpp.AdapterLoraInit(m.model, path)
	if a.IsNil() {
		return fmt.Errorf("oracle: llama.cpp cannot load the adapter %s for %s (its log on stderr says why)", path, m.path)
	}
	// This llama.cpp reuses a decode graph across llama_set_adapter_lora (its reuse check
	// compares the adapter map's address, not its contents), so a context that has decoded
	// would ignore the adapter: make a fresh one.
	m.loras = append(m.loras, lora{a, scale})
	return m.newContext()
}
