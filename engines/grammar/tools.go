package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ToolCallFormat is the text in which a model writes its function calls.
type ToolCallFormat int

const (
	// HermesCalls is the Hermes convention (Qwen2.5 and many others), each call on lines of its
	// own between tags, calls one after another:
	//
	//	<tool_call>
	//	{"name": "NAME", "arguments": {...}}
	//	</tool_call>
	HermesCalls ToolCallFormat = iota
	// JSONCalls is Llama 3.x's: the reply is one JSON object {"name": "NAME", "parameters":
	// {...}}.
	JSONCalls
)

// The tags around a call in HermesCalls.
const (
	HermesCallOpen  = "<tool_call>"
	HermesCallClose = "</tool_call>"
)

// Function is a function a model may call: its name and the JSON Schema of its arguments
// (OpenAI's "parameters"; empty: no arguments, the object {}).
type Function struct {
	Name       string
	Parameters []byte
}

// ToolCallOptions say which calls a tool-call grammar (ToolCallsGBNF) allows.
type ToolCallOptions struct {
	// Format is the text of a call.
	Format ToolCallFormat
	// Functions are the functions a call may name (at least one).
	Functions []Function
	// Optional lets the reply be text instead (OpenAI's tool_choice "auto"): any text in which a
	// call does not start (HermesCalls: text without "<tool_call>", then calls or not;
	// JSONCalls: text that does not start with "{"). Once a call starts it must be one.
	// Without Optional the reply is calls and nothing else ("required", a named function).
	Optional bool
	// Parallel allows several calls, each after a newline (HermesCalls; a JSONCalls reply holds
	// one call); without it, one.
	Parallel bool
}

// ToolCallsGBNF is the GBNF text of the replies that call o's functions in o's format: each
// call names one of them and its arguments validate against that function's parameters, with
// the schemas FromJSONSchema compiles (an *UnsupportedError, wrapped with the function's name,
// for one it cannot).
func ToolCallsGBNF(o ToolCallOptions) (string, error) {
	if len(o.Functions) == 0 {
		return "", errors.New("tool calls: no functions")
	}
	c := &schemaCompiler{rules: map[string]string{}, bodies: map[string]string{}}
	argsKey := `"arguments"`
	if o.Format == JSONCalls {
		argsKey = `"parameters"`
	}
	var named []string
	for _, f := range o.Functions {
		params := f.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = []byte(`{"type": "object", "properties": {}}`)
		}
		args, err := c.compileRoot(params, "args-"+f.Name)
		if err != nil {
			return "", fmt.Errorf("function %q: parameters: %w", f.Name, err)
		}
		var name strings.Builder
		writeJSONString(&name, f.Name)
		named = append(named, c.define("call-"+f.Name, gbnfQuote(name.String()+", "+argsKey+": ")+" "+args))
	}
	fns := c.define("function", strings.Join(named, " | "))
	var root string
	switch o.Format {
	case HermesCalls:
		// A call without its opening tag: what follows the tag where text came before it.
		rest := c.define("call-rest", gbnfQuote("\n{\"name\": ")+" "+fns+" "+gbnfQuote("}\n"+HermesCallClose))
		call := c.define("call", gbnfQuote(HermesCallOpen)+" "+rest)
		if o.Parallel {
			rest = c.define("calls-rest", rest+` ( "\n" `+call+" )*")
		}
		calls := c.define("calls", gbnfQuote(HermesCallOpen)+" "+rest)
		root = calls
		if o.Optional {
			root = c.prose(HermesCallOpen, rest)
		}
	case JSONCalls:
		call := c.define("call", gbnfQuote(`{"name": `)+" "+fns+` "}"`)
		root = call
		if o.Optional {
			root = c.define("reply", call+` | ( [^{] .* )?`)
		}
	default:
		return "", fmt.Errorf("tool calls: unknown format %d", o.Format)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "root ::= %s\n", root)
	for _, n := range c.order {
		fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
	}
	sb.WriteString(jsonCommon)
	return sb.String(), nil
}

// CompileToolCalls is ToolCallsGBNF's grammar, compiled (Parse).
func CompileToolCalls(o ToolCallOptions) (*Grammar, error) {
	text, err := ToolCallsGBNF(o)
	if err != nil {
		return nil, err
	}
	g, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("tool calls: a function's references loop without a value between them: %w", err)
	}
	return g, nil
}

// prose defines the rules of any text in which trigger (ASCII) does not occur, or which goes on
// with the rule after where trigger first does, and returns the first rule's name. The rules
// are the states of the automaton that finds trigger (Knuth-Morris-Pratt): state i has read
// the first i bytes of trigger as the text's end, and each alternative reads one character,
// so that the text may end anywhere before trigger completes.
func (c *schemaCompiler) prose(trigger, after string) string {
	k := len(trigger)
	// fail[i]: the state after a mismatch in state i, the longest proper border of trigger[:i].
	fail := make([]int, k+1)
	for i := 1; i < k; i++ {
		j := fail[i]
		for j > 0 && trigger[i] != trigger[j] {
			j = fail[j]
		}
		if trigger[i] == trigger[j] {
			j++
		}
		fail[i+1] = j
	}
	next := func(i int, b byte) int {
		for i > 0 && trigger[i] != b {
			i = fail[i]
		}
		if trigger[i] == b {
			return i + 1
		}
		return 0
	}
	var chars []byte
	for i := range k {
		if !slices.Contains(chars, trigger[i]) {
			chars = append(chars, trigger[i])
		}
	}
	var others strings.Builder
	others.WriteString("[^")
	for _, b := range chars {
		others.WriteString(classChar(rune(b)))
	}
	others.WriteString("]")
	names := make([]string, k)
	for i := range k {
		names[i] = c.ruleName(fmt.Sprintf("prose-%d", i))
		c.rules[names[i]] = "(being compiled)"
		c.order = append(c.order, names[i])
	}
	for i := range k {
		alts := []string{others.String() + " " + names[0]}
		for _, b := range chars {
			j := next(i, b)
			to := after
			if j < k {
				to = names[j]
			}
			alts = append(alts, gbnfQuote(string(b))+" "+to)
		}
		c.rules[names[i]] = "( " + strings.Join(alts, " | ") + " )?"
	}
	return names[0]
}
