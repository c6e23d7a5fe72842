package sample

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// JinjaOptions are the values a Jinja chat template is rendered with beside
// the conversation.
type JinjaOptions struct {
	// Source names where the template came from ("model.gguf"); errors
	// start with it.
	Source string
	// BOSToken and EOSToken are the texts of the model's BOS and EOS
	// tokens, the template's bos_token and eos_token ("" when the model
	// has none).
	BOSToken, EOSToken string
	// AddsBOS says the caller puts the BOS token before the prompt itself
	// (tokenizer.ggml.add_bos_token): a bos_token the template writes at
	// the start is then dropped, as llama.cpp does, so that the prompt
	// holds one BOS. Without it the template's bos_token stays in the
	// text and encodes (with ParseSpecial) to the BOS token.
	AddsBOS bool
}

// TemplateError is a Jinja chat template's failure to compile or render.
type TemplateError struct {
	// Source is JinjaOptions.Source.
	Source string
	// Line is the template's line (1-based) where it failed, 0 when the
	// engine does not say.
	Line int
	// Raised is true when the template itself refused the conversation
	// with raise_exception; Message is then the template's message.
	Raised bool
	// Message says what failed.
	Message string
}

func (e *TemplateError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		b.WriteString(": ")
	}
	b.WriteString("chat template")
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Raised {
		b.WriteString(" refuses the conversation: ")
	} else {
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// jinjaTemplate is the compiled form of a Jinja chat template and what was
// derived from it.
type jinjaTemplate struct {
	prog      *jinja.Template
	src       string
	opts      JinjaOptions
	endOfTurn string
	stops     []string
	// caps says what of tools the template renders itself (probeTools).
	caps toolCaps
}

// toolCaps says which of the tool parts of a conversation a Jinja template renders: the offer
// of tools, an assistant's calls, tool messages. render folds the others into text
// (foldTools), as llama.cpp does for templates that lack them.
type toolCaps struct {
	tools, calls, responses bool
}

// The probe conversation NewJinjaTemplate renders to find where an
// assistant turn ends, and the names and texts of its probes of what the
// template does with tools.
const (
	probeQuestion = "toy-probe-question"
	probeReply    = "toy-probe-reply"
	probeTool     = "toy_probe_tool"
	probeCall     = "toy_probe_call"
	probeResult   = "toy-probe-result"
)

// compileJinja compiles a Jinja chat template and derives its end of turn, stop strings and
// what of tools it renders, for NewJinjaTemplate; a failure of the engine's, a panic
// included, is a *TemplateError.
func compileJinja(src string, opts JinjaOptions) (j *jinjaTemplate, err error) {
	defer func() {
		if p := recover(); p != nil { // the engine's bug must not take the process down on a file's template
			j, err = nil, &TemplateError{Source: opts.Source, Message: fmt.Sprintf("the Jinja engine failed: %v", p)}
		}
	}()
	prog, err := jinja.Compile(src)
	if err != nil {
		return nil, &TemplateError{Source: opts.Source, Line: engineLine(err), Message: err.Error()}
	}
	j = &jinjaTemplate{prog: prog, src: src, opts: opts}
	j.endOfTurn = j.probeEndOfTurn()
	j.caps = j.probeTools()
	var stops []string
	add := func(s string) {
		if s != "" && !containsString(stops, s) {
			stops = append(stops, s)
		}
	}
	add(j.endOfTurn)
	for _, start := range []string{"<|im_start|>", "<start_of_turn>"} {
		if strings.Contains(src, start) {
			add(start)
		}
	}
	add(opts.EOSToken)
	j.stops = stops
	return j, nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// probeEndOfTurn renders a user/assistant conversation and returns the text
// after the assistant's content up to white space (spaces and tabs before
// it skipped), or the EOS text when there is none.
func (j *jinjaTemplate) probeEndOfTurn() string {
	out, err := j.render([]Message{{Role: RoleUser, Content: probeQuestion}, {Role: RoleAssistant, Content: probeReply}}, RenderOptions{})
	if err != nil {
		return j.opts.EOSToken
	}
	i := strings.LastIndex(out, probeReply)
	if i < 0 {
		return j.opts.EOSToken
	}
	rest := strings.TrimLeft(out[i+len(probeReply):], " \t")
	if k := strings.IndexAny(rest, " \t\r\n"); k >= 0 {
		rest = rest[:k]
	}
	if rest == "" {
		return j.opts.EOSToken
	}
	return rest
}

// probeTools renders probe conversations to find which tool parts the
// template writes: an offered tool's name, a call's name, a tool message's
// text. A probe the template refuses counts as a part it does not write.
func (j *jinjaTemplate) probeTools() toolCaps {
	var c toolCaps
	user := Message{Role: RoleUser, Content: probeQuestion}
	tool := json.RawMessage(`{"type": "function", "function": {"name": "` + probeTool + `", "description": "a probe", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}`)
	if out, err := j.renderAsIs([]Message{user}, RenderOptions{Tools: []json.RawMessage{tool}}); err == nil {
		c.tools = strings.Contains(out, probeTool)
	}
	call := Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: probeCall, Arguments: `{"x": "y"}`}}}
	if out, err := j.renderAsIs([]Message{user, call}, RenderOptions{Tools: []json.RawMessage{tool}}); err == nil {
		c.calls = strings.Contains(out, probeCall)
	}
	result := Message{Role: RoleTool, ToolCallID: "call_1", Name: probeCall, Content: probeResult}
	if out, err := j.renderAsIs([]Message{user, call, result}, RenderOptions{Tools: []json.RawMessage{tool}}); err == nil {
		c.responses = strings.Contains(out, probeResult)
	}
	return c
}

