package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testSchemas are schemas with nested objects, arrays, enums, numbers, required and optional
// fields, references and alternatives.
var testSchemas = map[string]string{
	"person": `{
		"type": "object",
		"properties": {
			"name": {"type": "string", "minLength": 1, "maxLength": 12},
			"age": {"type": "integer", "minimum": 0, "maximum": 150},
			"email": {"type": "string", "maxLength": 10},
			"tags": {"type": "array", "items": {"enum": ["a", "b", "c d", 7, null]}, "maxItems": 3},
			"address": {
				"type": "object",
				"properties": {"street": {"type": "string", "maxLength": 8}, "city": {"type": "string", "maxLength": 8}, "zip": {"type": "integer", "exclusiveMinimum": 999, "exclusiveMaximum": 100000}},
				"required": ["city", "street"],
				"additionalProperties": false
			},
			"active": {"type": "boolean"}
		},
		"required": ["name", "age", "active"],
		"additionalProperties": false
	}`,
	"shapes": `{
		"type": "object",
		"properties": {
			"shape": {"oneOf": [
				{"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}}, "required": ["kind", "r"], "additionalProperties": false},
				{"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer"}, "h": {"type": "integer", "minimum": -3, "maximum": 3}}, "required": ["kind", "w", "h"], "additionalProperties": false}
			]},
			"label": {"type": ["string", "null"], "maxLength": 5}
		},
		"required": ["shape", "label"]
	}`,
	"numbers": `{"type": "array", "items": {"type": "integer", "minimum": -50, "maximum": 1234}, "minItems": 2, "maxItems": 5}`,
	"tree": `{
		"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0, "maximum": 9}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"], "additionalProperties": false}},
		"$ref": "#/$defs/node"
	}`,
	"extras":  `{"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "string", "maxLength": 3}}, "additionalProperties": {"type": "boolean"}}`,
	"formats": `{"type": "object", "properties": {"d": {"type": "string", "format": "date"}, "t": {"type": "string", "format": "time"}, "dt": {"type": "string", "format": "date-time"}, "id": {"type": "string", "format": "uuid"}}, "required": ["d", "t", "dt", "id"], "additionalProperties": false}`,
	"tuple":   `{"type": "array", "prefixItems": [{"type": "string", "maxLength": 4}, {"type": "number", "exclusiveMinimum": 0}, {"type": "boolean"}], "items": false, "minItems": 2}`,
	"anyOf":   `{"anyOf": [{"type": "string", "minLength": 2, "maxLength": 3}, {"type": "null"}, {"type": "array", "items": {"type": "number"}, "maxItems": 2}]}`,
	"any":     `{"type": "object", "properties": {"x": {}, "y": true}, "required": ["x", "y"], "additionalProperties": false}`,
	"definitions": `{"definitions": {"p": {"type": "object", "properties": {"q": {"enum": ["x", "y"]}}, "required": ["q"], "additionalProperties": false}},
		"type": "object", "properties": {"one": {"$ref": "#/definitions/p"}, "two": {"allOf": [{"$ref": "#/definitions/p"}], "description": "the second"}},
		"required": ["one", "two"], "additionalProperties": false}`,
}

// compileValidator compiles a schema with a JSON-Schema validator (draft 2020-12, formats
// asserted).
func compileValidator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	require.NoError(t, c.AddResource("schema.json", doc))
	s, err := c.Compile("schema.json")
	require.NoError(t, err)
	return s
}

// validate parses text with encoding/json (strictly: one value) and with the validator.
func validate(t testing.TB, s *jsonschema.Schema, text []byte) error {
	var v any
	d := json.NewDecoder(bytes.NewReader(text))
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("encoding/json: %w", err)
	}
	if d.More() {
		return errors.New("encoding/json: more than one value")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(text))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// structural are the bytes a biased walk prefers, so that strings and numbers end soon.
const structural = `"{}[],:0123456789tfn-.eET `

