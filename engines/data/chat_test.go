package data

import (
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
