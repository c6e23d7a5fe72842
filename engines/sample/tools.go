package sample

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ToolSyntax is the text in which a model writes its tool calls, as its chat template tells it
// (Template.ToolSyntax).
type ToolSyntax int

const (
	// ToolSyntaxHermes is the Hermes convention (Qwen2.5, Hermes and the many templates that
	// copy them), each call between tags:
	//
	//	<tool_call>
	//	{"name": "NAME", "arguments": {...}}
	//	</tool_call>
	ToolSyntaxHermes ToolSyntax = iota
	// ToolSyntaxJSON is Llama 3.x's: the reply is one JSON object {"name": "NAME",
	// "parameters": {...}}.
	ToolSyntaxJSON
)

// toolsText is the Hermes convention's offer of tools, for the system message of a template
// that renders none: the functions as JSON lines between <tools> tags (keys in the order
// given) and the form of a call.
func toolsText(tools []json.RawMessage) (string, error) {
	var b strings.Builder
	b.WriteString("# Tools\n\nYou may call one or more functions to answer. Their signatures, as JSON, are within <tools></tools> tags:\n<tools>")
	for i, raw := range tools {
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return "", fmt.Errorf("sample: tool %d: %w", i, err)
		}
		b.WriteString("\n")
		b.Write(c.Bytes())
	}
	b.WriteString("\n</tools>\n\nTo call a function, write a JSON object of its name and arguments within <tool_call></tool_call> tags:\n" +
		"<tool_call>\n{\"name\": <function name>, \"arguments\": <arguments as a JSON object>}\n</tool_call>")
	return b.String(), nil
}

// callsText is an assistant's calls in the Hermes form, one after another on lines of their
// own; arguments that are not JSON are written as a JSON string.
func callsText(calls []ToolCall) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteString("\n")
		}
		name, _ := json.Marshal(c.Name)
		args := strings.TrimSpace(c.Arguments)
		if !json.Valid([]byte(args)) {
			q, _ := json.Marshal(c.Arguments)
			args = string(q)
		}
		fmt.Fprintf(&b, "<tool_call>\n{\"name\": %s, \"arguments\": %s}\n</tool_call>", name, args)
	}
	return b.String()
}

// responseText is a tool's answer in the Hermes form.
func responseText(content string) string {
	return "<tool_response>\n" + content + "\n</tool_response>"
}

// foldTools rewrites a conversation for a template that renders no tools, tool calls or tool
// messages (as said by foldOffer, foldCalls and foldResponses) into one it does render, in
// the Hermes convention: the offer of tools at the end of the system message (a new one
// first, of defaultSystem and the offer, when there is none), an assistant's calls as the
// text after its content, and consecutive tool messages as one user message of
// <tool_response> blocks. With toUser the offer opens the first user message instead (a
// template that takes no system message).
func foldTools(msgs []Message, tools []json.RawMessage, defaultSystem string, foldOffer, foldCalls, foldResponses, toUser bool) ([]Message, error) {
	out := make([]Message, 0, len(msgs)+1)
	for _, m := range msgs {
		switch {
		case foldCalls && m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			text := callsText(m.ToolCalls)
			if m.Content != "" {
				text = m.Content + "\n" + text
			}
			out = append(out, Message{Role: RoleAssistant, Content: text})
		case foldResponses && m.Role == RoleTool:
			text := responseText(m.Content)
			if n := len(out); n > 0 && out[n-1].Role == RoleUser && strings.HasSuffix(out[n-1].Content, "</tool_response>") {
				out[n-1].Content += "\n" + text
				continue
			}
			out = append(out, Message{Role: RoleUser, Content: text})
		default:
			out = append(out, m)
		}
	}
	if !foldOffer || len(tools) == 0 {
		return out, nil
	}
	offer, err := toolsText(tools)
	if err != nil {
		return nil, err
	}
	if toUser {
		for i := range out {
			if out[i].Role == RoleUser {
				out[i].Content = offer + "\n\n" + out[i].Content
				return out, nil
			}
		}
		return append([]Message{{Role: RoleUser, Content: offer}}, out...), nil
	}
	if len(out) > 0 && out[0].Role == RoleSystem {
		out[0].Content += "\n\n" + offer
		return out, nil
	}
	if defaultSystem != "" {
		offer = defaultSystem + "\n\n" + offer
	}
	return append([]Message{{Role: RoleSystem, Content: offer}}, out...), nil
}
