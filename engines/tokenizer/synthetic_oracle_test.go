package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/internal/gguffile"
	"github.com/toyml/toy/internal/oracle"
)

// Vocabularies built by the tests, for the tokenizers that llama.cpp's test folder has no
// vocabulary of (falcon, deepseek-llm, deepseek-coder pre-tokenizers): each is written to a
// GGUF and loaded by toy and by llama.cpp, which must then agree on every text.

// syntheticPres are the pre-tokenizers whose splits only synthetic vocabularies test against
// llama.cpp.
var syntheticPres = []string{"falcon", "deepseek-llm", "deepseek-coder"}

// oracleParts are the pieces adversarialText strings together: letters of several scripts,
// the Unicode letters DeepSeek LLM's class names one by one, digit runs, CJK and Hangul,
// emoji, ASCII and full-width punctuation, curly quotes, white space of every kind, accents
// precomposed and combining, contractions, control characters and special-token text.
var oracleParts = []string{
	"the", " the", "Hello", " World", "HELLO", "naïve", " café", "Привет", " мир", "Ελλάδα", "ß", "ǅ",
	"µ", "K", "Å", "ﬁ", "Ａｂｃ", "𐐀𐐨", "ǂ", "ʔ", "ϵ϶", "ᴀᵃ", "ⅷ", "Ⅻ", "²", "٣٤٥", "๓",
	"0", "7", "12", "123", "4567", "1234567890", "3.14", "1,000",
	"日本語", "中文字", "한국어", "가", "ひらがな", "カタカナ", "龥龦", "ࠀ", "一", "〇",
	"🙂", "👍🏽", "🦙", "❤️", "\u200d",
	".", ",", "!", "?", "...", "!!!", "?!", "(", ")", "[", "]", "{", "}", "<", ">", "=", "==", "!=",
	"$", "+", "^", "~", "|", "`", "@", "#", "%", "&", "*", "-", "_", "/", "\\", ":", ";", "'", "\"",
	"，", "。", "、", "！", "？", "：", "（", "）", "～", "＄", "‘", "’", "“", "”", "‟", "«", "»", "¿", "—", "…",
	" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ", "\v", "\f",
	"\u00a0", "\u3000", "\u2003", "\u2009", "\u0085", "\u1680", "\u202f", "\u205f", "\u2028",
	"e\u0301", "a\u0308", "\u0303", "\u0301\u0301", "Ä", "é", "Ç", "Ω", "ℌ",
	"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "''",
	"\x00", "\x01", "\x1f", "\x7f", "\u00ad", "\ufeff", "\ufffd",
	"func", " (x int)", " {\n\t", "return", " x+1;", "\n}",
}

// adversarialText strings together n random parts, with now and then a random code point.
func adversarialText(rng *rand.Rand, n int) string {
	var sb strings.Builder
	for range n {
		switch rng.IntN(16) {
		case 0:
			sb.WriteRune(rune(rng.IntN(0x3000)))
		case 1:
			sb.WriteRune(rune(0x3000 + rng.IntN(0x10000-0x3000)))
		default:
			sb.WriteString(oracleParts[rng.IntN(len(oracleParts))])
		}
	}
	return strings.ToValidUTF8(sb.String(), "\ufffd")
}

// oracleCorpus is the training text of the synthetic BPE vocabularies: this package's Go
// source and adversarial text, so that merges cover letters, digits, CJK and punctuation.
func oracleCorpus(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	slices.Sort(files)
	var docs [][]byte
	for _, f := range files[:min(len(files), 6)] {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		docs = append(docs, b)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		docs = append(docs, []byte(adversarialText(rng, 40)))
	}
	return docs
}

// writeVocabGGUF writes the key-value pairs of a vocabulary to a GGUF file that llama.cpp can
// load vocabulary-only: with the hyper-parameters of a small model of architecture arch.
func writeVocabGGUF(t testing.TB, path, arch string, kvs []KV) {
	t.Helper()
	var w gguffile.Writer
	add := func(k string, v any) { require.NoError(t, w.AddKV(k, v)) }
	add("general.architecture", arch)
	add("general.name", filepath.Base(path))
	add(arch+".block_count", uint32(1))
	add(arch+".context_length", uint32(64))
	add(arch+".embedding_length", uint32(16))
	add(arch+".feed_forward_length", uint32(32))
	add(arch+".attention.head_count", uint32(2))
	add(arch+".attention.layer_norm_epsilon", float32(1e-5))
	for _, kv := range kvs {
		add(kv.Key, kv.Value)
	}
	require.NoError(t, w.WriteFile(path))
}

