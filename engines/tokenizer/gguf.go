package tokenizer

import (
	"fmt"
	"math"
	"slices"
)

// KV is one GGUF metadata key-value pair. Value is a string, []string,
// []int32, []float32, uint32 or bool, the Go types of the GGUF types llama.cpp reads for
// these keys.
type KV struct {
	Key   string
	Value any
}

// GGUF keys of a tokenizer, as llama.cpp names them.
const (
	KeyModel     = "tokenizer.ggml.model"
	KeyPre       = "tokenizer.ggml.pre"
	KeyTokens    = "tokenizer.ggml.tokens"
	KeyTokenType = "tokenizer.ggml.token_type"
	KeyMerges    = "tokenizer.ggml.merges"
	KeyScores    = "tokenizer.ggml.scores"
	KeyBOS       = "tokenizer.ggml.bos_token_id"
	KeyEOS       = "tokenizer.ggml.eos_token_id"
	KeyUNK       = "tokenizer.ggml.unknown_token_id"
	KeyPAD       = "tokenizer.ggml.padding_token_id"
	// KeySEP is spelt as llama.cpp spells it.
	KeySEP    = "tokenizer.ggml.seperator_token_id"
	KeyAddBOS = "tokenizer.ggml.add_bos_token"
	KeyAddEOS = "tokenizer.ggml.add_eos_token"
	// KeyAddSpacePrefix is read and written as a bool.
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// GGUF returns the tokenizer as the GGUF key-value pairs llama.cpp reads:
// model ("gpt2", "llama" or "bert"), pre (llama, bert: only if set), tokens,
// scores (if set), token types, merges (gpt2; llama, bert: only if set), the
// special ids that are set (SEP: bert only), the add_bos/add_eos flags and
// add_space_prefix (llama, bert; gpt2: only if true).
func (t *Tokenizer) GGUF() []KV {
	types := make([]int32, len(t.v.Types))
	for i, ty := range t.v.Types {
		types[i] = int32(ty)
	}
	kvs := []KV{{KeyModel, t.v.Model}}
	bpe := !t.spm && !t.wpm
	if bpe || t.v.Pre != "" {
		kvs = append(kvs, KV{KeyPre, t.pre.name})
	}
	kvs = append(kvs, KV{KeyTokens, append([]string(nil), t.v.Tokens...)})
	if t.v.Scores != nil {
		kvs = append(kvs, KV{KeyScores, append([]float32(nil), t.v.Scores...)})
	}
	kvs = append(kvs, KV{KeyTokenType, types})
	if bpe || t.v.Merges != nil {
		kvs = append(kvs, KV{KeyMerges, append([]string(nil), t.v.Merges...)})
	}
	for _, id := range []struct {
		key string
		id  int32
	}{{KeyBOS, t.v.BOS}, {KeyEOS, t.v.EOS}, {KeyUNK, t.v.UNK}, {KeyPAD, t.v.PAD}, {KeySEP, t.v.SEP}} {
		if id.id >= 0 {
			kvs = append(kvs, KV{id.key, uint32(id.id)})
		}
	}
	kvs = append(kvs, KV{KeyAddBOS, t.v.AddBOS}, KV{KeyAddEOS, t.v.AddEOS})
	if !bpe || t.v.AddSpacePrefix {
		kvs = append(kvs, KV{KeyAddSpacePrefix, t.v.AddSpacePrefix})
	}
	return kvs
}

// FromGGUF loads a vocabulary from GGUF metadata; get returns the value of a
// key as a GGUF reader gives it (string, []string, []int32, []float32, an
// integer type, bool). tokenizer.ggml.model ("gpt2", "llama" or "bert") and
// tokens are required, and for gpt2 merges; token types default to normal and
// scores to none, as in llama.cpp.
//
// gpt2: pre defaults to "default"; the special ids are those the file sets
// (none otherwise); add_bos defaults to llama.cpp's default for the
// pre-tokenizer; add_space_prefix to false.
//
// llama: pre and merges are not used (merges are not read); BOS, EOS and UNK
// default to 1, 2 and 0, add_bos to true, add_eos to false and
// add_space_prefix to true, as in llama.cpp.
//
// bert: pre and merges are not used; BOS ([CLS]), UNK, SEP
// (tokenizer.ggml.seperator_token_id) and PAD default to 101, 100, 102 and 0
// where the vocabulary is that large, add_bos to true and add_eos to false
// (encoding adds BOS and SEP whatever they say; they matter to Decode's
// RemoveSpecial) and add_space_prefix to false (so the first word keeps its
// space when decoded), as in llama.cpp.
func FromGGUF(get func(key string) (any, bool)) (*Tokenizer, error) {
	model, err := ggufString(get, KeyModel, true)
	if err != nil {
		return nil, err
	}
	if model != ModelGPT2 && model != ModelLlama && model != ModelBERT {
		return nil, fmt.Errorf("tokenizer: %s is %q, only %q (byte-level BPE), %q (SentencePiece) and %q (WordPiece) are supported",
			KeyModel, model, ModelGPT2, ModelLlama, ModelBERT)
	}
	v := Vocab{Model: model, BOS: -1, EOS: -1, UNK: -1, PAD: -1, SEP: -1}
	if v.Pre, err = ggufString(get, KeyPre, false); err != nil {
		return nil, err
	}
	if v.Tokens, err = ggufStrings(get, KeyTokens, true); err != nil {
		return nil, err
	}
	if model == ModelGPT2 {
		pre, err := lookupPre(v.Pre)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", KeyPre, err)
		}
		v.AddBOS = pre.addBOS
		if v.Merges, err = ggufStrings(get, KeyMerges, true); err != nil {
			return nil, err
		}
	} else if model == ModelBERT {
		v.AddBOS = true
		for _, d := range []struct {
			dst *int32
			id  int32
		}{{&v.PAD, 0}, {&v.UNK, 100}, {&v.BOS, 101}, {&v.SEP, 102}} {
			if int(d.id) < len(v.Tokens) {
				*d.dst = d.id
			}
		}
	} else {
		v.AddBOS, v.AddSpacePrefix = true, true
		for _, d := range []struct {
			dst *int32
			id  int32
		}{{&v.UNK, 0}, {&v.BOS, 1}, {&v.EOS, 2}} {
			if int(d.id) < len(v.Tokens) {
				*d.dst = d.id
			}
		}
	}
	if x, ok := get(KeyScores); ok {
		scores, ok := x.([]float32)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is %T, want []float32", KeyScores, x)
		}
		if len(scores) != len(v.Tokens) {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyScores, len(scores), len(v.Tokens))
		}
		v.Scores = scores
	}
	if x, ok := get(KeyTokenType); ok {
		types, ok := x.([]int32)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is %T, want []int32", KeyTokenType, x)
		}
		if len(types) != len(v.Tokens) {
			return nil, fmt.Errorf("tokenizer: %s has %d entries for %d tokens", KeyTokenType, len(types), len(v.Tokens))
		}
		v.Types = make([]TokenType, len(types))
		for i, ty := range types {
			v.Types[i] = TokenType(ty)
		}
	}
	for _, id := range []struct {
		key string
		dst *int32
	}{{KeyBOS, &v.BOS}, {KeyEOS, &v.EOS}, {KeyUNK, &v.UNK}, {KeyPAD, &v.PAD}, {KeySEP, &v.SEP}} {
		x, ok := get(id.key)
		if !ok {
			continue
		}
		n, ok := ggufInt(x)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is %T, want an integer", id.key, x)
		}
		if n < 0 || n >= int64(len(v.Tokens)) {
			return nil, fmt.Errorf("tokenizer: %s is %d, not a token id (vocabulary of %d)", id.key, n, len(v.Tokens))
		}
		*id.dst = int32(n)
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{KeyAddBOS, &v.AddBOS}, {KeyAddEOS, &v.AddEOS}, {KeyAddSpacePrefix, &v.AddSpacePrefix}} {
		x, ok := get(f.key)
		if !ok {
			continue
		}
		b, ok := x.(bool)
		if !ok {
			return nil, fmt.Errorf("tokenizer: %s is %T, want bool", f.key, x)
		}
		*f.dst = b
	}
	retypeByText(&v, func(key string) bool {
		x, ok := get(key)
		if !ok {
			return false
		}
		n, ok := ggufInt(x)
		return ok && n >= 0 && n < int64(len(v.Tokens))
	})
	// A flag without its token (as llama.cpp would assert on).
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: BOS is to be added but %s is missing", KeyBOS)
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: EOS is to be added but %s is missing", KeyEOS)
	}
	return New(v)
}

