package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// PreTokenizer splits text into the chunks that BPE merges never cross. The
// chunks are substrings of text and together make it up, in order.
type PreTokenizer func(text string) []string

// Character classes of the pre-tokenizer regexes.
const (
	fLetter uint8 = 1 << iota // \p{L}
	fNumber                   // \p{N}
	fSpace                    // \s (Unicode White_Space)
	fPunct                    // \p{P}
	fCRLF                     // \r or \n
	fDigit                    // [0-9]
)

var asciiClass [128]uint8

func init() {
	for c := 0; c < 128; c++ {
		asciiClass[c] = classOf(rune(c))
	}
}

// classOf returns the class flags of r.
func classOf(r rune) uint8 {
	if r < 128 && asciiClass[r] != 0 {
		return asciiClass[r]
	}
	var f uint8
	switch {
	case unicode.IsLetter(r) || isCJKExtI(r):
		f = fLetter
	case unicode.IsNumber(r):
		f = fNumber
	case unicode.IsSpace(r):
		f = fSpace
	case unicode.IsPunct(r):
		f = fPunct
	}
	if r == '\r' || r == '\n' {
		f |= fCRLF
	}
	if '0' <= r && r <= '9' {
		f |= fDigit
	}
	return f
}

// isCJKExtI reports whether r is in CJK Unified Ideographs Extension I (U+2EBF0 to U+2EE5D),
// letters (Lo) since Unicode 15.1, which Go's tables (Unicode 15.0) lack and llama.cpp's have:
// a scan of every code point against llama.cpp finds no other difference below U+32400.
func isCJKExtI(r rune) bool { return r >= 0x2EBF0 && r <= 0x2EE5D }

// text is a string decoded into code points for splitting. A byte that is
// not part of valid UTF-8 is a code point of its own with no class (as
// U+FFFD would be).
type text struct {
	s   string
	off []int32 // byte offset of each code point, and len(s) at the end
	r   []rune  // the code point; utf8.RuneError for an invalid byte
	cl  []uint8 // its class flags
}

func (t *text) reset(s string) {
	t.s = s
	t.off = t.off[:0]
	t.r = t.r[:0]
	t.cl = t.cl[:0]
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			t.off = append(t.off, int32(i))
			t.r = append(t.r, rune(c))
			t.cl = append(t.cl, asciiClass[c])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		t.off = append(t.off, int32(i))
		t.r = append(t.r, r)
		if r == utf8.RuneError && size == 1 {
			t.cl = append(t.cl, 0)
		} else {
			t.cl = append(t.cl, classOf(r))
		}
		i += size
	}
	t.off = append(t.off, int32(len(s)))
}

func (t *text) len() int { return len(t.r) }

// class returns the class of code point i, 0 beyond end.
func (t *text) class(i, end int) uint8 {
	if i >= end {
		return 0
	}
	return t.cl[i]
}

// other reports whether class c is [^\s\p{L}\p{N}] for a code point that
// exists (i < end).
func isOther(c uint8) bool { return c&(fLetter|fNumber|fSpace) == 0 }

// matcher returns the end of the match of a regex that starts at code point
// i of t, not looking past end, or -1 if none starts there.
type matcher func(t *text, i, end int) int

// stage splits the piece [start, end) of t, appending the end of each
// sub-piece to dst.
type stage func(t *text, start, end int, dst []int) []int

// matchStage turns a regex matcher into a split stage the way llama.cpp
// does: each match is a piece, and so is each stretch between matches.
func matchStage(m matcher) stage {
	return func(t *text, start, end int, dst []int) []int {
		un := start // start of the unmatched stretch
		for i := start; i < end; {
			e := m(t, i, end)
			if e < 0 {
				i++
				continue
			}
			if un < i {
				dst = append(dst, i)
			}
			dst = append(dst, e)
			i, un = e, e
		}
		if un < end {
			dst = append(dst, end)
		}
		return dst
	}
}

