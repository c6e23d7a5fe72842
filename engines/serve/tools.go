package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/toyml/toy/engines/grammar"
	"github.com/toyml/toy/engines/sample"
)

// messagesOf reads a chat request's messages for the template: text contents, "developer" as
// the system role, an assistant's tool calls (their arguments a JSON string, as OpenAI sends
// them, or an object) and tool messages.
func messagesOf(in []chatMessage) ([]sample.Message, *apiError) {
	msgs := make([]sample.Message, 0, len(in))
	for i, m := range in {
		content, e := contentOf(i, m.Content)
		if e != nil {
			return nil, e
		}
		role := m.Role
		if role == "developer" {
			role = sample.RoleSystem // OpenAI's newer name for system
		}
		msg := sample.Message{Role: role, Content: content, ToolCallID: m.ToolCallID, Name: m.Name}
		if len(m.ToolCalls) > 0 && role != sample.RoleAssistant {
			return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "messages[%d]: a %s message carries tool_calls; only an assistant's may", i, role)
		}
		for k, c := range m.ToolCalls {
			param := fmt.Sprintf("messages[%d].tool_calls[%d]", i, k)
			if c.Type != "" && c.Type != "function" {
				return nil, badRequest(param+".type", "%s.type %q: want \"function\"", param, c.Type)
			}
			if c.Function.Name == "" {
				return nil, badRequest(param+".function.name", "%s: the function's \"name\" is required", param)
			}
			args, e := argumentsOf(param, c.Function.Arguments)
			if e != nil {
				return nil, e
			}
			msg.ToolCalls = append(msg.ToolCalls, sample.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// argumentsOf reads a call's "arguments": a string of JSON as OpenAI sends it, or a JSON object
// (what some clients send), as the text the client wrote.
func argumentsOf(param string, b json.RawMessage) (string, *apiError) {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return "{}", nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return s, nil
	}
	if b[0] != '{' { // decode checked that it is JSON
		return "", badRequest(param+".function.arguments", "%s.function.arguments: want a string of JSON or an object", param)
	}
	return string(b), nil
}

// toolUse is what a chat request asks of tools: the functions offered, and the grammar that
// constrains the reply to text or calls, calls alone, or calls of one function.
type toolUse struct {
	// raw are the tools as the request sent them, for the template.
	raw []json.RawMessage
	// names are the functions' names.
	names []string
	// syntax is the form the template tells the model to call in.
	syntax sample.ToolSyntax
	// grammar constrains the reply (tool_choice auto, required or a function).
	grammar *grammar.Grammar
}

// functionName is the names OpenAI allows a function.
var functionName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolsOf reads a chat request's tools, tool_choice and parallel_tool_calls for template t: nil
// where the reply is text alone (no tools, or tool_choice "none"), else the tools to render
// and the grammar of the reply (compiled from the functions' parameters). Malformed tools, a
// schema the grammar compiler cannot handle, a choice naming no tool offered, a choice that
// needs tools without any, and response_format beside tools are 400s.
func toolsOf(r *request, t *sample.Template) (*toolUse, *apiError) {
	var tools []struct {
		Type     string `json:"type"`
		Function *struct {
			Name        string          `json:"name"`
			Description json.RawMessage `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		} `json:"function"`
	}
	var raw []json.RawMessage
	if len(r.Tools) > 0 && !bytes.Equal(r.Tools, []byte("null")) {
		if json.Unmarshal(r.Tools, &raw) != nil || json.Unmarshal(r.Tools, &tools) != nil {
			return nil, badRequest("tools", "field \"tools\": want an array of {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}")
		}
	}
	var fns []grammar.Function
	for i, tool := range tools {
		param := fmt.Sprintf("tools[%d]", i)
		if tool.Type != "function" {
			return nil, badRequest(param+".type", "%s.type %q: want \"function\", the one kind of tool", param, tool.Type)
		}
		if tool.Function == nil {
			return nil, badRequest(param+".function", "%s: \"function\": {\"name\": ..., \"parameters\": {...}} is required", param)
		}
		name := tool.Function.Name
		if !functionName.MatchString(name) {
			return nil, badRequest(param+".function.name", "%s.function.name %q: want 1 to 64 letters, digits, _ or -", param, name)
		}
		if slices.ContainsFunc(fns, func(f grammar.Function) bool { return f.Name == name }) {
			return nil, badRequest(param+".function.name", "%s: a second function named %q", param, name)
		}
		params := tool.Function.Parameters
		if len(params) > 0 && !bytes.Equal(params, []byte("null")) {
			var schema map[string]json.RawMessage
			if json.Unmarshal(params, &schema) != nil {
				return nil, badRequest(param+".function.parameters", "%s.function.parameters: want a JSON Schema object", param)
			}
			if typ, ok := schema["type"]; ok && !bytes.Equal(bytes.TrimSpace(typ), []byte(`"object"`)) {
				return nil, badRequest(param+".function.parameters", "%s.function.parameters: the arguments are an object: want \"type\": \"object\", not %s", param, typ)
			}
		} else {
			params = nil
		}
		fns = append(fns, grammar.Function{Name: name, Parameters: params})
	}

	choice, named, e := toolChoiceOf(r.ToolChoice)
	if e != nil {
		return nil, e
	}
	if len(fns) == 0 {
		if choice == "required" || named != "" {
			return nil, badRequest("tool_choice", "tool_choice %s needs \"tools\": none were offered", compactJSON(r.ToolChoice))
		}
		return nil, nil
	}
	if choice == "" && named == "" {
		choice = "auto"
	}
	// Every schema compiles, whatever the choice: a bad one is the request's error.
	o := grammar.ToolCallOptions{Functions: fns, Optional: choice == "auto", Parallel: r.ParallelToolCalls == nil || *r.ParallelToolCalls}
	if t.ToolSyntax() == sample.ToolSyntaxJSON {
		o.Format = grammar.JSONCalls
	}
	g, err := grammar.CompileToolCalls(o)
	if err != nil {
		return nil, badRequest("tools", "tools: %v", err)
	}
	if choice == "none" {
		return nil, nil
	}
	if r.ResponseFormat != nil && r.ResponseFormat.Type != "" && r.ResponseFormat.Type != "text" {
		return nil, badRequest("response_format", "response_format %q with tools: a reply is either constrained to the format or to tool calls; send tool_choice \"none\" or no response_format", r.ResponseFormat.Type)
	}
	if named != "" {
		k := slices.IndexFunc(fns, func(f grammar.Function) bool { return f.Name == named })
		if k < 0 {
			return nil, badRequest("tool_choice", "tool_choice names the function %q, which is not among the tools offered", named)
		}
		o.Functions = fns[k : k+1]
		if g, err = grammar.CompileToolCalls(o); err != nil {
			return nil, badRequest("tools", "tools: %v", err)
		}
	}
	u := &toolUse{raw: raw, syntax: t.ToolSyntax(), grammar: g}
	for _, f := range fns {
		u.names = append(u.names, f.Name)
	}
	return u, nil
}

// toolChoiceOf reads "tool_choice": "" (absent or null), "none", "auto" or "required", or a
// function's name ({"type": "function", "function": {"name": ...}}).
func toolChoiceOf(b json.RawMessage) (choice, named string, e *apiError) {
	if len(b) == 0 || bytes.Equal(b, []byte("null")) {
		return "", "", nil
	}
	if json.Unmarshal(b, &choice) == nil {
		switch choice {
		case "none", "auto", "required":
			return choice, "", nil
		}
		return "", "", badRequest("tool_choice", "tool_choice %q: want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", choice)
	}
	var fn struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(b, &fn) != nil || fn.Type != "function" || fn.Function.Name == "" {
		return "", "", badRequest("tool_choice", "tool_choice %s: want \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}", compactJSON(b))
	}
	return "", fn.Function.Name, nil
}

// compactJSON is b without blanks, cut to 40 bytes, for a message.
func compactJSON(b json.RawMessage) string {
	var c bytes.Buffer
	if json.Compact(&c, b) != nil {
		c.Reset()
		c.Write(b)
	}
	t := c.String()
	if len(t) > 40 {
		t = t[:40] + "…"
	}
	return t
}

// toolCall is a call read from a reply.
type toolCall struct {
	name, arguments string
}

// callScanner reads a reply's text, as it comes, into content and calls, in the form the
// template asked for: Hermes calls anywhere in the text (the text between them and around them
// content), or a JSON call that is the whole reply. It gives out content as soon as it is
// sure it is not the start of a call, holding back blanks at its end (dropped before a call
// and at the end of a reply with calls). Text that looked like a call but does not read as
// one of the functions offered is content. Feeding a reply in any pieces gives the same
// content and calls.
type callScanner struct {
	syntax sample.ToolSyntax
	names  []string
	buf    string // the text not yet given out
	held   string // blanks at the end of the content given out, not yet given
	inCall bool
	// decided says, for a JSON call, that the reply's first byte came: a call is read only
	// when it is "{".
	decided bool
	calls   []toolCall
}

func newCallScanner(u *toolUse) *callScanner {
	return &callScanner{syntax: u.syntax, names: u.names}
}

// content gives out text as content, its trailing blanks held; before a call, the blanks
// before it are dropped.
func (s *callScanner) content(text string, beforeCall bool) string {
	text = s.held + text
	s.held = ""
	end := len(strings.TrimRightFunc(text, unicode.IsSpace))
	if beforeCall {
		return text[:end]
	}
	s.held = text[end:]
	return text[:end]
}

// feed reads the next piece of the reply and returns the content it can give out and the
// calls it completed.
func (s *callScanner) feed(text string) (string, []toolCall) {
	s.buf += text
	before := len(s.calls)
	var out strings.Builder
	if s.syntax == sample.ToolSyntaxJSON {
		s.feedJSON(&out)
	} else {
		s.feedHermes(&out)
	}
	return out.String(), s.calls[before:]
}

func (s *callScanner) feedHermes(out *strings.Builder) {
	for {
		if !s.inCall {
			if i := strings.Index(s.buf, grammar.HermesCallOpen); i >= 0 {
				out.WriteString(s.content(s.buf[:i], true))
				s.buf, s.inCall = s.buf[i:], true
				continue
			}
			keep := partialSuffix(s.buf, grammar.HermesCallOpen)
			out.WriteString(s.content(s.buf[:len(s.buf)-keep], false))
			s.buf = s.buf[len(s.buf)-keep:]
			return
		}
		j := strings.Index(s.buf, grammar.HermesCallClose)
		if j < 0 {
			return
		}
		end := j + len(grammar.HermesCallClose)
		if c, ok := s.parse(s.buf[len(grammar.HermesCallOpen):j]); ok {
			s.calls = append(s.calls, c)
		} else {
			out.WriteString(s.content(s.buf[:end], false))
		}
		s.buf, s.inCall = s.buf[end:], false
	}
}

func (s *callScanner) feedJSON(out *strings.Builder) {
	if !s.decided {
		if s.buf == "" {
			return
		}
		s.decided, s.inCall = true, s.buf[0] == '{'
	}
	if s.inCall {
		d := json.NewDecoder(strings.NewReader(s.buf))
		var v json.RawMessage
		err := d.Decode(&v)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return // the object goes on
		}
		s.inCall = false
		if err == nil {
			end := int(d.InputOffset())
			if c, ok := s.parse(s.buf[:end]); ok {
				s.calls = append(s.calls, c)
				s.buf = s.buf[end:]
			}
		}
	}
	out.WriteString(s.content(s.buf, false))
	s.buf = ""
}

// finish returns the rest of the content at the end of the reply: a call never closed is
// content, the blanks held too unless the reply made calls.
func (s *callScanner) finish() string {
	text := s.held + s.buf
	s.held, s.buf, s.inCall = "", "", false
	if len(s.calls) > 0 {
		return strings.TrimRightFunc(text, unicode.IsSpace)
	}
	return text
}

// parse reads one call's JSON object: "name", one of the functions offered, and its
// "arguments" (or "parameters"), an object or a string of one (absent: {}), given out as the
// model wrote them.
func (s *callScanner) parse(text string) (toolCall, bool) {
	d := json.NewDecoder(strings.NewReader(text))
	var obj map[string]json.RawMessage
	if d.Decode(&obj) != nil || strings.TrimSpace(text[d.InputOffset():]) != "" {
		return toolCall{}, false
	}
	var name string
	if json.Unmarshal(obj["name"], &name) != nil || !slices.Contains(s.names, name) {
		return toolCall{}, false
	}
	args, ok := obj["arguments"]
	if !ok {
		args = obj["parameters"]
	}
	args = bytes.TrimSpace(args)
	var str string
	switch {
	case len(args) == 0 || bytes.Equal(args, []byte("null")):
		args = []byte("{}")
	case json.Unmarshal(args, &str) == nil && json.Valid([]byte(str)):
		args = []byte(str)
	case args[0] != '{':
		return toolCall{}, false
	}
	return toolCall{name: name, arguments: string(args)}, true
}

// partialSuffix is the length of the longest end of s that is a proper start of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// callID is the id of call k of choice i of reply id.
func callID(id string, i, k int) string {
	return fmt.Sprintf("call_%s_%d_%d", strings.TrimPrefix(id, "chatcmpl-"), i, k)
}

// jsonToolCalls is calls in OpenAI's shape, the calls of choice i of reply id.
func jsonToolCalls(id string, i int, calls []toolCall) []any {
	out := make([]any, len(calls))
	for k, c := range calls {
		out[k] = map[string]any{"id": callID(id, i, k), "type": "function",
			"function": map[string]any{"name": c.name, "arguments": c.arguments}}
	}
	return out
}
