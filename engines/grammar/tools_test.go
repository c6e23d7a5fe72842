package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testFunctions are functions whose parameters are some of testSchemas, and one without any.
func testFunctions() []Function {
	return []Function{
		{Name: "get_person", Parameters: []byte(testSchemas["person"])},
		{Name: "draw", Parameters: []byte(testSchemas["shapes"])},
		{Name: "grow", Parameters: []byte(testSchemas["tree"])},
		{Name: "ping"},
	}
}

// parsedCall is one call read back from a reply by splitCalls.
type parsedCall struct {
	name string
	args []byte
}

// splitCalls reads the calls of a whole reply the way a client would, independently of the
// grammar: Hermes tags around JSON objects with "name" and "arguments" (JSONCalls: one object
// with "name" and "parameters"), only newlines between them. It fails on anything else.
func splitCalls(format ToolCallFormat, text string) ([]parsedCall, error) {
	key := "arguments"
	var objects []string
	switch format {
	case HermesCalls:
		for text != "" {
			rest, ok := strings.CutPrefix(text, HermesCallOpen)
			if !ok {
				return nil, fmt.Errorf("want %s at %q", HermesCallOpen, text)
			}
			body, after, ok := strings.Cut(rest, HermesCallClose)
			if !ok {
				return nil, fmt.Errorf("no %s in %q", HermesCallClose, rest)
			}
			objects = append(objects, body)
			text = after
			if text != "" {
				if text, ok = strings.CutPrefix(text, "\n"); !ok {
					return nil, fmt.Errorf("want a newline between calls at %q", after)
				}
			}
		}
	case JSONCalls:
		key = "parameters"
		objects = []string{text}
	}
	var calls []parsedCall
	for _, o := range objects {
		var c map[string]json.RawMessage
		d := json.NewDecoder(strings.NewReader(o))
		if err := d.Decode(&c); err != nil {
			return nil, fmt.Errorf("%q: %w", o, err)
		}
		if d.More() {
			return nil, fmt.Errorf("%q: more after the object", o)
		}
		var name string
		if err := json.Unmarshal(c["name"], &name); err != nil {
			return nil, fmt.Errorf("%q: name: %w", o, err)
		}
		if len(c) != 2 || c[key] == nil {
			return nil, fmt.Errorf("%q: want the keys name and %s", o, key)
		}
		calls = append(calls, parsedCall{name, c[key]})
	}
	return calls, nil
}

// checkCalls validates each call's arguments with a JSON-Schema validator of its function's
// parameters.
func checkCalls(t *testing.T, validators map[string]*jsonschema.Schema, calls []parsedCall) error {
	for _, c := range calls {
		v, ok := validators[c.name]
		if !ok {
			return fmt.Errorf("a call of %q, no such function", c.name)
		}
		if err := validate(t, v, c.args); err != nil {
			return fmt.Errorf("%s(%s): %w", c.name, c.args, err)
		}
	}
	return nil
}