// render renders msgs through the template, first folding into text the
// tool parts it does not write itself (toolCaps): the offer of tools into
// the system message, or, where the template refuses that conversation,
// into the first user message.
func (j *jinjaTemplate) render(msgs []Message, o RenderOptions) (string, error) {
	hasCalls, hasResponses := false, false
	for _, m := range msgs {
		hasCalls = hasCalls || len(m.ToolCalls) > 0
		hasResponses = hasResponses || m.Role == RoleTool
	}
	foldOffer := len(o.Tools) > 0 && !j.caps.tools
	foldCalls, foldResponses := hasCalls && !j.caps.calls, hasResponses && !j.caps.responses
	if !foldOffer && !foldCalls && !foldResponses {
		return j.renderAsIs(msgs, o)
	}
	tools := o.Tools
	folded, err := foldTools(msgs, tools, "", foldOffer, foldCalls, foldResponses, false)
	if err != nil {
		return "", err
	}
	if foldOffer {
		o.Tools = nil
	}
	out, err := j.renderAsIs(folded, o)
	if err != nil && foldOffer && !(len(msgs) > 0 && msgs[0].Role == RoleSystem) {
		// The template may take no system message (Gemma's): the offer opens the first user
		// message instead.
		if folded, err2 := foldTools(msgs, tools, "", true, foldCalls, foldResponses, true); err2 == nil {
			if out2, err2 := j.renderAsIs(folded, o); err2 == nil {
				return out2, nil
			}
		}
	}
	return out, err
}

// raised is the error the template's raise_exception returns.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }

// renderAsIs renders msgs and o's tools through the template as they are.
func (j *jinjaTemplate) renderAsIs(msgs []Message, o RenderOptions) (out string, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = "", &TemplateError{Source: j.opts.Source, Message: fmt.Sprintf("the Jinja engine failed: %v", p)}
		}
	}()
	data := map[string]jinja.Value{
		"messages":              messagesValue(msgs),
		"add_generation_prompt": jinja.NewBool(o.AddGenerationPrompt),
		"bos_token":             jinja.NewString(j.opts.BOSToken),
		"eos_token":             jinja.NewString(j.opts.EOSToken),
		"tools":                 jinja.None(),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception called"
			switch {
			case len(args) > 0 && args[0].IsString():
				msg = args[0].AsString()
			case len(args) > 0:
				msg = args[0].String()
			}
			return jinja.Undefined(), &raised{msg}
		}),
	}
	if len(o.Tools) > 0 {
		tools := make([]jinja.Value, len(o.Tools))
		for i, raw := range o.Tools {
			v, err := jsonToValue(raw)
			if err != nil {
				return "", fmt.Errorf("sample: tool %d: %w", i, err)
			}
			tools[i] = v
		}
		data["tools"] = jinja.NewList(tools)
	}
	out, err = j.prog.RenderValues(data)
	if err != nil {
		var r *raised
		if errors.As(err, &r) {
			return "", &TemplateError{Source: j.opts.Source, Line: raiseLine(j.src, r.msg), Raised: true, Message: r.msg}
		}
		return "", &TemplateError{Source: j.opts.Source, Line: engineLine(err), Message: err.Error()}
	}
	if j.opts.AddsBOS && j.opts.BOSToken != "" {
		out = strings.TrimPrefix(out, j.opts.BOSToken)
	}
	return out, nil
}

