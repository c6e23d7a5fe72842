package tokenizer

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TokenType is the type of a token, as in tokenizer.ggml.token_type.
//
// In a gpt2 vocabulary, normal tokens (and undefined and byte ones, which a
// gpt2 vocabulary does not normally hold) are byte-level text that merges
// build. In a llama vocabulary, byte tokens are "<0xNN>" and decode to the
// byte, and undefined ones decode to nothing. Control, unknown and
// user-defined tokens are raw text matched verbatim in the input; unused
// tokens are never produced by gpt2 merges and decode to nothing.
type TokenType int32

// Token types (llama.cpp's llama_token_type).
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// special reports whether tokens of type t are matched verbatim in the text
// instead of being built by merges.
func (t TokenType) special() bool {
	return t == TypeControl || t == TypeUserDefined || t == TypeUnknown
}

// Model is the tokenizer.ggml.model value of byte-level BPE.
const Model = "gpt2"

// Tokenizer models (tokenizer.ggml.model values).
const (
	// ModelGPT2 is byte-level BPE (llama.cpp's LLAMA_VOCAB_TYPE_BPE).
	ModelGPT2 = Model
	// ModelLlama is SentencePiece BPE with byte fallback (llama.cpp's
	// LLAMA_VOCAB_TYPE_SPM), the tokenizer of LLaMA 1 and 2, Mistral 7B
	// v0.1, TinyLlama and others.
	ModelLlama = "llama"
)

// ModelBERT is WordPiece (llama.cpp's LLAMA_VOCAB_TYPE_WPM), the tokenizer of BERT and of the
// embedding models built on it. As llama.cpp's GGUFs store it, a piece that begins a word
// carries the "▁" (U+2581) word-start mark and a continuation piece (BERT's "##ing") is stored
// bare ("ing").
const ModelBERT = "bert"

// spaceEscape is the character that stands for a space in the tokens of a
// SentencePiece vocabulary: "▁", U+2581.
const spaceEscape = "\u2581"

// Vocab is the content of a vocabulary, in the form GGUF stores it.
type Vocab struct {
	// Model is the tokenizer.ggml.model value: ModelGPT2 (byte-level BPE,
	// the default when empty; New sets it), ModelLlama (SentencePiece
	// BPE with byte fallback) or ModelBERT (WordPiece).
	Model string
	// Pre is the tokenizer.ggml.pre value that selects the pre-tokenizer
	// ("" is "default"). The llama and bert models have no pre-tokenizer:
	// Pre is only kept, as llama.cpp ignores it.
	Pre string
	// Tokens are the token strings. gpt2: normal tokens in byte-level
	// (mapped) form, control and user-defined tokens as raw text. llama:
	// normal tokens with spaces as "▁" (U+2581), byte tokens as "<0xNN>",
	// control and user-defined tokens as raw text.
	Tokens []string
	// Types are the token types, one per token; nil means all normal.
	Types []TokenType
	// Scores are the token scores (tokenizer.ggml.scores), one per token,
	// or nil. The llama model merges into the token of highest score (nil
	// scores are all 0); gpt2 and bert do not use them.
	Scores []float32
	// Merges are the merges in rank order, each "a b" with a and b tokens
	// in mapped form (gpt2; the llama model does not use them).
	Merges []string
	// BOS, EOS, UNK and PAD are token ids, -1 for none.
	BOS, EOS, UNK, PAD int32
	// SEP is the separator token id (BERT's [SEP]) that the bert model's
	// EncodeOptions.AddSpecial puts after the text, after BOS ([CLS]) before
	// it. Only the bert model uses it; New sets it to -1 for the others.
	SEP int32
	// AddBOS and AddEOS say whether EncodeOptions.AddSpecial adds BOS and
	// EOS.
	AddBOS, AddEOS bool
	// AddSpacePrefix (tokenizer.ggml.add_space_prefix) makes the llama
	// model put a space before the text and after each special token, and
	// makes Decode remove the leading space of the first token (also for
	// gpt2, as llama.cpp does; gpt2 encoding ignores it).
	AddSpacePrefix bool
}

// merge is what a pair of symbols merges into.
type merge struct {
	rank int32
	sym  int32
}