// TestToolCallSentencesValidate draws replies from tool-call grammars byte by byte at random, in
// both formats, with calls required or optional, one or several: every reply must read back as
// calls of the functions offered (the named one alone when only one is) whose arguments
// validate; an optional reply is text in which no call starts, or such text then calls.
func TestToolCallSentencesValidate(t *testing.T) {
	fns := testFunctions()
	validators := map[string]*jsonschema.Schema{}
	for _, f := range fns {
		schema := string(f.Parameters)
		if schema == "" {
			schema = `{"type": "object", "properties": {}, "additionalProperties": false}`
		}
		validators[f.Name] = compileValidator(t, schema)
	}
	for _, format := range []ToolCallFormat{HermesCalls, JSONCalls} {
		for _, optional := range []bool{false, true} {
			for _, parallel := range []bool{false, true} {
				for _, offered := range [][]Function{fns, fns[1:2]} {
					name := fmt.Sprintf("format%d/optional=%v/parallel=%v/functions=%d", format, optional, parallel, len(offered))
					t.Run(name, func(t *testing.T) {
						o := ToolCallOptions{Format: format, Functions: offered, Optional: optional, Parallel: parallel}
						text, err := ToolCallsGBNF(o)
						require.NoError(t, err)
						g, err := Parse(text)
						require.NoError(t, err, "%s", text)
						rng := rand.New(rand.NewPCG(11, uint64(len(name))))
						counts := map[int]int{}
						for range 150 {
							var prefix string
							if optional && rng.IntN(4) > 0 { // text, then a call begins
								prefix = []string{"", "Let me look.\n", "<tool <<", "{"}[rng.IntN(4)]
								if format == HermesCalls {
									prefix += HermesCallOpen
								} else {
									prefix = "{"
								}
							}
							s := walkFrom(g, prefix, rng, 4000)
							if s == nil {
								continue
							}
							reply := string(s)
							if optional {
								trigger := HermesCallOpen
								if format == JSONCalls {
									trigger = "{"
								}
								i := strings.Index(reply, trigger)
								if i < 0 || format == JSONCalls && i > 0 {
									counts[0]++
									continue
								}
								reply = reply[i:]
							}
							calls, err := splitCalls(format, reply)
							require.NoError(t, err, "%q", s)
							require.NoError(t, checkCalls(t, validators, calls), "%q", s)
							for _, c := range calls {
								assert.True(t, len(offered) > 1 || c.name == offered[0].Name, c.name)
							}
							if !parallel || format == JSONCalls {
								require.Len(t, calls, 1, "%q", s)
							}
							counts[len(calls)]++
						}
						assert.Positive(t, counts[1], "replies of one call")
						if parallel && format == HermesCalls {
							assert.Positive(t, counts[2]+counts[3]+counts[4], "replies of several calls")
						}
						t.Logf("replies by number of calls: %v", counts)
					})
				}
			}
		}
	}
}

// walkFrom is walkJSON's sentence that begins with prefix (nil if the grammar refuses it).
func walkFrom(g *Grammar, prefix string, rng *rand.Rand, limit int) []byte {
	m := g.NewMatcher(nil)
	if m.AcceptBytes([]byte(prefix)) != nil {
		return nil
	}
	out := []byte(prefix)
	for len(out) < limit {
		if m.Complete() && (m.Done() || rng.IntN(2) == 0) {
			return out
		}
		var all, pref []byte
		for b := range 256 {
			if m.step(m.cur, byte(b)) != 0 {
				all = append(all, byte(b))
				if strings.IndexByte(structural, byte(b)) >= 0 {
					pref = append(pref, byte(b))
				}
			}
		}
		if len(all) == 0 {
			return nil
		}
		next := all
		if len(pref) > 0 && rng.IntN(2) == 0 {
			next = pref
		}
		b := next[rng.IntN(len(next))]
		if m.AcceptBytes([]byte{b}) != nil {
			return nil
		}
		out = append(out, b)
	}
	return nil
}

