package infer

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
	"github.com/toyml/toy/engines/sample"
)

// pipeStdin makes toy's standard input a pipe that the returned writer feeds, for the rest of
// the test.
func pipeStdin(t *testing.T) *io.PipeWriter {
	pr, pw := io.Pipe()
	withStdin(t, pr)
	t.Cleanup(func() { pw.Close() })
	return pw
}

// feed writes lines (each ending with a newline) to w from another goroutine, then closes w
// when close is set.
func feed(w *io.PipeWriter, close bool, lines ...string) {
	go func() {
		for _, l := range lines {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return
			}
		}
		if close {
			w.Close()
		}
	}()
}

// oneShot runs a plain toy generate of prompt (greedy, the given flags) and returns the reply
// (what follows the echoed prompt, without the final newline) and the prompt's tokens as its
// timing summary reports them.
func oneShot(t *testing.T, model, prompt string, flags ...string) (string, int) {
	out, errOut, code := runToy(append([]string{"generate", "-m", model, "-p", prompt, "-t", "1", "--temp", "0"}, flags...)...)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, prompt) && strings.HasSuffix(out, "\n"), "%q", out)
	m := regexp.MustCompile(`toy generate: prompt (\d+) tokens in`).FindStringSubmatch(errOut)
	require.NotNil(t, m, errOut)
	n, _ := strconv.Atoi(m[1])
	return strings.TrimSuffix(strings.TrimPrefix(out, prompt), "\n"), n
}

// chatSummary reads a conversation's timing summary: its prompt tokens, those reused from
// the cache, and the generated tokens and replies.
func chatSummary(t *testing.T, errOut string) (prompt, reused, generated, replies int) {
	m := regexp.MustCompile(`\ntoy generate: load \d+ ms\ntoy generate: prompt (\d+) tokens, (\d+) of them reused from the cache; (\d+) computed in \d+ ms[^\n]*\ntoy generate: generated (\d+) tokens in (\d+) replies`).FindStringSubmatch(errOut)
	require.NotNil(t, m, errOut)
	v := make([]int, 5)
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	assert.Equal(t, v[0]-v[1], v[2], "computed = prompt - reused")
	return v[0], v[1], v[3], v[4]
}

// TestChat drives toy chat (toy generate -cnv) through a pipe on a random model: each reply is
// what a plain greedy generate of the conversation rendered so far (the template over the
// system message, the earlier turns and replies) gives, so the history accumulates; the
// cache keeps the earlier turns (the summary's reused tokens cover every earlier rendering but
// its last token, and its prompt tokens are the renderings' as generate counts them); a line
// ending in a backslash goes on to the next; /exit ends the conversation.
func TestChat(t *testing.T) {
	model := clitest.CheckpointWithContext(t, "tiny", filepath.Join(t.TempDir(), "chat.gguf"), 512)
	tmpl := sample.ChatML
	stops := []string{"-stop", "<|im_end|>", "-stop", "<|im_start|>"}
	system := "Be brief."
	msgs := []sample.Message{{Role: sample.RoleSystem, Content: system}}
	var replies []string
	var tokens []int
	for _, user := range []string{"func main() {", "if err != nil {\nreturn err", "return nil"} {
		msgs = append(msgs, sample.Message{Role: sample.RoleUser, Content: user})
		text, err := tmpl.Apply(msgs, true)
		require.NoError(t, err)
		reply, n := oneShot(t, model, text, append([]string{"-n", "8"}, stops...)...)
		tokens = append(tokens, n)
		replies = append(replies, reply+"\n")
		msgs = append(msgs, sample.Message{Role: sample.RoleAssistant, Content: reply})
	}

	for _, cmd := range [][]string{{"chat"}, {"generate", "-cnv"}, {"generate", "-i"}, {"generate", "--conversation"}} {
		w := pipeStdin(t)
		feed(w, true, "func main() {", "if err != nil {\\", "return err", "", "return nil", "/exit", "never read")
		sys := "-sys"
		if cmd[0] == "generate" {
			sys = "--system-prompt"
		}
		out, errOut, code := runToy(append(cmd, "-m", model, "-template", "chatml", sys, system, "-n", "8", "-t", "1", "--temp", "0")...)
		require.Equal(t, 0, code, "%v: %s", cmd, errOut)
		assert.Equal(t, strings.Join(replies, ""), out, "%v: the replies of a greedy generate of each rendering", cmd)
		prompt, reused, generated, n := chatSummary(t, errOut)
		assert.Equal(t, 3, n)
		assert.LessOrEqual(t, generated, 3*8)
		assert.Equal(t, tokens[0]+tokens[1]+tokens[2], prompt, "every turn's whole rendering, as generate counts it")
		assert.GreaterOrEqual(t, reused, tokens[0]-1+tokens[1]-1, "the earlier turns come from the cache")
		assert.Equal(t, 5, strings.Count(errOut, "> "), "a prompt before each message (not before a continued line), the empty one and /exit")
	}

	// The opening message from -p; the end of input ends the conversation like /exit.
	w := pipeStdin(t)
	feed(w, true, "if err != nil {\\", "return err")
	out, errOut, code := runToy("chat", "-m", model, "-template", "chatml", "-system", system, "-p", "func main() {", "-n", "8", "-t", "1", "--temp", "0")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, replies[0]+replies[1], out, "the -p message is the first turn")
}

