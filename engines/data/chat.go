package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Message is one turn of a chat conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Conversation is one line of a chat JSONL file.
type Conversation struct {
	// Path is its file and Line its line there (1-based), for error messages.
	Path     string
	Line     int
	Messages []Message
}

// IsChatData reports whether path holds chat data: a .jsonl file, or a directory whose
// regular files (below it, at any depth) are all .jsonl files. A directory that mixes them
// with other files is an error naming one of each, so that nothing is silently left out.
func IsChatData(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		return isJSONL(path), nil
	}
	files, others, err := chatFiles(path)
	if err != nil {
		return false, err
	}
	if len(files) > 0 && len(others) > 0 {
		return false, fmt.Errorf("data: %s mixes chat files (%s) with others (%s): give a directory of one kind", path, files[0], others[0])
	}
	return len(files) > 0, nil
}

func isJSONL(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".jsonl") }

// chatFiles lists the regular files below dir in lexical order: the .jsonl ones and the others.
func chatFiles(dir string) (files, others []string, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir() || !d.Type().IsRegular():
			return err
		case isJSONL(p):
			files = append(files, p)
		default:
			others = append(others, p)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("data: reading %s: %w", dir, err)
	}
	return files, others, nil
}

// ChatRoles are the roles a chat message may have.
var ChatRoles = []string{"system", "user", "assistant"}

// ReadChat reads a chat file in JSONL, one conversation a line, in the format Hugging Face
// and OpenAI fine-tuning use: {"messages":[{"role":"system|user|assistant","content":"..."}]}.
// Blank lines are skipped; anything else that is not such a conversation — bad JSON, an
// unknown key, an unknown role, no messages, no assistant message — is an error naming the
// file and the line. Nothing is dropped silently. A directory (see IsChatData) is read file by
// file in lexical order.
func ReadChat(path string) ([]Conversation, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, others, err := chatFiles(path)
		switch {
		case err != nil:
			return nil, err
		case len(others) > 0:
			return nil, fmt.Errorf("data: %s: %s is not a chat file (.jsonl)", path, others[0])
		case len(files) == 0:
			return nil, fmt.Errorf("data: %s holds no chat file (.jsonl)", path)
		}
		var all []Conversation
		for _, p := range files {
			convs, err := ReadChat(p)
			if err != nil {
				return nil, err
			}
			all = append(all, convs...)
		}
		return all, nil
	}
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
		c.Path, c.Line = path, line
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