// TestToolCallsAcceptAndReject checks the grammars against replies written by hand.
func TestToolCallsAcceptAndReject(t *testing.T) {
	fns := []Function{
		{Name: "get_weather", Parameters: []byte(`{"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}`)},
		{Name: "now"},
	}
	call := func(name, args string) string {
		return HermesCallOpen + "\n{\"name\": \"" + name + "\", \"arguments\": " + args + "}\n" + HermesCallClose
	}
	weather := call("get_weather", `{"city": "Paris", "unit": "c"}`)
	for _, c := range []struct {
		o       ToolCallOptions
		text    string
		matches bool
	}{
		{ToolCallOptions{Functions: fns}, weather, true},
		{ToolCallOptions{Functions: fns}, call("now", `{}`), true},
		{ToolCallOptions{Functions: fns}, call("get_weather", `{"unit": "c"}`), false}, // city is required
		{ToolCallOptions{Functions: fns}, call("get_weather", `{"city": 3}`), false},
		{ToolCallOptions{Functions: fns}, call("now", `{"x": 1}`), false},
		{ToolCallOptions{Functions: fns}, call("later", `{}`), false},
		{ToolCallOptions{Functions: fns}, "Sure. " + weather, false},       // required: calls only
		{ToolCallOptions{Functions: fns}, weather + "\n" + weather, false}, // one call
		{ToolCallOptions{Functions: fns, Parallel: true}, weather + "\n" + call("now", "{}"), true},
		{ToolCallOptions{Functions: fns[1:]}, weather, false}, // a named function: that one only
		{ToolCallOptions{Functions: fns, Optional: true}, "", true},
		{ToolCallOptions{Functions: fns, Optional: true}, "It is <b>sunny</b> <tool_cal", true},
		{ToolCallOptions{Functions: fns, Optional: true}, "Let me look.\n" + weather, true},
		{ToolCallOptions{Functions: fns, Optional: true}, "<<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>", true},
		{ToolCallOptions{Functions: fns, Optional: true}, "Look: <tool_call> is a tag", false}, // once a call starts it must be one
		{ToolCallOptions{Functions: fns, Optional: true}, weather + " and more", false},
		{ToolCallOptions{Format: JSONCalls, Functions: fns}, `{"name": "get_weather", "parameters": {"city": "Oslo"}}`, true},
		{ToolCallOptions{Format: JSONCalls, Functions: fns}, `{"name": "get_weather", "arguments": {"city": "Oslo"}}`, false},
		{ToolCallOptions{Format: JSONCalls, Functions: fns, Optional: true}, `It is {"name": 1}`, true},
		{ToolCallOptions{Format: JSONCalls, Functions: fns, Optional: true}, `{"name": 1}`, false},
		{ToolCallOptions{Format: JSONCalls, Functions: fns, Optional: true}, `{"name": "now", "parameters": {}}`, true},
	} {
		g, err := CompileToolCalls(c.o)
		require.NoError(t, err)
		m := g.NewMatcher(nil)
		ok := m.AcceptBytes([]byte(c.text)) == nil && m.Complete()
		assert.Equal(t, c.matches, ok, "%+v: %q", c.o, c.text)
	}
}

// TestToolCallsRefused: a schema the compiler cannot handle is an error naming the function and
// the keyword; no functions is an error.
func TestToolCallsRefused(t *testing.T) {
	_, err := CompileToolCalls(ToolCallOptions{Functions: []Function{{Name: "f", Parameters: []byte(`{"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}`)}}})
	var ue *UnsupportedError
	require.True(t, errors.As(err, &ue), "%v", err)
	assert.Equal(t, "pattern", ue.Keyword)
	assert.Contains(t, err.Error(), `function "f"`)
	_, err = CompileToolCalls(ToolCallOptions{Functions: []Function{{Name: "f", Parameters: []byte(`{"type": "object"`)}}})
	assert.Error(t, err)
	_, err = CompileToolCalls(ToolCallOptions{})
	assert.Error(t, err)
	// Two functions whose schemas define the same names keep them apart.
	g, err := CompileToolCalls(ToolCallOptions{Format: JSONCalls, Functions: []Function{
		{Name: "a", Parameters: []byte(`{"$defs": {"x": {"type": "integer"}}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}, "required": ["v"], "additionalProperties": false}`)},
		{Name: "b", Parameters: []byte(`{"$defs": {"x": {"type": "boolean"}}, "type": "object", "properties": {"v": {"$ref": "#/$defs/x"}}, "required": ["v"], "additionalProperties": false}`)},
	}})
	require.NoError(t, err)
	for text, want := range map[string]bool{
		`{"name": "a", "parameters": {"v": 3}}`:    true,
		`{"name": "a", "parameters": {"v": true}}`: false,
		`{"name": "b", "parameters": {"v": true}}`: true,
		`{"name": "b", "parameters": {"v": 3}}`:    false,
	} {
		m := g.NewMatcher(nil)
		assert.Equal(t, want, m.AcceptBytes([]byte(text)) == nil && m.Complete(), text)
	}
}
