package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type splitCase struct {
	in   string
	want []string
}

func checkSplits(t *testing.T, split PreTokenizer, cases []splitCase) {
	t.Helper()
	for _, c := range cases {
		assert.Equal(t, c.want, split(c.in), "split of %q", c.in)
	}
}

func TestSplitGPT2(t *testing.T) {
	checkSplits(t, SplitGPT2, []splitCase{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"Hello, world!!", []string{"Hello", ",", " world", "!!"}},
		// Contractions are lower case only.
		{"I'm can't we've they'll I'd it's you're", []string{"I", "'m", " can", "'t", " we", "'ve", " they", "'ll", " I", "'d", " it", "'s", " you", "'re"}},
		{"HE'S", []string{"HE", "'", "S"}},
		{"''s", []string{"''", "s"}},
		{"'", []string{"'"}},
		// Numbers stay whole, letters and digits part.
		{"abc 12345 x1 1.5", []string{"abc", " 12345", " x", "1", " 1", ".", "5"}},
		{"Ⅻ²", []string{"Ⅻ²"}}, // \p{N} is not only [0-9]
		// Unicode letters.
		{"naïve café Привет 世界", []string{"naïve", " café", " Привет", " 世界"}},
		// Marks are neither letters nor digits.
		{"n\u0303", []string{"n", "\u0303"}},
		// Runs of spaces leave the last one to the next word.
		{"a   b", []string{"a", "  ", " b"}},
		{"a   ", []string{"a", "   "}},
		{"   ", []string{"   "}},
		{" ", []string{" "}},
		{"  7", []string{" ", " 7"}},
		// Other white space does not join the word.
		{"\tfoo", []string{"\t", "foo"}},
		{"a\u00a0b", []string{"a", "\u00a0", "b"}},
		// Newlines.
		{"a\n\nb", []string{"a", "\n", "\n", "b"}},
		{"a\n  b", []string{"a", "\n ", " b"}},
		{"a\n", []string{"a", "\n"}},
		{"x = 1;\n", []string{"x", " =", " 1", ";", "\n"}},
		{"func (t *T) {", []string{"func", " (", "t", " *", "T", ")", " {"}},
		// Symbols and emoji are "other".
		{"🦙🦙 ok", []string{"🦙🦙", " ok"}},
		// Invalid UTF-8 bytes are "other" too.
		{"a\xffb", []string{"a", "\xff", "b"}},
		{" \xff\xfe!", []string{" \xff\xfe!"}},
	})
}