// walkJSON draws a sentence of g byte by byte, half the time from the structural bytes allowed
// when there are any, ending where it may with probability 1/2; nil past limit bytes.
func walkJSON(g *Grammar, rng *rand.Rand, limit int) []byte { return walkFrom(g, "", rng, limit) }

// TestSchemaSentencesValidate draws sentences from each schema's grammar, byte by byte at
// random, and requires every one to parse with encoding/json and validate with a JSON-Schema
// validator.
func TestSchemaSentencesValidate(t *testing.T) {
	for name, schema := range testSchemas {
		t.Run(name, func(t *testing.T) {
			text, err := FromJSONSchema([]byte(schema))
			require.NoError(t, err)
			g, err := Parse(text)
			require.NoError(t, err, "%s", text)
			v := compileValidator(t, schema)
			rng := rand.New(rand.NewPCG(7, uint64(len(name))))
			valid, cut := 0, 0
			for range 300 {
				s := walkJSON(g, rng, 3000)
				if s == nil {
					cut++
					continue
				}
				require.NoError(t, validate(t, v, s), "%s\ngrammar:\n%s", s, text)
				valid++
			}
			assert.Greater(t, valid, 200)
			t.Logf("%s: %d sentences valid, %d walks cut at 3000 bytes", name, valid, cut)
		})
	}
}

// TestSchemaAcceptsAndRejects checks the grammars against JSON texts written by hand: valid ones
// (in the schema's property order) must match, invalid ones must not, and the validator must
// say the same.
func TestSchemaAcceptsAndRejects(t *testing.T) {
	cases := []struct {
		schema string
		ok     []string
		bad    []string
	}{
		{testSchemas["person"],
			[]string{`{"name": "Ada", "age": 36, "active": true}`,
				"{\n  \"name\": \"Ada\",\n  \"age\": 150,\n  \"email\": \"a@b\",\n  \"tags\": [\"a\", 7, null],\n  \"address\": {\"street\": \"x\", \"city\": \"y\", \"zip\": 12345},\n  \"active\": false\n}",
				`{"name":"\u00e9\n","age":0,"tags":[],"active":true}`},
			[]string{`{"name": "Ada", "age": 36}`, `{"name": "", "age": 36, "active": true}`, `{"name": "Ada", "age": 151, "active": true}`,
				`{"name": "Ada", "age": 1, "active": true, "x": 1}`, `{"name": "Ada", "age": 1, "tags": ["d"], "active": true}`,
				`{"name": "Ada", "age": 1, "address": {"street": "x", "city": "y", "zip": 999}, "active": true}`, `{"name": "Ada", "age": -1, "active": true}`}},
		{testSchemas["numbers"], []string{`[-50, 1234]`, `[0,1,2,3,4]`}, []string{`[1]`, `[1,2,3,4,5,6]`, `[1235, 0]`, `[-51, 0]`, `[01, 2]`}},
		{testSchemas["extras"], []string{`{"a": 1, "ab": "xyz", "b": true, "abc": false}`, `{"zz": true}`, `{}`}, []string{`{"a": 1, "a": true}`, `{"a": 1, "ab": "x", "ab": false}`}},
		{testSchemas["tuple"], []string{`["ab", 0.5]`, `["", 3, true]`}, []string{`["ab"]`, `["ab", 0]`, `["ab", 1, true, 1]`}},
		{testSchemas["formats"], []string{`{"d": "2024-02-28", "t": "23:59:59Z", "dt": "1999-12-31T00:00:00.123+05:30", "id": "123e4567-e89b-12d3-a456-426614174000"}`},
			[]string{`{"d": "2024-02-30", "t": "23:59:59Z", "dt": "1999-12-31T00:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000"}`,
				`{"d": "2024-02-28", "t": "24:00:00Z", "dt": "1999-12-31T00:00:00Z", "id": "123e4567-e89b-12d3-a456-426614174000"}`}},
		{`{"type": "string", "enum": ["a\"b", "c\\d", "é"]}`, []string{`"a\"b"`, `"c\\d"`, `"é"`}, []string{`"ab"`, `"e"`}},
		{`{"const": {"k": [1, "x", null]}}`, []string{`{"k":[1,"x",null]}`}, []string{`{"k": [1, "x", null]}`}},
		{`{"type": ["integer", "null"], "enum": [1, 2.0, 2.5, "3", null]}`, []string{`1`, `2.0`, `null`}, []string{`2.5`, `"3"`}},
	}
	for _, c := range cases {
		text, err := FromJSONSchema([]byte(c.schema))
		require.NoError(t, err)
		g := MustParse(text)
		v := compileValidator(t, c.schema)
		for _, s := range c.ok {
			assert.NoError(t, validate(t, v, []byte(s)), "the validator on %s", s)
			assert.True(t, accepts(g, s), "%s\n%s", s, text)
			assert.Equal(t, refAccepts(g, s), accepts(g, s), s)
		}
		for _, s := range c.bad {
			assert.False(t, accepts(g, s), "%s\n%s", s, text)
			if !strings.Contains(s, `{"k": [`) && !strings.Contains(s, "01") && !strings.Contains(s, `"a": 1, "a"`) && !strings.Contains(s, `"ab": "x", "ab"`) {
				assert.Error(t, validate(t, v, []byte(s)), "the validator on %s", s)
			}
		}
	}
}