// lower folds an ASCII letter to lower case.
func lower(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, case-insensitively if
// fold is set.
func contraction(t *text, i, end int, fold bool) int {
	if t.r[i] != '\'' || i+1 >= end {
		return -1
	}
	c1 := t.r[i+1]
	if fold {
		c1 = lower(c1)
	}
	switch c1 {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 >= end {
		return -1
	}
	c2 := t.r[i+2]
	if fold {
		c2 = lower(c2)
	}
	switch {
	case c1 == 'r' && c2 == 'e', c1 == 'v' && c2 == 'e', c1 == 'l' && c2 == 'l':
		return i + 3
	}
	return -1
}

// spaceRun returns the end of the run of white space that starts at i.
func spaceRun(t *text, i, end int) int {
	j := i
	for j < end && t.cl[j]&fSpace != 0 {
		j++
	}
	return j
}

// matchGPT2 is 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(t *text, i, end int) int {
	if e := contraction(t, i, end, false); e >= 0 {
		return e
	}
	j := i
	if t.r[i] == ' ' {
		j = i + 1
	}
	c := t.class(j, end)
	switch {
	case c&fLetter != 0:
		for j++; j < end && t.cl[j]&fLetter != 0; j++ {
		}
		return j
	case c&fNumber != 0:
		for j++; j < end && t.cl[j]&fNumber != 0; j++ {
		}
		return j
	case j < end && isOther(c):
		for j++; j < end && isOther(t.cl[j]); j++ {
		}
		return j
	}
	// White space: leave the last one for the next word (\s+(?!\S)).
	e := spaceRun(t, i, end)
	if e-i > 1 && e < end {
		return e - 1
	}
	return e // \s+
}

// matchLLaMA3 returns the matcher of LLaMA 3's regex with at most maxDigits
// digits a chunk:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchLLaMA3(maxDigits int) matcher {
	return func(t *text, i, end int) int {
		if e := contraction(t, i, end, true); e >= 0 {
			return e
		}
		c := t.cl[i]
		// [^\r\n\p{L}\p{N}]?\p{L}+
		j := i
		if c&(fCRLF|fLetter|fNumber) == 0 && t.class(i+1, end)&fLetter != 0 {
			j = i + 1
		}
		if t.class(j, end)&fLetter != 0 {
			for j++; j < end && t.cl[j]&fLetter != 0; j++ {
			}
			return j
		}
		// \p{N}{1,maxDigits}
		if c&fNumber != 0 {
			j = i + 1
			for j < end && j-i < maxDigits && t.cl[j]&fNumber != 0 {
				j++
			}
			return j
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		j = i
		if t.r[i] == ' ' && i+1 < end && isOther(t.cl[i+1]) {
			j = i + 1
		}
		if isOther(t.cl[j]) {
			for j++; j < end && isOther(t.cl[j]); j++ {
			}
			for j < end && t.cl[j]&fCRLF != 0 {
				j++
			}
			return j
		}
		// \s*[\r\n]+ : up to the last line break of the white space run.
		e := spaceRun(t, i, end)
		for k := e - 1; k >= i; k-- {
			if t.cl[k]&fCRLF != 0 {
				return k + 1
			}
		}
		// \s+(?!\S) | \s+
		if e-i > 1 && e < end {
			return e - 1
		}
		return e
	}
}

// runStage returns the stage of the regex [class]+ (runs of code points
// that have any of the flags in mask, or for which in returns true).
func runMatcher(in func(t *text, i int) bool) matcher {
	return func(t *text, i, end int) int {
		if !in(t, i) {
			return -1
		}
		j := i + 1
		for j < end && in(t, j) {
			j++
		}
		return j
	}
}

func isNumberAt(t *text, i int) bool { return t.cl[i]&fNumber != 0 }

// isDefaultPunct is [\p{P}\$\+<=>\^~\|].
func isDefaultPunct(t *text, i int) bool {
	if t.cl[i]&fPunct != 0 {
		return true
	}
	switch t.r[i] {
	case '$', '+', '<', '=', '>', '^', '~', '|':
		return true
	}
	return false
}

// isFalconPunct is [\p{P}\$\+<=>\^~\|`], the default class and the backquote.
func isFalconPunct(t *text, i int) bool { return t.r[i] == '`' || isDefaultPunct(t, i) }

// llama.cpp runs the DeepSeek regexes that name characters directly (no \p{..}) with
// std::wregex on the text where every non-ASCII white space is replaced by U+000B, and those
// with \p{..} on a text where each non-ASCII code point is collapsed to its class: either way a
// non-ASCII white space is \s and nothing else. rangeCode returns the code point such a regex
// sees at i: 0x0B for white space above ASCII, else the code point.
func rangeCode(t *text, i int) rune {
	if r := t.r[i]; r < utf8.RuneSelf || t.cl[i]&fSpace == 0 {
		return r
	}
	return 0x0B
}

// runeRange is the closed range of code points [lo, hi].
type runeRange struct{ lo, hi rune }

// inRanges reports whether r is in one of the sorted, disjoint ranges rs.
func inRanges(r rune, rs []runeRange) bool {
	k := sort.Search(len(rs), func(k int) bool { return rs[k].hi >= r })
	return k < len(rs) && rs[k].lo <= r
}

// deepseekLetters is the letter class of DeepSeek LLM's second regex,
// [A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃],
// as sorted, merged ranges.
var deepseekLetters = []runeRange{
	{0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
	{0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// deepseekPunct is the class of DeepSeek LLM's third regex, [!-/:-~！-／：-～‘-‟　-。] (ASCII
// punctuation and letters, their full-width forms, quotation marks, ideographic space to full
// stop).
var deepseekPunct = []runeRange{
	{0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
}

// deepseekCJK is [一-龥ࠀ-一가-퟿], the CJK regex of both DeepSeek pre-tokenizers: U+0800 to
// U+9FA5 and the Hangul syllables U+AC00 to U+D7FF.
var deepseekCJK = []runeRange{{0x0800, 0x9FA5}, {0xAC00, 0xD7FF}}

// inRangesAt returns the test of whether the code point rangeCode gives at i is in rs.
func inRangesAt(rs []runeRange) func(t *text, i int) bool {
	return func(t *text, i int) bool { return inRanges(rangeCode(t, i), rs) }
}

// spaceThen returns the matcher of \s?[class]+: a run of the class, with the white space
// before it if there is one.
func spaceThen(in func(t *text, i int) bool) matcher {
	return func(t *text, i, end int) int {
		j := i
		if t.cl[i]&fSpace != 0 && i+1 < end && in(t, i+1) {
			j = i + 1
		}
		if !in(t, j) {
			return -1
		}
		for j++; j < end && in(t, j); j++ {
		}
		return j
	}
}

// matchLineBreak is [\r\n]: one line break.
func matchLineBreak(t *text, i, end int) int {
	if t.r[i] == '\r' || t.r[i] == '\n' {
		return i + 1
	}
	return -1
}

// matchTrailingSpace is \s+$: the white space that ends the piece.
func matchTrailingSpace(t *text, i, end int) int {
	if t.cl[i]&fSpace == 0 || spaceRun(t, i, end) != end {
		return -1
	}
	return end
}

// matchDigit is \p{N}: one numeric code point.
func matchDigit(t *text, i, end int) int {
	if t.cl[i]&fNumber != 0 {
		return i + 1
	}
	return -1
}

// matchThreeDigits is [0-9][0-9][0-9].
func matchThreeDigits(t *text, i, end int) int {
	if i+3 <= end && t.cl[i]&fDigit != 0 && t.cl[i+1]&fDigit != 0 && t.cl[i+2]&fDigit != 0 {
		return i + 3
	}
	return -1
}

// preTok is a named pre-tokenizer: its stages and llama.cpp's flags for it.
type preTok struct {
	name         string
	stages       []stage
	ignoreMerges bool // emit a chunk that is a whole token without merging
	addBOS       bool // llama.cpp's default of add_bos for this name
}

var (
	stagesGPT2     = []stage{matchStage(matchGPT2)}
	stagesLLaMA3   = []stage{matchStage(matchLLaMA3(3))}
	stagesQwen2    = []stage{matchStage(matchLLaMA3(1))}
	stagesStarcode = []stage{matchStage(matchDigit), matchStage(matchGPT2)}
	stagesFalcon   = []stage{
		matchStage(runMatcher(isFalconPunct)),
		matchStage(matchGPT2),
		matchStage(matchThreeDigits),
	}
	// DeepSeek LLM: [\r\n], \s?[letters]+, \s?[punctuation]+, \s+$, [CJK]+, \p{N}+.
	stagesDeepSeekLLM = []stage{
		matchStage(matchLineBreak),
		matchStage(spaceThen(inRangesAt(deepseekLetters))),
		matchStage(spaceThen(inRangesAt(deepseekPunct))),
		matchStage(matchTrailingSpace),
		matchStage(runMatcher(inRangesAt(deepseekCJK))),
		matchStage(runMatcher(isNumberAt)),
	}
	// DeepSeek Coder: [\r\n], \s?\p{L}+, \s?\p{P}+, [CJK]+, \p{N}.
	stagesDeepSeekCoder = []stage{
		matchStage(matchLineBreak),
		matchStage(spaceThen(func(t *text, i int) bool { return t.cl[i]&fLetter != 0 })),
		matchStage(spaceThen(func(t *text, i int) bool { return t.cl[i]&fPunct != 0 })),
		matchStage(runMatcher(inRangesAt(deepseekCJK))),
		matchStage(matchDigit),
	}
	stagesDefault = []stage{
		matchStage(runMatcher(isDefaultPunct)),
		matchStage(matchGPT2),
		matchStage(runMatcher(isNumberAt)),
		matchStage(matchThreeDigits),
	}
)

// preTokenizers maps tokenizer.ggml.pre values to their splits, as llama.cpp
// (src/llama-vocab.cpp) does.
var preTokenizers = map[string]preTok{}

func init() {
	add := func(st []stage, ignoreMerges, addBOS bool, names ...string) {
		for _, n := range names {
			preTokenizers[n] = preTok{name: n, stages: st, ignoreMerges: ignoreMerges, addBOS: addBOS}
		}
	}
	add(stagesDefault, false, false, "default")
	add(stagesGPT2, false, false, "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es",
		"jina-v2-de", "a.x-4.0", "mellum", "mpt", "olmo", "jais", "trillion", "granite-docling", "exaone4")
	add(stagesLLaMA3, true, true, "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral",
		"midm-2.0", "lfm2")
	add(stagesLLaMA3, false, false, "dbrx", "smaug-bpe")
	add(stagesQwen2, false, false, "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan")
	add(stagesFalcon, false, false, "falcon")
	add(stagesDeepSeekLLM, false, false, "deepseek-llm")
	add(stagesDeepSeekCoder, false, false, "deepseek-coder")
	add(stagesStarcode, false, false, "smollm", "starcoder", "refact", "command-r", "codeshell",
		"exaone", "minerva-7b")
}

// PreTokenizerNames returns the tokenizer.ggml.pre values this package knows,
// sorted.
func PreTokenizerNames() []string {
	names := make([]string, 0, len(preTokenizers))
	for n := range preTokenizers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func lookupPre(name string) (preTok, error) {
	if name == "" {
		name = "default"
	}
	p, ok := preTokenizers[name]
	if !ok {
		return preTok{}, fmt.Errorf("tokenizer: unknown pre-tokenizer %q (supported: %s)", name, strings.Join(PreTokenizerNames(), ", "))
	}
	return p, nil
}

// PreTokenizerByName returns the pre-tokenizer that llama.cpp uses for the
// tokenizer.ggml.pre value name ("" is "default").
func PreTokenizerByName(name string) (PreTokenizer, error) {
	p, err := lookupPre(name)
	if err != nil {
		return nil, err
	}
	return p.split, nil
}

// SplitGPT2 splits text as GPT-2's pre-tokenizer ("gpt-2") does.
func SplitGPT2(text string) []string { return preTokenizers["gpt-2"].split(text) }

// SplitLLaMA3 splits text as LLaMA 3's pre-tokenizer ("llama3") does.
func SplitLLaMA3(text string) []string { return preTokenizers["llama3"].split(text) }

// SplitQwen2 splits text as Qwen 2's pre-tokenizer ("qwen2") does.
func SplitQwen2(text string) []string { return preTokenizers["qwen2"].split(text) }

// SplitSmolLM splits text as SmolLM's and StarCoder's pre-tokenizer
// ("smollm", "starcoder") does.
func SplitSmolLM(text string) []string { return preTokenizers["smollm"].split(text) }

// SplitDefault splits text as llama.cpp's fallback pre-tokenizer ("default")
// does.
func SplitDefault(text string) []string { return preTokenizers["default"].split(text) }

// split returns the chunks of s.
func (p preTok) split(s string) []string {
	var sp splitter
	ends := sp.split(p.stages, s)
	if len(ends) == 0 {
		return nil
	}
	out := make([]string, 0, len(ends))
	prev := 0
	for _, e := range ends {
		out = append(out, s[prev:e])
		prev = e
	}
	return out
}

// splitter holds the buffers of splitting, for reuse.
type splitter struct {
	t    text
	a, b []int
}

// split returns the byte offsets where the chunks of s end.
func (sp *splitter) split(stages []stage, s string) []int {
	if s == "" {
		return nil
	}
	sp.t.reset(s)
	n := sp.t.len()
	cur := append(sp.a[:0], n)
	next := sp.b[:0]
	for _, st := range stages {
		next = next[:0]
		prev := 0
		for _, e := range cur {
			next = st(&sp.t, prev, e, next)
			prev = e
		}
		cur, next = next, cur
	}
	sp.a, sp.b = cur, next
	// Code point indices to byte offsets.
	for i, e := range cur {
		cur[i] = int(sp.t.off[e])
	}
	return cur
}