// messagesValue is the conversation as the list of dicts a chat template
// reads: role and content always (content None for an assistant message that
// only calls tools, as OpenAI sends it), tool_calls in OpenAI's shape
// ({"id", "type": "function", "function": {"name", "arguments"}}, the
// arguments an object when they are a JSON object, as Hugging Face passes
// them), tool_call_id and name where set.
func messagesValue(msgs []Message) jinja.Value {
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v := jinja.NewDict()
		d := v.AsDict()
		d.Set("role", jinja.NewString(m.Role))
		if m.Content == "" && len(m.ToolCalls) > 0 {
			d.Set("content", jinja.None())
		} else {
			d.Set("content", jinja.NewString(m.Content))
		}
		if len(m.ToolCalls) > 0 {
			calls := make([]jinja.Value, len(m.ToolCalls))
			for k, c := range m.ToolCalls {
				fn := jinja.NewDict()
				fn.AsDict().Set("name", jinja.NewString(c.Name))
				args, err := jsonToValue([]byte(c.Arguments))
				if err != nil || !args.IsDict() {
					args = jinja.NewString(c.Arguments)
				}
				fn.AsDict().Set("arguments", args)
				call := jinja.NewDict()
				if c.ID != "" {
					call.AsDict().Set("id", jinja.NewString(c.ID))
				}
				call.AsDict().Set("type", jinja.NewString("function"))
				call.AsDict().Set("function", fn)
				calls[k] = call
			}
			d.Set("tool_calls", jinja.NewList(calls))
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		if m.Name != "" {
			d.Set("name", jinja.NewString(m.Name))
		}
		list[i] = v
	}
	return jinja.NewList(list)
}

// jsonToValue decodes one JSON value into a template value, keeping the
// order of object keys (tojson writes them back in that order, as Python's
// json.dumps does) and integers as integers.
func jsonToValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := dec.Token(); err == nil {
		return jinja.Undefined(), errors.New("JSON value followed by more data")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (jinja.Value, error) {
	tok, err := dec.Token()
	if err != nil {
		return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Undefined(), fmt.Errorf("invalid JSON: %w", err)
				}
				key, _ := k.(string)
				val, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				v.AsDict().Set(key, val)
			}
			_, err = dec.Token() // '}'
			return v, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				val, err := decodeValue(dec)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, val)
			}
			_, err = dec.Token() // ']'
			return jinja.NewList(items), err
		}
		return jinja.Undefined(), fmt.Errorf("invalid JSON: unexpected %v", x)
	case json.Number, string, bool, nil:
		return jinja.FromGoValue(x), nil
	}
	return jinja.Undefined(), fmt.Errorf("invalid JSON token %v", tok)
}

var engineLineRE = regexp.MustCompile(`\bline (\d+)`)

// engineLine is the template line the Jinja engine's error names, or 0.
func engineLine(err error) int {
	if m := engineLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

var raiseCallRE = regexp.MustCompile(`raise_exception\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")?`)

// raiseLine finds the line of the raise_exception call that raised msg: the
// call whose string literal is msg, else the only call in the template, else
// 0 (the engine does not report lines while rendering).
func raiseLine(src, msg string) int {
	matches := raiseCallRE.FindAllStringSubmatchIndex(src, -1)
	for _, m := range matches {
		lit := ""
		switch {
		case m[2] >= 0:
			lit = src[m[2]:m[3]]
		case m[4] >= 0:
			lit = src[m[4]:m[5]]
		default:
			continue
		}
		if unescapeLiteral(lit) == msg {
			return 1 + strings.Count(src[:m[0]], "\n")
		}
	}
	if len(matches) == 1 {
		return 1 + strings.Count(src[:matches[0][0]], "\n")
	}
	return 0
}

// unescapeLiteral undoes a Jinja string literal's backslash escapes.
func unescapeLiteral(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
