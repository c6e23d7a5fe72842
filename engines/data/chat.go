package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Message is one turn of a chat conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Conversation is one line of a chat JSONL file.
type Conversation struct {
	// Line is the conversation's line in its file (1-based), for error messages.
	Line     int
	Messages []Message
}

// ChatRoles are the roles a chat message may have.
var ChatRoles = []string{"system", "user", "assistant"}

// ReadChat reads a chat file in JSONL, one conversation a line, in the format Hugging Face
// and OpenAI fine-tuning use: {"messages":[{"role":"system|user|assistant","content":"..."}]}.
// Blank lines are skipped; anything else that is not such a conversation — bad JSON, an
// unknown key, an unknown role, no messages, no assistant message — is an error naming the
// file and the line. Nothing is dropped silently.
func ReadChat(path string) ([]Conversation, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readChat(path, f)
}

func readChat(path string, r io.Reader) ([]Conversation, error) {
	var out []Conversation
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<16), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		c, err := parseConversation(b)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		c.Line = line
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", path, line+1, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no conversation", path)
	}
	return out, nil
}

func parseConversation(b []byte) (Conversation, error) {
	var v struct {
		Messages []Message `json:"messages"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Conversation{}, fmt.Errorf("not a conversation ({\"messages\":[{\"role\":…,\"content\":…}]}): %w", err)
	}
	if dec.More() {
		return Conversation{}, fmt.Errorf("more than one JSON value on the line")
	}
	if len(v.Messages) == 0 {
		return Conversation{}, fmt.Errorf("no messages")
	}
	assistant := false
	for i, m := range v.Messages {
		switch m.Role {
		case "assistant":
			assistant = true
		case "system", "user":
		default:
			return Conversation{}, fmt.Errorf("message %d: role %q (want %s)", i, m.Role, strings.Join(ChatRoles, ", "))
		}
	}
	if !assistant {
		return Conversation{}, fmt.Errorf("no assistant message: nothing to train on")
	}
	return Conversation{Messages: v.Messages}, nil
}
