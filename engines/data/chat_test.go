package data

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadChat(t *testing.T) {
	good := `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}

{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"4"}]}
`
	cs, err := readChat("c.jsonl", strings.NewReader(good))
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, 1, cs[0].Line)
	assert.Equal(t, 3, cs[1].Line)
	assert.Equal(t, Message{Role: "assistant", Content: "4"}, cs[1].Messages[1])

	for _, c := range []struct{ in, want string }{
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}` + "\n{oops", "c.jsonl:2: not a conversation"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, `c.jsonl:1: message 0: role "tool"`},
		{`{"messages":[]}`, "c.jsonl:1: no messages"},
		{`{"messages":[{"role":"user","content":"x"}]}`, "c.jsonl:1: no assistant message"},
		{`{"messages":[{"role":"assistant","content":"x","name":"bob"}]}`, `c.jsonl:1: not a conversation`},
		{`{"msgs":[]}`, `c.jsonl:1: not a conversation`},
		{`{"messages":[{"role":"assistant","content":"x"}]} {}`, `c.jsonl:1: more than one JSON value`},
		{"\n\n", "holds no conversation"},
	} {
		_, err := readChat("c.jsonl", strings.NewReader(c.in))
		assert.ErrorContains(t, err, c.want, c.in)
	}
}

// TestReadChatDirectory: a directory of .jsonl files is chat data, read file by file in
// lexical order with each conversation's file and line; one that mixes them with other files
// is refused, naming both, and a bad line names its file.
func TestReadChatDirectory(t *testing.T) {
	dir := t.TempDir()
	conv := func(a string) string {
		return `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"` + a + `"}]}` + "\n"
	}
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(conv("b1")+conv("b2")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(conv("a1")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "c.JSONL"), []byte("\n"+conv("c1")), 0o644))
	chat, err := IsChatData(dir)
	require.NoError(t, err)
	assert.True(t, chat)
	cs, err := ReadChat(dir)
	require.NoError(t, err)
	var got []string
	for _, c := range cs {
		got = append(got, fmt.Sprintf("%s:%d:%s", filepath.Base(c.Path), c.Line, c.Messages[1].Content))
	}
	assert.Equal(t, []string{"a.jsonl:1:a1", "b.jsonl:1:b1", "b.jsonl:2:b2", "c.JSONL:2:c1"}, got)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "bad.jsonl"), []byte(conv("x")+"{oops\n"), 0o644))
	_, err = ReadChat(dir)
	assert.ErrorContains(t, err, "bad.jsonl:2: not a conversation")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("text"), 0o644))
	_, err = IsChatData(dir)
	assert.ErrorContains(t, err, "mixes chat files")
	assert.ErrorContains(t, err, "notes.txt")
	_, err = ReadChat(dir)
	assert.ErrorContains(t, err, "notes.txt is not a chat file")

	text := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(text, "doc.txt"), []byte("text"), 0o644))
	chat, err = IsChatData(text)
	require.NoError(t, err)
	assert.False(t, chat, "a directory of text is not chat data")
	chat, err = IsChatData(filepath.Join(dir, "a.jsonl"))
	require.NoError(t, err)
	assert.True(t, chat)
}
