package grammar

import (
	"strings"
	"testing"
)

// FuzzParse: no GBNF text makes Parse panic, and a grammar that parses can be matched.
func FuzzParse(f *testing.F) {
	for _, g := range testGrammars {
		f.Add(g, "1+2*(3-4)")
	}
	f.Add(`root ::= "a"{2,5} [^\x00-\U0010FFFF]? .`, "aaa!")
	f.Add(`root ::= ("a"{1000}){1000}`, "a")
	f.Add(`root ::= x x ::= "[" x* "]"`, "[[]]")
	f.Fuzz(func(t *testing.T, text, input string) {
		g, err := Parse(text)
		if err != nil {
			return
		}
		m := g.NewMatcher(NewVocab([][]byte{[]byte(input), []byte("a"), nil}, 2))
		m.Mask(make([]float32, 3))
		for i := range len(input) {
			if m.AcceptBytes([]byte{input[i]}) != nil {
				break
			}
			m.Mask(make([]float32, 3))
		}
	})
}

// FuzzFromJSONSchema: no schema makes the compiler panic, and what it compiles parses (or is
// left-recursive: references that loop with no value between them, which FromJSONSchema refuses).
func FuzzFromJSONSchema(f *testing.F) {
	for _, s := range testSchemas {
		f.Add(s)
	}
	f.Add(`{"type": "integer", "minimum": -99999, "exclusiveMaximum": 12.5}`)
	f.Add(`{"properties": {"a\"b": {}, "": {"type": "null"}}, "additionalProperties": {"enum": [[1, {"x": null}]]}}`)
	f.Add(`{"$ref": "#", "title": "loop"}`)
	f.Fuzz(func(t *testing.T, schema string) {
		text, err := schemaGBNF([]byte(schema))
		if err != nil {
			return
		}
		if _, err := Parse(text); err != nil && !strings.Contains(err.Error(), "left-recursive") {
			t.Fatalf("the grammar of %s does not parse: %v\n%s", schema, err, text)
		}
	})
}