// syntheticOracleVocabs trains a BPE vocabulary for each of syntheticPres and loads it into
// toy (from the GGUF written) and llama.cpp. Merges learnt with a pre-tokenizer never cross
// its own chunks, so a split of toy's coarser than llama.cpp's could go unseen: each
// pre-tokenizer also gets the vocabulary trained with LLaMA 3's split, whose merges cross its
// chunk boundaries in other places, and allPairsVocab's, which would merge across any.
func syntheticOracleVocabs(t testing.TB) []oraclePair {
	t.Helper()
	dir := t.TempDir()
	corpus := oracleCorpus(t)
	train := func(pre string) Vocab {
		tok, err := Train(slices.Values(corpus), 1200, TrainOptions{
			Pre: pre, Special: []string{"<|endoftext|>", "<|im_start|>"}, AddBOS: true,
		})
		require.NoError(t, err)
		return tok.Vocab()
	}
	foreign := map[string]Vocab{"llama3": train("llama3"), "all-pairs": allPairsVocab()}
	var pairs []oraclePair
	for _, pre := range syntheticPres {
		for _, from := range []string{pre, "llama3", "all-pairs"} {
			v, ok := foreign[from]
			if !ok {
				v = train(from)
			}
			v.Pre = pre
			tok, err := New(v)
			require.NoError(t, err)
			name := fmt.Sprintf("synthetic-%s-merges-%s.gguf", pre, from)
			pairs = append(pairs, loadOraclePair(t, filepath.Join(dir, name), "gpt2", tok.GGUF()))
		}
	}
	wpm, err := New(syntheticWordPiece(corpus))
	require.NoError(t, err)
	pairs = append(pairs, loadOraclePair(t, filepath.Join(dir, "synthetic-bert.gguf"), "bert", wpm.GGUF()))
	return pairs
}

// syntheticWordPiece builds a WordPiece vocabulary as llama.cpp's GGUFs hold BERT's: the
// special tokens first ([UNK] of type unknown, the others control, "<url>" user-defined),
// then "▁"-marked word starts and bare continuations. It is made from the words of corpus
// (wpmWords): the 300 most frequent words whole, the first one to three characters of every
// word, every run of two or three characters inside a word as a continuation, and each
// character both ways, except those whose code point is a multiple of 7, so that words which
// cannot be cut become [UNK]. A few tokens no normalised text can match (upper case,
// accents) are included too.
func syntheticWordPiece(corpus [][]byte) Vocab {
	v := Vocab{Model: ModelBERT, BOS: 2, EOS: -1, UNK: 1, PAD: 0, SEP: 3, AddBOS: true}
	seen := map[string]bool{}
	add := func(tok string, typ TokenType) {
		if tok == "" || tok == spaceEscape || seen[tok] {
			return
		}
		seen[tok] = true
		v.Tokens = append(v.Tokens, tok)
		v.Types = append(v.Types, typ)
	}
	for _, s := range []string{"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} {
		typ := TypeControl
		if s == "[UNK]" {
			typ = TypeUnknown
		}
		add(s, typ)
	}
	add("<url>", TypeUserDefined)
	for _, s := range []string{spaceEscape + "Hello", spaceEscape + "café", "É", spaceEscape + "naïve"} {
		add(s, TypeNormal)
	}
	counts := map[string]int{}
	var words []string
	for _, doc := range corpus {
		for _, w := range wpmWords(string(doc), nil) {
			if counts[w] == 0 {
				words = append(words, w)
			}
			counts[w]++
		}
	}
	frequent := slices.Clone(words)
	slices.SortStableFunc(frequent, func(a, b string) int { return counts[b] - counts[a] })
	for _, w := range frequent[:min(300, len(frequent))] {
		add(spaceEscape+w, TypeNormal)
	}
	for _, w := range words {
		r := []rune(w)
		for i, c := range r {
			if c%7 != 0 {
				add(spaceEscape+string(c), TypeNormal)
				add(string(c), TypeNormal)
			}
			if i >= 1 && i <= 3 {
				add(spaceEscape+string(r[:i]), TypeNormal)
			}
			for n := 2; n <= 3 && i+n <= len(r); n++ {
				if i > 0 {
					add(string(r[i:i+n]), TypeNormal)
				}
			}
		}
	}
	return v
}