// FromKVs is FromGGUF over a list of key-value pairs, such as GGUF returns.
func FromKVs(kvs []KV) (*Tokenizer, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return FromGGUF(func(k string) (any, bool) { v, ok := m[k]; return v, ok })
}

func ggufString(get func(string) (any, bool), key string, required bool) (string, error) {
	x, ok := get(key)
	if !ok {
		if required {
			return "", fmt.Errorf("tokenizer: %s is missing", key)
		}
		return "", nil
	}
	s, ok := x.(string)
	if !ok {
		return "", fmt.Errorf("tokenizer: %s is %T, want string", key, x)
	}
	return s, nil
}

func ggufStrings(get func(string) (any, bool), key string, required bool) ([]string, error) {
	x, ok := get(key)
	if !ok {
		if required {
			return nil, fmt.Errorf("tokenizer: %s is missing", key)
		}
		return nil, nil
	}
	s, ok := x.([]string)
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s is %T, want []string", key, x)
	}
	return s, nil
}

// ggufInt converts a GGUF integer scalar to int64.
func ggufInt(x any) (int64, bool) {
	switch n := x.(type) {
	case uint8:
		return int64(n), true
	case int8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint64:
		if n > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// controlByText lists the token texts that llama.cpp's vocabulary loader takes for an
// end-of-turn, end-of-message or fill-in-the-middle token when the file does not name one
// under any of keys; the token found becomes a control token.
var controlByText = []struct {
	keys  []string
	texts []string
}{
	{[]string{"tokenizer.ggml.eot_token_id"}, []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
		"<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}},
	{[]string{"tokenizer.ggml.eom_token_id"}, []string{"<|eom_id|>"}},
	{[]string{"tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"}, []string{"<|fim_prefix|>",
		"<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>"}},
	{[]string{"tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"}, []string{"<|fim_suffix|>",
		"<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>"}},
	{[]string{"tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"}, []string{"<|fim_middle|>",
		"<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>"}},
	{[]string{"tokenizer.ggml.fim_pad_token_id"}, []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"}},
	{[]string{"tokenizer.ggml.fim_rep_token_id"}, []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
	{[]string{"tokenizer.ggml.fim_sep_token_id"}, []string{"<|file_sep|>"}},
}

// endOfGenerationTexts are the token texts llama.cpp always makes control tokens (its
// end-of-generation list).
var endOfGenerationTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>",
	"<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"}

// userDefinedTexts are the token texts llama.cpp always makes user-defined tokens (gpt-oss's,
// so that they are rendered).
var userDefinedTexts = []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}

// retypeByText changes token types as llama.cpp's vocabulary loader does after reading them,
// from the tokens' text: for each kind of controlByText that the file names no token of
// (isSet says whether a key holds a token id), the first token with one of its texts; and
// every token of endOfGenerationTexts, become control tokens (matched in text only with
// ParseSpecial, decoded only with Special); the tokens of userDefinedTexts become
// user-defined. DeepSeek Coder's vocabulary, for one, stores its fill-in-the-middle tokens
// as user-defined.
func retypeByText(v *Vocab, isSet func(key string) bool) {
	if v.Types == nil {
		v.Types = make([]TokenType, len(v.Tokens))
		for i := range v.Types {
			v.Types[i] = TypeNormal
		}
	}
	byText := make(map[string]int, 64)
	for _, c := range controlByText {
		for _, s := range c.texts {
			byText[s] = -1
		}
	}
	for _, s := range endOfGenerationTexts {
		byText[s] = -1
	}
	for _, s := range userDefinedTexts {
		byText[s] = -1
	}
	for i, s := range v.Tokens {
		if id, ok := byText[s]; ok && id < 0 {
			byText[s] = i
		}
	}
	for _, c := range controlByText {
		if slices.ContainsFunc(c.keys, isSet) {
			continue
		}
		first := -1
		for _, s := range c.texts {
			if i := byText[s]; i >= 0 && (first < 0 || i < first) {
				first = i
			}
		}
		if first >= 0 {
			v.Types[first] = TypeControl
		}
	}
	for _, s := range endOfGenerationTexts {
		if i := byText[s]; i >= 0 {
			v.Types[i] = TypeControl
		}
	}
	for _, s := range userDefinedTexts {
		if i := byText[s]; i >= 0 {
			v.Types[i] = TypeUserDefined
		}
	}
}