// TestChatInterrupt: Ctrl-C during a reply stops that reply (what came of it stays in the
// history) and the conversation goes on; Ctrl-C at the prompt ends it with status 130, after
// the timing summary.
func TestChatInterrupt(t *testing.T) {
	model := clitest.CheckpointWithContext(t, "tiny", filepath.Join(t.TempDir(), "chat.gguf"), 512)
	var interrupts chan<- os.Signal
	prev := notifyInterrupt
	notifyInterrupt = func(c chan<- os.Signal) func() { interrupts = c; return func() {} }
	t.Cleanup(func() { notifyInterrupt = prev })

	w := pipeStdin(t)
	feed(w, false, "func main() {", "return nil") // the pipe stays open: only Ctrl-C ends the conversation
	var stdout, stderr strings.Builder
	var once sync.Once
	var first string // the first reply's first text
	prompts := 0
	code := run([]string{"chat", "-m", model, "-template", "chatml", "-n", "8", "-t", "1", "--temp", "0"},
		hookWriter{&stdout, func(p []byte) {
			once.Do(func() {
				first = string(p)
				interrupts <- os.Interrupt // Ctrl-C once the first reply's first text is out
			})
		}},
		hookWriter{&stderr, func(p []byte) {
			if string(p) == "> " {
				if prompts++; prompts == 3 {
					interrupts <- os.Interrupt // Ctrl-C at the prompt after the second reply
				}
			}
		}})
	require.Equal(t, 130, code, stderr.String())
	assert.Contains(t, stderr.String(), "reply stopped")
	assert.Contains(t, stderr.String(), "toy chat: Ctrl-C at the prompt: the conversation ends")
	_, _, _, replies := chatSummary(t, stderr.String())
	assert.Equal(t, 2, replies)

	// The stopped reply is its first piece: a greedy generate's reply starts with it.
	msgs := []sample.Message{{Role: sample.RoleUser, Content: "func main() {"}}
	text, err := sample.ChatML.Apply(msgs, true)
	require.NoError(t, err)
	whole, _ := oneShot(t, model, text, "-n", "8")
	require.NotEmpty(t, first)
	assert.True(t, strings.HasPrefix(whole, first) && len(first) < len(whole), "%q is the start of %q", first, whole)
	msgs = append(msgs, sample.Message{Role: sample.RoleAssistant, Content: first}, sample.Message{Role: sample.RoleUser, Content: "return nil"})
	text, err = sample.ChatML.Apply(msgs, true)
	require.NoError(t, err)
	second, _ := oneShot(t, model, text, "-n", "8")
	assert.Equal(t, first+"\n"+second+"\n", stdout.String(), "the second turn sees the stopped reply")
}

// hookWriter writes to w and calls hook with what it wrote.
type hookWriter struct {
	w    io.Writer
	hook func([]byte)
}

func (h hookWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.hook(p)
	return n, err
}

// TestChatPlainAndRefusals: -i on a model without a chat template continues plain text (each
// line appended as typed, its newline included), as plain generates of the text so far do;
// -cnv there is refused, and so are flags a conversation cannot take.
func TestChatPlainAndRefusals(t *testing.T) {
	model := clitest.CheckpointWithContext(t, "tiny", filepath.Join(t.TempDir(), "plain.gguf"), 512)
	r1, _ := oneShot(t, model, "func main", "-n", "6")
	r2, _ := oneShot(t, model, "func main"+r1+"if err\n", "-n", "6")
	w := pipeStdin(t)
	feed(w, true, "if err")
	out, errOut, code := runToy("generate", "-i", "-m", model, "-p", "func main", "-n", "6", "-t", "1", "--temp", "0")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, "func main"+r1+"\n"+r2+"\n", out)
	assert.Contains(t, errOut, "plain text")

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-cnv"}, 1, "the model has no chat template"},
		{[]string{"-i", "-template", "llama9"}, 1, `-template: sample: unknown chat template "llama9"`},
		{[]string{"-i", "-sys", "Be brief."}, 2, "has no system message"},
		{[]string{"-cnv", "-p", "-"}, 2, "-p - reads the prompt from standard input"},
		{[]string{"-cnv", "-draft", model}, 2, "without -draft or -dflash"},
	} {
		w := pipeStdin(t)
		feed(w, true, "hi")
		out, errOut, code := runToy(append([]string{"generate", "-m", model, "-t", "1"}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errOut)
		assert.Empty(t, out, c.args)
		assert.Contains(t, errOut, c.msg, c.args)
	}
}