// allPairsVocab is a byte-level BPE vocabulary whose merges join every pair of bytes (in a
// shuffled rank order) and nothing more: each chunk becomes pairs of bytes, so a chunk
// boundary in a different place changes the tokens, whatever the characters around it.
func allPairsVocab() Vocab {
	v := Vocab{Pre: "gpt-2", BOS: 0, EOS: 0, UNK: -1, PAD: -1, AddBOS: true}
	v.Tokens = append(v.Tokens, "<|endoftext|>")
	v.Types = append(v.Types, TypeControl)
	for b := range 256 {
		v.Tokens = append(v.Tokens, MapBytes(string([]byte{byte(b)})))
		v.Types = append(v.Types, TypeNormal)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, k := range rng.Perm(256 * 256) {
		a, b := string([]byte{byte(k >> 8)}), string([]byte{byte(k)})
		v.Tokens = append(v.Tokens, MapBytes(a+b))
		v.Types = append(v.Types, TypeNormal)
		v.Merges = append(v.Merges, MapBytes(a)+" "+MapBytes(b))
	}
	return v
}

// loadOraclePair writes kvs to path and loads the file into toy and into llama.cpp.
func loadOraclePair(t testing.TB, path, arch string, kvs []KV) oraclePair {
	t.Helper()
	writeVocabGGUF(t, path, arch, kvs)
	cpp, err := oracle.Open(path, oracle.Options{VocabOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { cpp.Close() })
	f, err := gguffile.ReadFile(path)
	require.NoError(t, err)
	tok, err := FromGGUF(f.Get)
	require.NoError(t, err)
	return oraclePair{filepath.Base(path), tok, cpp}
}

// TestSyntheticOracle compares toy's tokens with llama.cpp's for the synthetic vocabularies on
// thousands of adversarial texts, in three modes, and every token's piece.
func TestSyntheticOracle(t *testing.T) {
	for _, p := range syntheticOracleVocabs(t) {
		t.Run(p.name, func(t *testing.T) {
			require.Equal(t, p.toy.VocabSize(), p.cpp.NVocab())
			rng := rand.New(rand.NewPCG(3, 4))
			n, bad := 0, 0
			for i := range 1500 {
				text := adversarialText(rng, 1+i%60)
				switch i % 7 {
				case 0:
					text = "<|im_start|>" + text + "<|endoftext|>"
				case 1:
					text = "[CLS] " + text + "[SEP]<url>" + strings.ToUpper(text)
				}
				n++
				if d := compareEncode(t, p, text); d != "" {
					bad++
					if bad <= 10 {
						t.Error(d)
					}
				}
			}
			for id := range int32(p.toy.VocabSize()) {
				for _, special := range []bool{false, true} {
					want, err := p.cpp.Piece(id, special)
					require.NoError(t, err)
					got, err := p.toy.Piece(id, DecodeOptions{Special: special})
					require.NoError(t, err)
					require.Equal(t, want, got, "token %d (%q) special=%v", id, p.toy.Token(id), special)
				}
			}
			t.Logf("%s: %d/%d texts agree in 3 modes (%s)", p.name, n-bad, n, fmt.Sprint(p.toy))
		})
	}
}

// TestSyntheticOracleCodePoints encodes every code point below U+32400 (surrogates aside), in
// contexts that exercise each split's classes (inside a word, after a space, doubled, before
// digits and white space), with one vocabulary of each tokenizer, and compares with llama.cpp:
// this checks the character classes (letters, digits, white space, punctuation, symbols,
// controls, DeepSeek's listed ranges, WordPiece's decomposition and lower-casing) one by one.
// The code points go 32 to a text, as llama.cpp compiles its regexes on every call.
func TestSyntheticOracleCodePoints(t *testing.T) {
	if testing.Short() {
		t.Skip("a scan of 200,000 code points")
	}
	// The all-pairs vocabularies would merge across any chunk boundary; the older
	// pre-tokenizers' regexes get one too.
	var picked []oraclePair
	for _, p := range syntheticOracleVocabs(t) {
		if strings.Contains(p.name, "merges-all-pairs") || p.toy.Model() == ModelBERT {
			picked = append(picked, p)
		}
	}
	dir := t.TempDir()
	for _, pre := range []string{"gpt-2", "llama3", "default"} {
		v := allPairsVocab()
		v.Pre = pre
		tok, err := New(v)
		require.NoError(t, err)
		picked = append(picked, loadOraclePair(t, filepath.Join(dir, pre+"-all-pairs.gguf"), "gpt2", tok.GGUF()))
	}
	for _, p := range picked {
		t.Run(p.name, func(t *testing.T) {
			var sb strings.Builder
			agree := func(lo, hi rune) bool {
				sb.Reset()
				for r := lo; r <= hi; r++ {
					if r >= 0xD800 && r < 0xE000 {
						continue
					}
					c := string(r)
					for _, s := range []string{"a", c, "b ", c, c, "1", c, "  ", c, "\n"} {
						sb.WriteString(s)
					}
				}
				want, err := p.cpp.Tokenize(sb.String(), false, false)
				require.NoError(t, err)
				return slices.Equal(p.toy.Encode(sb.String(), EncodeOptions{}), want)
			}
			var bad []rune
			for lo := rune(1); lo < 0x32400; lo += 32 {
				if agree(lo, lo+31) {
					continue
				}
				for r := lo; r < lo+32; r++ {
					if !agree(r, r) {
						bad = append(bad, r)
					}
				}
			}
			require.Empty(t, runeRanges(bad), "code points whose tokens disagree")
		})
	}
}

// runeRanges describes sorted code points as ranges, "U+0041-U+005A".
func runeRanges(rs []rune) []string {
	var out []string
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		out = append(out, fmt.Sprintf("%U-%U", rs[i], rs[j]))
		i = j + 1
	}
	return out
}

// TestWPMInvalidUTF8Oracle pins the known difference of WordPiece on invalid UTF-8
// (docs/ORACLE.md): toy drops every byte that is not valid UTF-8, llama.cpp decodes an
// overlong form as the code point it spells, here a space that separates two words.
func TestWPMInvalidUTF8Oracle(t *testing.T) {
	tok, err := New(syntheticWordPiece(oracleCorpus(t)))
	require.NoError(t, err)
	p := loadOraclePair(t, filepath.Join(t.TempDir(), "bert.gguf"), "bert", tok.GGUF())
	for _, c := range []struct{ text, toyAs, cppAs string }{
		{"the\xe0\x80\xa0func", "thefunc", "the func"},
		{"the\xffb\xc0\x80x", "thebx", "thebx"}, // a stray byte, an overlong NUL: both dropped
	} {
		want, err := p.cpp.Tokenize(c.cppAs, false, false)
		require.NoError(t, err)
		got, err := p.cpp.Tokenize(c.text, false, false)
		require.NoError(t, err)
		require.Equal(t, want, got, "llama.cpp on %q", c.text)
		require.Equal(t, p.toy.Encode(c.toyAs, EncodeOptions{}), p.toy.Encode(c.text, EncodeOptions{}), "toy on %q", c.text)
	}
}

// TestRetypeByTextOracle checks that FromGGUF changes token types from their text as
// llama.cpp's loader does: a user-defined fill-in-the-middle token and a normal end-of-turn
// token become control tokens, the fill-in-the-middle texts of a kind the file names by id do
// not, and gpt-oss's channel token becomes user-defined; encoding (in the three modes) and
// every token's text then agree with llama.cpp.
func TestRetypeByTextOracle(t *testing.T) {
	v := allPairsVocab()
	extra := []struct {
		text string
		typ  TokenType
		want TokenType
	}{
		// fim_pre_token_id names the first: no prefix text is looked for.
		{"<｜fim▁begin｜>", TypeUserDefined, TypeUserDefined},
		{"<PRE>", TypeUserDefined, TypeUserDefined},
		{"<｜fim▁hole｜>", TypeUserDefined, TypeControl},
		{"<|im_end|>", TypeNormal, TypeControl},
		{"<|channel|>", TypeControl, TypeUserDefined},
		{"<tool>", TypeUserDefined, TypeUserDefined},
	}
	first := int32(len(v.Tokens))
	for _, e := range extra {
		v.Tokens = append(v.Tokens, e.text)
		v.Types = append(v.Types, e.typ)
	}
	tok, err := New(v)
	require.NoError(t, err)
	kvs := append(tok.GGUF(), KV{"tokenizer.ggml.fim_pre_token_id", uint32(first)})
	p := loadOraclePair(t, filepath.Join(t.TempDir(), "retype.gguf"), "gpt2", kvs)
	for i, e := range extra {
		assert.Equal(t, e.want, p.toy.TokenType(first+int32(i)), e.text)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for range 200 {
		var sb strings.Builder
		for range 6 {
			sb.WriteString(adversarialText(rng, 3))
			sb.WriteString(extra[rng.IntN(len(extra))].text)
		}
		if d := compareEncode(t, p, sb.String()); d != "" {
			t.Error(d)
		}
	}
	for id := first; id < int32(p.toy.VocabSize()); id++ {
		for _, special := range []bool{false, true} {
			want, err := p.cpp.Piece(id, special)
			require.NoError(t, err)
			got, err := p.toy.Piece(id, DecodeOptions{Special: special})
			require.NoError(t, err)
			assert.Equal(t, want, got, "token %q special=%v", p.toy.Token(id), special)
		}
	}
}