// Tokenizer is a byte-level BPE (gpt2), SentencePiece BPE (llama) or
// WordPiece (bert) tokenizer. It is safe for concurrent use.
type Tokenizer struct {
	v   Vocab
	pre preTok
	spm bool // the llama model (spm.go)
	wpm bool // the bert model (wpm.go)

	maxTokenLen int // bert: the longest token, in bytes

	scores []float32 // llama: token scores, zeros if the vocabulary has none

	ids      map[string]int32 // token string (as stored) → id
	bpeTok   map[string]int32 // raw bytes of merge-built tokens → id
	pieces   []string         // raw bytes each token decodes to
	specials []int32          // tokens matched verbatim, longest first

	// BPE works on symbols: 0..255 are the bytes, the others are strings
	// that merges build. symTok is a symbol's token id (-1 if not a token).
	symTok []int32
	symRaw []string
	merges map[uint64]merge
	// byteTok is the token of each byte (-1 if none): its symbol's token for
	// gpt2, the byte-fallback token for llama.
	byteTok [256]int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// New builds a tokenizer from a vocabulary. It checks that the token types
// and scores match the tokens, that tokens are unique, that each merge is two
// tokens joined by a space (gpt2), that byte tokens are "<0xNN>" (llama) and
// that the special ids are tokens.
func New(v Vocab) (*Tokenizer, error) {
	var pre preTok
	switch v.Model {
	case "", ModelGPT2:
		v.Model = ModelGPT2
		var err error
		if pre, err = lookupPre(v.Pre); err != nil {
			return nil, err
		}
	case ModelLlama, ModelBERT:
		pre = preTok{name: v.Pre}
	default:
		return nil, fmt.Errorf("tokenizer: unknown model %q, want %q, %q or %q", v.Model, ModelGPT2, ModelLlama, ModelBERT)
	}
	if v.Model != ModelBERT {
		v.SEP = -1
	}
	n := len(v.Tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: empty vocabulary")
	}
	if int64(n) > 1<<31-1 {
		return nil, fmt.Errorf("tokenizer: %d tokens are too many", n)
	}
	if v.Types == nil {
		v.Types = make([]TokenType, n)
		for i := range v.Types {
			v.Types[i] = TypeNormal
		}
	} else if len(v.Types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(v.Types), n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("tokenizer: %d token scores for %d tokens", len(v.Scores), n)
	}
	t := &Tokenizer{
		v:      v,
		pre:    pre,
		spm:    v.Model == ModelLlama,
		wpm:    v.Model == ModelBERT,
		ids:    make(map[string]int32, n),
		bpeTok: make(map[string]int32, n),
		pieces: make([]string, n),
		merges: make(map[uint64]merge, len(v.Merges)),
	}
	for i, s := range v.Tokens {
		if s == "" {
			return nil, fmt.Errorf("tokenizer: token %d is empty", i)
		}
		if j, dup := t.ids[s]; dup {
			return nil, fmt.Errorf("tokenizer: token %q appears twice, ids %d and %d", s, j, i)
		}
		t.ids[s] = int32(i)
		t.maxTokenLen = max(t.maxTokenLen, len(s))
		typ := v.Types[i]
		if typ.special() {
			t.pieces[i] = s
			t.specials = append(t.specials, int32(i))
			continue
		}
		if t.spm || t.wpm {
			continue // pieces: initSPM
		}
		raw, ok := UnmapBytes(s)
		if !ok {
			// Not byte-level text: merges cannot build it; it decodes to
			// its text.
			t.pieces[i] = s
			continue
		}
		t.pieces[i] = raw
		if typ != TypeUnused {
			t.bpeTok[raw] = int32(i)
		}
	}
	// Longest first; ties by id, for a fixed order.
	slices.SortStableFunc(t.specials, func(a, b int32) int {
		return len(v.Tokens[b]) - len(v.Tokens[a])
	})
	for _, id := range []struct {
		name string
		id   int32
	}{{"BOS", v.BOS}, {"EOS", v.EOS}, {"UNK", v.UNK}, {"PAD", v.PAD}, {"SEP", v.SEP}} {
		if id.id < -1 || id.id >= int32(n) {
			return nil, fmt.Errorf("tokenizer: %s id %d is not a token (vocabulary of %d)", id.name, id.id, n)
		}
	}
	if v.AddBOS && v.BOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddBOS without a BOS token")
	}
	if v.AddEOS && v.EOS < 0 {
		return nil, fmt.Errorf("tokenizer: AddEOS without an EOS token")
	}
	if t.wpm {
		// What encoding always adds or emits, as llama.cpp asserts.
		for _, id := range []struct {
			name string
			id   int32
		}{{"BOS ([CLS])", v.BOS}, {"SEP ([SEP])", v.SEP}, {"UNK ([UNK])", v.UNK}} {
			if id.id < 0 {
				return nil, fmt.Errorf("tokenizer: a bert (WordPiece) vocabulary needs a %s token", id.name)
			}
		}
	}
	if t.spm || t.wpm {
		// WordPiece pieces decode as SentencePiece ones: "▁" is a space.
		if err := t.initSPM(); err != nil {
			return nil, err
		}
		return t, nil
	}

	// Symbols: the 256 bytes, then whatever merges build.
	symID := make(map[string]int32, len(v.Merges)+256)
	sym := func(raw string) int32 {
		if s, ok := symID[raw]; ok {
			return s
		}
		s := int32(len(t.symRaw))
		symID[raw] = s
		t.symRaw = append(t.symRaw, raw)
		tok, ok := t.bpeTok[raw]
		if !ok {
			tok = -1
		}
		t.symTok = append(t.symTok, tok)
		return s
	}
	for b := 0; b < 256; b++ {
		sym(string([]byte{byte(b)}))
		t.byteTok[b] = t.symTok[b]
	}
	for rank, m := range v.Merges {
		// As llama.cpp: split at the first space after the first byte.
		k := -1
		if len(m) > 1 {
			k = strings.IndexByte(m[1:], ' ')
		}
		if k < 0 {
			return nil, fmt.Errorf("tokenizer: merge %d %q is not two tokens separated by a space", rank, m)
		}
		a, b := m[:k+1], m[k+2:]
		if _, ok := t.ids[a]; !ok {
			return nil, fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, a)
		}
		if _, ok := t.ids[b]; !ok {
			return nil, fmt.Errorf("tokenizer: merge %d %q: %q is not a token", rank, m, b)
		}
		ra, okA := UnmapBytes(a)
		rb, okB := UnmapBytes(b)
		if !okA || !okB {
			continue // not byte-level text: can never apply
		}
		sa, sb := sym(ra), sym(rb)
		key := pairKey(sa, sb)
		if _, dup := t.merges[key]; dup {
			continue // the first rank wins, as in llama.cpp
		}
		t.merges[key] = merge{rank: int32(rank), sym: sym(ra + rb)}
	}
	return t, nil
}