func TestSplitLLaMA3(t *testing.T) {
	checkSplits(t, SplitLLaMA3, []splitCase{
		{"Hello world", []string{"Hello", " world"}},
		// Contractions in any case.
		{"I'M HE'S we'Ve", []string{"I", "'M", " HE", "'S", " we", "'Ve"}},
		// Up to three digits a chunk, without the space.
		{"12345", []string{"123", "45"}},
		{"a 12", []string{"a", " ", "12"}},
		// One non-letter joins the letters after it.
		{"(Hello) \tfoo", []string{"(Hello", ")", " ", "\tfoo"}},
		{"x.y", []string{"x", ".y"}},
		// Punctuation takes the line breaks after it.
		{"x!!\n\ny", []string{"x", "!!\n\n", "y"}},
		{"a = 1;\n}", []string{"a", " =", " ", "1", ";\n", "}"}},
		// White space up to the last line break is one chunk.
		{"a\n\nb", []string{"a", "\n\n", "b"}},
		{"a  \n  b", []string{"a", "  \n", " ", " b"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"a \r\n", []string{"a", " \r\n"}},
		{"a   ", []string{"a", "   "}},
		{"Привет, мир", []string{"Привет", ",", " мир"}},
		{"\xff\xfea", []string{"\xff\xfe", "a"}},
	})
}

func TestSplitQwen2(t *testing.T) {
	checkSplits(t, SplitQwen2, []splitCase{
		{"12345", []string{"1", "2", "3", "4", "5"}},
		{"I'M 1st", []string{"I", "'M", " ", "1", "st"}},
		{"a  \n  b", []string{"a", "  \n", " ", " b"}},
	})
}

func TestSplitSmolLM(t *testing.T) {
	checkSplits(t, SplitSmolLM, []splitCase{
		{"w048 7tuijk dsdfhu", []string{"w", "0", "4", "8", " ", "7", "tuijk", " dsdfhu"}},
		{"abc 12 it's", []string{"abc", " ", "1", "2", " it", "'s"}},
		{"a   b", []string{"a", "  ", " b"}},
		{"x=10\n", []string{"x", "=", "1", "0", "\n"}},
	})
	starcoder, err := PreTokenizerByName("starcoder")
	require.NoError(t, err)
	assert.Equal(t, SplitSmolLM("3 apples"), starcoder("3 apples"))
}

func TestSplitDefault(t *testing.T) {
	checkSplits(t, SplitDefault, []splitCase{
		{"Hello, world! 12345", []string{"Hello", ",", " world", "!", " ", "123", "45"}},
		{"a+=b", []string{"a", "+=", "b"}},
		{"x 1234567", []string{"x", " ", "123", "456", "7"}},
	})
	def, err := PreTokenizerByName("")
	require.NoError(t, err)
	assert.Equal(t, SplitDefault("a+b 12"), def("a+b 12"))
}

func TestPreTokenizerByName(t *testing.T) {
	for _, name := range []string{"gpt-2", "llama3", "llama-bpe", "qwen2", "smollm", "starcoder", "default"} {
		_, err := PreTokenizerByName(name)
		require.NoError(t, err, name)
	}
	_, err := PreTokenizerByName("no-such-pre")
	require.ErrorContains(t, err, `unknown pre-tokenizer "no-such-pre" (supported: `)
	// The error lists what is supported.
	for _, name := range []string{"default", "deepseek-coder", "deepseek-llm", "falcon", "gpt-2", "llama3"} {
		require.ErrorContains(t, err, name)
	}
	assert.Contains(t, PreTokenizerNames(), "smollm")
}

// TestSplitFalconDeepSeek checks the falcon, deepseek-llm and deepseek-coder splits on cases
// worked out by hand from llama.cpp's regexes (TestSyntheticOracle compares them with
// llama.cpp itself).
func TestSplitFalconDeepSeek(t *testing.T) {
	for _, c := range []struct {
		pre   string
		cases []splitCase
	}{
		{"falcon", []splitCase{
			// The backquote is punctuation, which stage one cuts out.
			{"a`b", []string{"a", "`", "b"}},
			// Three digits a chunk after GPT-2's split; no \p{N}+ stage.
			{"x = 12345;", []string{"x", " ", "=", " ", "123", "45", ";"}},
			{"I'm", []string{"I", "'", "m"}},
		}},
		{"deepseek-llm", []splitCase{
			// White space that ends a piece is a chunk of its own.
			{"x🙂  ", []string{"x", "🙂", "  "}},
			{"Hello, 世界123\r\nok", []string{"Hello", ",", " ", "世界", "123", "\r", "\n", "ok"}},
			// A non-ASCII space is \s to the regexes, and never in their classes; the CJK
			// stage (U+0800 to U+9FA5) then cuts the ideographic full stop off.
			{"a\u3000b\u3000。", []string{"a", "\u3000b", "\u3000", "。"}},
			// Letters outside the listed class stay with what follows.
			{"ǂab", []string{"ǂ", "ab"}},
		}},
		{"deepseek-coder", []splitCase{
			{"foo(bar) 42", []string{"foo", "(", "bar", ")", " ", "4", "2"}},
			{"한국어 ok\n\n", []string{"한국어", " ok", "\n", "\n"}},
			{"$x+=1", []string{"$", "x", "+=", "1"}},
		}},
	} {
		split, err := PreTokenizerByName(c.pre)
		require.NoError(t, err)
		t.Run(c.pre, func(t *testing.T) { checkSplits(t, split, c.cases) })
	}
}

// TestSplitCovers checks that every pre-tokenizer splits random text into
// non-empty chunks that make it up.
func TestSplitCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "Z", "1", "٣", " ", "  ", "\t", "\n", "\r", "'", "'s", "'LL", "!", ".", "é", "世", "🦙", "\u0303", "\u00a0", "\xff", "\xe2\x82", "$", "+", "<|endoftext|>"}
	for _, name := range PreTokenizerNames() {
		split, err := PreTokenizerByName(name)
		require.NoError(t, err)
		for range 300 {
			var sb strings.Builder
			for range rng.IntN(30) {
				sb.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			s := sb.String()
			chunks := split(s)
			for _, c := range chunks {
				require.NotEmpty(t, c, "%s: empty chunk of %q", name, s)
			}
			require.Equal(t, s, strings.Join(chunks, ""), "%s: chunks of %q", name, s)
		}
	}
}