// TestIntegerRanges: an integer schema's grammar matches exactly the integers within its
// bounds, for random bounds of every size.
func TestIntegerRanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for range 200 {
		mag := func() int64 { return rng.Int64N(int64(math.Pow10(1 + rng.IntN(6)))) }
		lo, hi := mag()-mag(), mag()
		if lo > hi {
			lo, hi = hi, lo
		}
		schema := fmt.Sprintf(`{"type": "integer", "minimum": %d, "maximum": %d}`, lo, hi)
		text, err := FromJSONSchema([]byte(schema))
		require.NoError(t, err)
		g := MustParse(text)
		probe := []int64{lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, -1, 1}
		for range 30 {
			probe = append(probe, lo+rng.Int64N(hi-lo+1), rng.Int64N(2*hi+2)-hi-1)
		}
		for _, x := range probe {
			require.Equal(t, x >= lo && x <= hi, accepts(g, strconv.FormatInt(x, 10)), "%d in [%d, %d]\n%s", x, lo, hi, text)
		}
		assert.False(t, accepts(g, "-0") && lo > 0)
	}
}

// TestUnsupportedKeywords: what the compiler cannot do is an UnsupportedError naming the keyword.
func TestUnsupportedKeywords(t *testing.T) {
	for _, c := range []struct{ schema, keyword, path string }{
		{`{"type": "string", "pattern": "^a+$"}`, "pattern", "/pattern"},
		{`{"type": "object", "properties": {"n": {"type": "number", "multipleOf": 2}}}`, "multipleOf", "/properties/n/multipleOf"},
		{`{"type": "array", "uniqueItems": true}`, "uniqueItems", "/uniqueItems"},
		{`{"type": "object", "minProperties": 1}`, "minProperties", "/minProperties"},
		{`{"type": "object", "patternProperties": {"^x": {}}}`, "patternProperties", "/patternProperties"},
		{`{"not": {"type": "string"}}`, "not", "/not"},
		{`{"allOf": [{"type": "object"}, {"required": ["a"]}]}`, "allOf", "/allOf"},
		{`{"$ref": "https://example.com/s.json"}`, "$ref", "/$ref"},
		{`{"$ref": "#/$defs/missing"}`, "$ref", "/$ref"},
		{`{"type": "string", "format": "email"}`, "format", "/format"},
		{`{"type": "number", "maximum": 3}`, "maximum", "/maximum"},
		{`{"type": "strung"}`, "type", "/type"},
		{`{"type": "integer", "maxLength": 3}`, "maxLength", "/maxLength"},
		{`{"type": "object", "anyOf": [{"required": ["a"]}]}`, "type", "/type"},
		{`{"type": "object", "properties": {"a": false}, "required": ["a"]}`, "false", "/properties/a"},
		{`{"type": "string", "minLength": 3, "maxLength": 2}`, "maxLength", "/maxLength"},
		{`{"type": "integer", "minimum": 3, "maximum": 2}`, "maximum", ""},
		{`{"type": "array", "minItems": 4, "maxItems": 2}`, "maxItems", "/maxItems"},
		{`{"nullable": true}`, "nullable", "/nullable"},
		{`{"type": "string", "enum": ["a", "bb"], "maxLength": 1}`, "maxLength", "/maxLength"},
		{`{"type": "integer", "enum": [1.5, "2"]}`, "enum", "/enum"},
	} {
		_, err := FromJSONSchema([]byte(c.schema))
		var ue *UnsupportedError
		if assert.ErrorAs(t, err, &ue, c.schema) {
			assert.Equal(t, c.keyword, ue.Keyword, c.schema)
			assert.Equal(t, c.path, ue.Path, c.schema)
			assert.Contains(t, err.Error(), strconv.Quote(c.keyword))
		}
	}
	for _, bad := range []string{``, `{`, `{"a": 1, "a": 2}`, `{} {}`, `[1]`} {
		_, err := FromJSONSchema([]byte(bad))
		assert.Error(t, err, bad)
	}
}