// initSPM sets up the llama model once New has checked the vocabulary: the
// pieces the tokens decode to, the scores and the byte-fallback tokens.
func (t *Tokenizer) initSPM() error {
	t.scores = t.v.Scores
	if t.scores == nil {
		t.scores = make([]float32, len(t.v.Tokens))
	}
	for i, s := range t.v.Tokens {
		switch t.v.Types[i] {
		case TypeNormal:
			t.pieces[i] = strings.ReplaceAll(s, spaceEscape, " ")
		case TypeByte:
			b, ok := parseByteToken(s)
			if !ok {
				return fmt.Errorf("tokenizer: byte token %d %q is not <0xNN>", i, s)
			}
			t.pieces[i] = string([]byte{b})
		case TypeUnknown, TypeControl, TypeUserDefined:
			// Their text, set by New.
		default:
			// Unused, undefined and unknown types decode to nothing, as in
			// llama.cpp.
			t.pieces[i] = ""
		}
	}
	// llama.cpp's byte_to_token: the "<0xNN>" token, else the token that is
	// the byte itself.
	const hex = "0123456789ABCDEF"
	for b := 0; b < 256; b++ {
		t.byteTok[b] = -1
		if id, ok := t.ids[string([]byte{'<', '0', 'x', hex[b>>4], hex[b&15], '>'})]; ok {
			t.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteTok[b] = id
		}
	}
	return nil
}

// parseByteToken parses the text of a byte token, "<0xNN>".
func parseByteToken(s string) (byte, bool) {
	if len(s) != 6 || s[:3] != "<0x" || s[5] != '>' {
		return 0, false
	}
	var b byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		default:
			return 0, false
		}
		b = b<<4 | c
	}
	return b, true
}

// Vocab returns the tokenizer's vocabulary. The slices are shared; do not
// modify them.
func (t *Tokenizer) Vocab() Vocab { return t.v }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.v.Tokens) }

// Pre returns the tokenizer.ggml.pre value of the pre-tokenizer (for the
// llama and bert models, the vocabulary's Pre, which they do not use).
func (t *Tokenizer) Pre() string { return t.pre.name }

// Model returns the tokenizer.ggml.model value: ModelGPT2, ModelLlama or
// ModelBERT.
func (t *Tokenizer) Model() string { return t.v.Model }

// BOS returns the id of the beginning-of-sequence token, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.v.BOS }

// EOS returns the id of the end-of-sequence token, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.v.EOS }

// SEP returns the id of the separator token (bert's [SEP]), -1 if none or
// not the bert model.
func (t *Tokenizer) SEP() int32 { return t.v.SEP }

// Token returns the string of token id as stored (mapped form for gpt2
// normal tokens), or "" if id is out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.v.Tokens) {
		return ""
	}
	return t.v.Tokens[id]
}

// TokenType returns the type of token id, TypeUndefined if out of range.
func (t *Tokenizer) TokenType(id int32) TokenType {
	if id < 0 || int(id) >= len(t.v.Types) {
		return TypeUndefined
	}
	return t.v.Types[id]
}

// ID returns the id of the token whose stored string is s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.ids[s]
	return id, ok
}

// EncodeOptions control Encode.
type EncodeOptions struct {
	// AddSpecial adds the BOS and EOS tokens as the vocabulary's AddBOS and
	// AddEOS say (llama.cpp's add_special).
	AddSpecial bool
	// ParseSpecial matches control tokens (such as "<|endoftext|>") in the
	// text and emits them as themselves (llama.cpp's parse_special).
	// User-defined tokens are always matched.
	ParseSpecial bool
}

// partition splits text at the special tokens in it, longest first, and
// calls f for each fragment in order: with special = -1 for ordinary text
// and with the token id for a special token.
func (t *Tokenizer) partition(text string, parseSpecial bool, f func(frag string, special int32)) {
	type frag struct {
		s  string
		id int32
	}
	frags := []frag{{text, -1}}
	for _, id := range t.specials {
		if !parseSpecial && t.v.Types[id] != TypeUserDefined {
			continue
		}
		tok := t.v.Tokens[id]
		var next []frag
		changed := false
		for _, fr := range frags {
			if fr.id >= 0 || !strings.Contains(fr.s, tok) {
				next = append(next, fr)
				continue
			}
			changed = true
			s := fr.s
			for {
				k := strings.Index(s, tok)
				if k < 0 {
					break
				}
				if k > 0 {
					next = append(next, frag{s[:k], -1})
				}
				next = append(next, frag{tok, id})
				s = s[k+len(tok):]
			}
			if s != "" {
				next = append(next, frag{s, -1})
			}
		}
		if changed {
			frags = next
		}
	}
	for _, fr := range frags {
		f(fr.s, fr.id)
	}
}

// appendBytes appends the byte tokens of s, the last resort of both models: a byte without a
// token becomes UNK, or is dropped when there is none (llama.cpp would throw).
func (t *Tokenizer) appendBytes(out []int32, s string) []int32 {
	for i := 0; i < len(s); i++ {
		if id := t.byteTok[s[i]]; id >= 0 {
			out = append(out, id)
		} else if t.v.UNK >= 0 {
			out = append(out, t.v.UNK)
		}
	}
	return out
}

// DecodeOptions control Decode.
type DecodeOptions struct {
	// Special renders control and unknown tokens as their text; without it
	// they decode to nothing (llama.cpp's special flag of token_to_piece,
	// unparse_special of detokenize).
	Special bool
	// RemoveSpecial drops a leading BOS token if the vocabulary adds BOS and
	// a trailing EOS token if it adds EOS (llama.cpp's remove_special of
	// detokenize). As in llama.cpp, a dropped BOS also keeps the leading
	// space that AddSpacePrefix would remove.
	RemoveSpecial bool
}

// Piece returns the bytes token id decodes to (without Decode's removal of
// a leading space).
func (t *Tokenizer) Piece(id int32, opts DecodeOptions) (string, error) {
	if id < 0 || int(id) >= len(t.pieces) {
		return "", fmt.Errorf("tokenizer: token id %d out of range [0, %d)", id, len(t.pieces))
	}
	switch t.v.Types[id] {
	case TypeControl, TypeUnknown:
		if !opts.Special {
			return "", nil
		}
	case TypeUnused:
		return "", nil
	}
	return t.pieces[id], nil
}

// Decode returns the text of ids: the bytes of the tokens, concatenated.
// The result need not be valid UTF-8 (a token may hold part of a
// character). As llama.cpp's detokenize, with AddSpacePrefix it removes one
// leading space from the first token's text (the first token after a BOS
// dropped by RemoveSpecial keeps it).
func (t *Tokenizer) Decode(ids []int32, opts DecodeOptions) (string, error) {
	removeSpace := t.v.AddSpacePrefix
	if opts.RemoveSpecial {
		if t.v.AddBOS && len(ids) > 0 && ids[0] == t.v.BOS {
			removeSpace = false
			ids = ids[1:]
		}
		if t.v.AddEOS && len(ids) > 0 && ids[len(ids)-1] == t.v.EOS {
			ids = ids[:len(ids)-1]
		}
	}
	var sb strings.Builder
	for _, id := range ids {
		p, err := t.Piece(id, opts)
		if err != nil {
			return "", err
		}
		if removeSpace {
			p = strings.TrimPrefix(p, " ")
			removeSpace = false
		}
		sb.WriteString(p)
	}
	return sb.String(), nil
}

// String describes the tokenizer briefly.
func (t *Tokenizer) String() string {
	if t.spm {
		return "llama SentencePiece tokenizer, " + strconv.Itoa(len(t.v.Tokens)) + " tokens"
	}
	if t.wpm {
		return "bert WordPiece tokenizer, " + strconv.Itoa(len(t.v.Tokens)) + " tokens"
	}
	return "gpt2 BPE tokenizer, pre " + strconv.Quote(t.pre.name) + ", " +
		strconv.Itoa(len(t.v.Tokens)) + " tokens, " + strconv.Itoa(len(t.v.Merges)) + " merges"
}