// TestSchemaTokens generates with random logits over llama.cpp's starcoder vocabulary (49152
// tokens, SmolLM2's size and kind) and its SentencePiece llama one (byte tokens "<0xNN>",
// spaces as "▁"): each step masks the logits, draws from their softmax and accepts the token,
// until the end token or 400 tokens. Every text that ended must parse and validate; the test
// reports how many ended.
func TestSchemaTokens(t *testing.T) {
	for _, file := range []string{"ggml-vocab-starcoder.gguf", "ggml-vocab-llama-spm.gguf"} {
		t.Run(file, func(t *testing.T) { schemaTokens(t, file) })
	}
}

func schemaTokens(t *testing.T, file string) {
	tok, v := vocabFile(t, file)
	for _, name := range []string{"person", "shapes", "numbers", "tree", "tuple", "formats"} {
		schema := testSchemas[name]
		text, err := FromJSONSchema([]byte(schema))
		require.NoError(t, err)
		g := MustParse(text)
		val := compileValidator(t, schema)
		ended, tokens, walks := 0, 0, 0
		const seeds = 12
		for seed := range uint64(seeds) {
			rng := rand.New(rand.NewPCG(seed, 11))
			m := g.NewMatcher(v)
			logits := make([]float32, v.Size())
			var out []byte
			for range 400 {
				for i := range logits {
					logits[i] = float32(rng.NormFloat64() * 3)
				}
				require.Positive(t, m.Mask(logits), "%s after %q: no token allowed", name, out)
				id := drawSoftmax(rng, logits)
				require.NoError(t, m.Accept(id))
				tokens++
				if id == tok.EOS() {
					require.True(t, m.Complete())
					ended++
					require.NoError(t, validate(t, val, out), "%s", out)
					if seed == 0 {
						t.Logf("%s, seed 0: %q", name, out)
					}
					break
				}
				out = append(out, v.piece(id)...)
			}
			walks += m.masks
		}
		t.Logf("%s: %d of %d generations ended (%d tokens in all; %d masks walked, the rest cached)", name, ended, seeds, tokens, walks)
	}
}

// drawSoftmax draws an index from the softmax of logits (-Inf: never).
func drawSoftmax(rng *rand.Rand, logits []float32) int32 {
	top := float32(math.Inf(-1))
	for _, l := range logits {
		top = max(top, l)
	}
	sum := 0.0
	for _, l := range logits {
		sum += math.Exp(float64(l - top))
	}
	u := rng.Float64() * sum
	last := int32(-1)
	for i, l := range logits {
		if math.IsInf(float64(l), -1) {
			continue
		}
		last = int32(i)
		if u -= math.Exp(float64(l - top)); u < 0 {
			break
		}
	}
	return last
}
