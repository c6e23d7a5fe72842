package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// UnsupportedError is a JSON Schema that FromJSONSchema cannot turn into a grammar: a keyword
// it does not implement (or one whose value it does not), at a place in the schema.
type UnsupportedError struct {
	// Keyword is the schema keyword, "pattern" say.
	Keyword string
	// Path is where it is, as a JSON pointer into the schema ("" for the top).
	Path string
	// Reason says what is wrong with it, when more than "not supported".
	Reason string
}

func (e *UnsupportedError) Error() string {
	at := e.Path
	if at == "" {
		at = "the top"
	}
	if e.Reason != "" {
		return fmt.Sprintf("json schema: %q at %s: %s", e.Keyword, at, e.Reason)
	}
	return fmt.Sprintf("json schema: the keyword %q (at %s) is not supported", e.Keyword, at)
}

// FromJSONSchema compiles a JSON Schema into GBNF text whose sentences are the JSON texts that
// validate against it. It covers:
//
//   - type (a name or a list of names): object, array, string, number, integer, boolean, null;
//   - objects: properties (written in the schema's order), required, additionalProperties
//     (false or absent: only the properties named; true or a schema: others too, with keys that
//     are none of those names);
//   - arrays: items, prefixItems, minItems, maxItems;
//   - strings: minLength, maxLength, format date, time, date-time and uuid;
//   - integers: minimum, maximum, exclusiveMinimum, exclusiveMaximum;
//   - numbers: minimum 0 or more and exclusiveMinimum 0 (no sign), no other bounds;
//   - enum and const (any JSON values), anyOf, oneOf (as anyOf: a value of one of them; that
//     no two match is the schema's to ensure, by a const discriminator say), allOf of one schema;
//   - $ref to "#", "#/$defs/NAME" and "#/definitions/NAME", recursion included;
//   - annotations, ignored: title, description, default, examples, $comment, $schema, $id,
//     deprecated, readOnly, writeOnly.
//
// Anything else is an *UnsupportedError that names the keyword and where it is. The JSON the
// grammar allows keeps the limits of JSONObject's (whitespace, number lengths).
func FromJSONSchema(schema []byte) (string, error) {
	text, _, err := compileSchema(schema)
	return text, err
}

// CompileJSONSchema is FromJSONSchema's grammar, compiled (Parse).
func CompileJSONSchema(schema []byte) (*Grammar, error) {
	_, g, err := compileSchema(schema)
	return g, err
}

// compileSchema is the GBNF text of a schema and its grammar. A schema whose references loop
// without a value between them ({"$ref": "#"}) gives a left-recursive grammar, which Parse
// refuses.
func compileSchema(schema []byte) (string, *Grammar, error) {
	text, err := schemaGBNF(schema)
	if err != nil {
		return "", nil, err
	}
	g, err := Parse(text)
	if err != nil {
		return "", nil, fmt.Errorf("json schema: its references loop without a value between them: %w", err)
	}
	return text, g, nil
}

// schemaGBNF is the GBNF text of a schema.
func schemaGBNF(schema []byte) (string, error) {
	c := &schemaCompiler{rules: map[string]string{}, bodies: map[string]string{}}
	name, err := c.compileRoot(schema, "root")
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "root ::= %s\n", name)
	for _, n := range c.order {
		fmt.Fprintf(&sb, "%s ::= %s\n", n, c.rules[n])
	}
	sb.WriteString(jsonCommon)
	return sb.String(), nil
}

// compileRoot compiles one schema document, its references resolved within it, into rules
// beside those c holds already (ToolCallsGBNF compiles several) and returns its rule's name.
func (c *schemaCompiler) compileRoot(schema []byte, hint string) (string, error) {
	root, err := decodeOrdered(schema)
	if err != nil {
		return "", fmt.Errorf("json schema: %w", err)
	}
	c.root, c.refs = root, map[string]string{}
	return c.schema(root, "", hint)
}

// object is a JSON object with its keys in the order they came.
type object struct {
	keys []string
	vals map[string]any
}

func (o *object) get(k string) (any, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// decodeOrdered reads one JSON value: objects as *object, arrays as []any, numbers as
// json.Number.
func decodeOrdered(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &object{vals: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; dup {
				return nil, fmt.Errorf("the key %q twice in one object", k)
			}
			o.keys = append(o.keys, k)
			o.vals[k] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		a := []any{}
		for d.More() {
			v, err := decodeValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return t, nil
}

// schemaCompiler turns schemas into rules, each named once.
type schemaCompiler struct {
	root   any
	rules  map[string]string // name → body
	order  []string          // the names in the order they were made
	bodies map[string]string // body → the name made for it, to share equal rules
	refs   map[string]string // $ref → its rule's name
}

// annotations are keywords that constrain nothing.
var annotations = []string{"title", "description", "default", "examples", "$comment", "$schema", "$id", "deprecated", "readOnly", "writeOnly", "$defs", "definitions"}

// keywordsOf are the keywords each type understands besides annotations, type, enum and const.
var keywordsOf = map[string][]string{
	"object":  {"properties", "required", "additionalProperties"},
	"array":   {"items", "prefixItems", "minItems", "maxItems"},
	"string":  {"minLength", "maxLength", "format"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
	"number":  {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"},
	"boolean": nil,
	"null":    nil,
}

// typeOrder is the order in which a schema without type lists the types its keywords imply.
var typeOrder = []string{"object", "array", "string", "integer", "number", "boolean", "null"}

// ruleName makes a rule name from a hint (a property name, say): GBNF's characters only.
func (c *schemaCompiler) ruleName(hint string) string {
	var sb strings.Builder
	for _, r := range hint {
		if r < 128 && isNameByte(byte(r)) {
			sb.WriteRune(r)
		} else {
			sb.WriteByte('-')
		}
	}
	base := sb.String()
	if base == "" {
		base = "r"
	}
	name := base
	for i := 1; c.rules[name] != "" || name == "root" || slices.Contains(reserved, name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// reserved are the names jsonCommon defines.
var reserved = []string{"ws", "string", "char", "hex4", "hex", "number", "integer", "boolean", "null", "value", "object", "member", "array"}

// define names body as a rule (the same name for the same body) and returns the name.
func (c *schemaCompiler) define(hint, body string) string {
	if n, ok := c.bodies[body]; ok {
		return n
	}
	name := c.ruleName(hint)
	c.rules[name] = body
	c.order = append(c.order, name)
	c.bodies[body] = name
	return name
}

// schema compiles the schema s at path (a JSON pointer) into a rule and returns its name.
func (c *schemaCompiler) schema(s any, path, hint string) (string, error) {
	switch s := s.(type) {
	case bool:
		if s {
			return "value", nil
		}
		return "", &UnsupportedError{Keyword: "false", Path: path, Reason: "the schema false allows no value"}
	case *object:
		return c.object(s, path, hint)
	}
	return "", &UnsupportedError{Keyword: "schema", Path: path, Reason: "a schema is an object or a boolean"}
}

func (c *schemaCompiler) object(s *object, path, hint string) (string, error) {
	assertions := slices.DeleteFunc(slices.Clone(s.keys), func(k string) bool { return slices.Contains(annotations, k) })
	// Keywords that stand alone.
	for _, k := range []string{"$ref", "anyOf", "oneOf", "allOf", "enum", "const"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		values := k == "enum" || k == "const"
		for _, other := range assertions {
			if other != k && !(values && other == "type") {
				return "", &UnsupportedError{Keyword: other, Path: path + "/" + other, Reason: fmt.Sprintf("beside %q: only annotations may stand beside it", k)}
			}
		}
		switch k {
		case "$ref":
			return c.ref(v, path+"/$ref")
		case "anyOf", "oneOf", "allOf":
			subs, ok := v.([]any)
			if !ok || len(subs) == 0 {
				return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "want a non-empty array of schemas"}
			}
			if k == "allOf" {
				if len(subs) != 1 {
					return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "allOf of more than one schema is not supported"}
				}
				return c.schema(subs[0], path+"/allOf/0", hint)
			}
			var alts []string
			for i, sub := range subs {
				n, err := c.schema(sub, fmt.Sprintf("%s/%s/%d", path, k, i), hint)
				if err != nil {
					return "", err
				}
				alts = append(alts, n)
			}
			return c.define(hint, strings.Join(alts, " | ")), nil
		}
		// enum and const: their values of the type beside them (any without one).
		vals := []any{v}
		if k == "enum" {
			var ok bool
			if vals, ok = v.([]any); !ok || len(vals) == 0 {
				return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "want a non-empty array"}
			}
		}
		types := typeOrder
		if _, ok := s.get("type"); ok {
			var err error
			if types, err = c.types(s, path); err != nil {
				return "", err
			}
		}
		var alts []string
		for _, x := range vals {
			if !slices.ContainsFunc(types, func(t string) bool { return isOfType(x, t) }) {
				continue
			}
			lit, err := literal(x)
			if err != nil {
				return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: err.Error()}
			}
			alts = append(alts, lit)
		}
		if len(alts) == 0 {
			return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "no value of it is of the type beside it"}
		}
		return c.define(hint, strings.Join(alts, " | ")), nil
	}
	types, err := c.types(s, path)
	if err != nil {
		return "", err
	}
	// Every keyword must belong to one of the types.
	for _, k := range assertions {
		if k == "type" {
			continue
		}
		known := false
		for _, t := range types {
			known = known || slices.Contains(keywordsOf[t], k)
		}
		if !known {
			for _, t := range typeOrder {
				if slices.Contains(keywordsOf[t], k) {
					return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: fmt.Sprintf("a keyword of %s, not of %s", t, strings.Join(types, " or "))}
				}
			}
			return "", &UnsupportedError{Keyword: k, Path: path + "/" + k}
		}
	}
	var alts []string
	for _, t := range types {
		var body string
		var err error
		switch t {
		case "object":
			body, err = c.objectType(s, path, hint)
		case "array":
			body, err = c.arrayType(s, path, hint)
		case "string":
			body, err = c.stringType(s, path)
		case "integer":
			body, err = c.integerType(s, path)
		case "number":
			body, err = c.numberType(s, path)
		default: // boolean, null
			body = t
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, body)
	}
	if len(alts) == 1 && slices.Contains(reserved, alts[0]) {
		return alts[0], nil
	}
	return c.define(hint, strings.Join(alts, " | ")), nil
}

// isOfType reports whether a decoded JSON value is of the JSON Schema type t (an integer is a
// number too; 1.0 is an integer).
func isOfType(v any, t string) bool {
	switch v := v.(type) {
	case *object:
		return t == "object"
	case []any:
		return t == "array"
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case json.Number:
		if t == "number" {
			return true
		}
		f, err := v.Float64()
		return t == "integer" && err == nil && f == math.Trunc(f) && !math.IsInf(f, 0)
	}
	return false
}

// types are the types a schema allows: its "type", or those its keywords imply, or every one.
func (c *schemaCompiler) types(s *object, path string) ([]string, error) {
	t, ok := s.get("type")
	if !ok {
		var implied []string
		for _, name := range typeOrder {
			for _, k := range keywordsOf[name] {
				if _, ok := s.get(k); ok && !slices.Contains(implied, name) {
					implied = append(implied, name)
				}
			}
		}
		if slices.Contains(implied, "integer") && slices.Contains(implied, "number") {
			implied = slices.DeleteFunc(implied, func(n string) bool { return n == "integer" })
		}
		if len(implied) == 0 {
			return typeOrder, nil
		}
		return implied, nil
	}
	var names []string
	switch t := t.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, x := range t {
			n, ok := x.(string)
			if !ok {
				return nil, &UnsupportedError{Keyword: "type", Path: path + "/type", Reason: "want a type name or an array of them"}
			}
			names = append(names, n)
		}
	default:
		return nil, &UnsupportedError{Keyword: "type", Path: path + "/type", Reason: "want a type name or an array of them"}
	}
	for _, n := range names {
		if _, ok := keywordsOf[n]; !ok {
			return nil, &UnsupportedError{Keyword: "type", Path: path + "/type", Reason: fmt.Sprintf("unknown type %q", n)}
		}
	}
	if len(names) == 0 {
		return nil, &UnsupportedError{Keyword: "type", Path: path + "/type", Reason: "an empty list of types allows no value"}
	}
	return names, nil
}

// ref compiles a $ref to the top or to a definition.
func (c *schemaCompiler) ref(v any, path string) (string, error) {
	r, ok := v.(string)
	if !ok {
		return "", &UnsupportedError{Keyword: "$ref", Path: path, Reason: "want a string"}
	}
	if n, ok := c.refs[r]; ok {
		return n, nil
	}
	var target any
	hint := "root"
	switch {
	case r == "#":
		target = c.root
	case strings.HasPrefix(r, "#/$defs/") || strings.HasPrefix(r, "#/definitions/"):
		section, name, _ := strings.Cut(r[2:], "/")
		name = strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
		if o, ok := c.root.(*object); ok {
			if defs, ok := o.vals[section].(*object); ok {
				target, _ = defs.get(name)
			}
		}
		if target == nil {
			return "", &UnsupportedError{Keyword: "$ref", Path: path, Reason: fmt.Sprintf("%q names no definition of this schema", r)}
		}
		hint = name
	default:
		return "", &UnsupportedError{Keyword: "$ref", Path: path, Reason: fmt.Sprintf("%q: only references into this schema (#, #/$defs/NAME, #/definitions/NAME) are supported", r)}
	}
	// Name the rule before compiling it, so that a recursive reference finds it.
	name := c.ruleName(hint)
	c.rules[name] = "(being compiled)"
	c.order = append(c.order, name)
	c.refs[r] = name
	body, err := c.schema(target, strings.TrimPrefix(r, "#"), hint+"-body")
	if err != nil {
		return "", err
	}
	c.rules[name] = body
	return name, nil
}

// literal is the GBNF literal of a JSON value, written compactly.
func literal(v any) (string, error) {
	var sb strings.Builder
	if err := writeJSON(&sb, v); err != nil {
		return "", err
	}
	return gbnfQuote(sb.String()), nil
}

// writeJSON writes a decodeOrdered value as compact JSON.
func writeJSON(sb *strings.Builder, v any) error {
	switch v := v.(type) {
	case *object:
		sb.WriteByte('{')
		for i, k := range v.keys {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, k)
			sb.WriteByte(':')
			if err := writeJSON(sb, v.vals[k]); err != nil {
				return err
			}
		}
		sb.WriteByte('}')
	case []any:
		sb.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				sb.WriteByte(',')
			}
			if err := writeJSON(sb, x); err != nil {
				return err
			}
		}
		sb.WriteByte(']')
	case string:
		writeJSONString(sb, v)
	case json.Number:
		sb.WriteString(v.String())
	case bool:
		sb.WriteString(strconv.FormatBool(v))
	case nil:
		sb.WriteString("null")
	default:
		return fmt.Errorf("an unexpected value %v", v)
	}
	return nil
}

func writeJSONString(sb *strings.Builder, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	sb.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// gbnfQuote writes s as a GBNF string literal.
func gbnfQuote(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, "\\x%02x", r)
		default:
			sb.WriteRune(r)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// objectType is the body of an object with the schema's properties, in its order: each
// required one, each optional one or not, commas between, then others where
// additionalProperties allows them.
func (c *schemaCompiler) objectType(s *object, path, hint string) (string, error) {
	props := &object{vals: map[string]any{}}
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(*object); !ok {
			return "", &UnsupportedError{Keyword: "properties", Path: path + "/properties", Reason: "want an object"}
		}
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return "", &UnsupportedError{Keyword: "required", Path: path + "/required", Reason: "want an array of names"}
		}
		for _, x := range list {
			n, ok := x.(string)
			if !ok {
				return "", &UnsupportedError{Keyword: "required", Path: path + "/required", Reason: "want an array of names"}
			}
			required[n] = true
		}
	}
	names := slices.Clone(props.keys)
	for _, n := range slices.Sorted(maps.Keys(required)) {
		if !slices.Contains(names, n) {
			names = append(names, n) // required but not described: any value
		}
	}
	// additionalProperties: absent or false: none; true or a schema: others, of that schema.
	extra := ""
	if a, ok := s.get("additionalProperties"); ok && a != false {
		valueRule, err := c.schema(a, path+"/additionalProperties", hint+"-additional")
		if err != nil {
			return "", err
		}
		key := c.notKeys(names, hint)
		kv := c.define(hint+"-additional-kv", fmt.Sprintf("%s ws \":\" ws %s ws", key, valueRule))
		extra = kv
	}
	// Rules rest-i-first (nothing written yet) and rest-i-more (something written) write the
	// members from the i-th on.
	type pair struct{ first, more string }
	rest := make([]pair, len(names)+1)
	if extra == "" {
		rest[len(names)] = pair{`""`, `""`}
	} else {
		rest[len(names)] = pair{
			c.define(hint+"-extras", fmt.Sprintf(`( %s ( "," ws %s )* )?`, extra, extra)),
			c.define(hint+"-more-extras", fmt.Sprintf(`( "," ws %s )*`, extra)),
		}
	}
	for i := len(names) - 1; i >= 0; i-- {
		n := names[i]
		var sub any = true
		if v, ok := props.get(n); ok {
			sub = v
		}
		valueRule, err := c.schema(sub, path+"/properties/"+escapePointer(n), hint+"-"+n)
		if err != nil {
			return "", err
		}
		var sb strings.Builder
		writeJSONString(&sb, n)
		kv := c.define(hint+"-"+n+"-kv", fmt.Sprintf(`%s ws ":" ws %s ws`, gbnfQuote(sb.String()), valueRule))
		next := rest[i+1]
		if required[n] {
			rest[i] = pair{
				c.define(hint+"-rest", fmt.Sprintf("%s %s", kv, next.more)),
				c.define(hint+"-rest", fmt.Sprintf(`"," ws %s %s`, kv, next.more)),
			}
		} else {
			rest[i] = pair{
				c.define(hint+"-rest", fmt.Sprintf("%s %s | %s", kv, next.more, next.first)),
				c.define(hint+"-rest", fmt.Sprintf(`"," ws %s %s | %s`, kv, next.more, next.more)),
			}
		}
	}
	return fmt.Sprintf(`"{" ws %s "}"`, rest[0].first), nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// notKeys is a rule for a JSON string key that is none of names: plain characters only (no
// escapes, which could spell a name another way), leaving every name's path through a trie of
// the names before it ends.
func (c *schemaCompiler) notKeys(names []string, hint string) string {
	const plain = `[^"\\\x00-\x1f]`
	// A name with a character JSON escapes cannot be spelled without escapes.
	names = slices.DeleteFunc(slices.Clone(names), func(n string) bool {
		return strings.ContainsFunc(n, func(r rune) bool { return r == '"' || r == '\\' || r < 0x20 })
	})
	if len(names) == 0 {
		return c.define("key", `"\"" `+plain+`* "\""`)
	}
	tail := c.define("key-tail", plain+`* "\""`)
	var node func(prefix string) string
	node = func(prefix string) string {
		// The names that go on past prefix, by their next character.
		next := map[rune]bool{}
		isName := false
		for _, n := range names {
			if n == prefix {
				isName = true
			} else if strings.HasPrefix(n, prefix) {
				r := []rune(n[len(prefix):])[0]
				next[r] = true
			}
		}
		var alts []string
		if !isName {
			alts = append(alts, `"\""`)
		}
		// A character that no name has here: any key from then on.
		var except strings.Builder
		except.WriteString(`[^"\\\x00-\x1f`)
		var chars []rune
		for r := range next {
			chars = append(chars, r)
		}
		slices.Sort(chars)
		for _, r := range chars {
			except.WriteString(classChar(r))
		}
		except.WriteString("]")
		alts = append(alts, except.String()+" "+tail)
		for _, r := range chars {
			alts = append(alts, gbnfQuote(string(r))+" "+node(prefix+string(r)))
		}
		return c.define(hint+"-key", strings.Join(alts, " | "))
	}
	return c.define(hint+"-key", `"\"" `+node(""))
}

// classChar writes r for a GBNF character class.
func classChar(r rune) string {
	switch {
	case r == ']' || r == '[' || r == '\\' || r == '^' || r == '-':
		return `\` + string(r)
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02x`, r)
	}
	return string(r)
}

// arrayType is the body of an array: prefixItems in order, then items, between minItems and
// maxItems of them.
func (c *schemaCompiler) arrayType(s *object, path, hint string) (string, error) {
	count := func(k string) (int, bool, error) {
		v, ok := s.get(k)
		if !ok {
			return 0, false, nil
		}
		n, err := nonNegative(v)
		if err != nil || n > maxRepeat {
			return 0, false, &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: fmt.Sprintf("want an integer from 0 to %d", maxRepeat)}
		}
		return n, true, nil
	}
	lo, _, err := count("minItems")
	if err != nil {
		return "", err
	}
	hi, bounded, err := count("maxItems")
	if err != nil {
		return "", err
	}
	var prefix []string
	if p, ok := s.get("prefixItems"); ok {
		list, ok := p.([]any)
		if !ok {
			return "", &UnsupportedError{Keyword: "prefixItems", Path: path + "/prefixItems", Reason: "want an array of schemas"}
		}
		for i, sub := range list {
			n, err := c.schema(sub, fmt.Sprintf("%s/prefixItems/%d", path, i), fmt.Sprintf("%s-%d", hint, i))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, n)
		}
	}
	item := "value"
	if it, ok := s.get("items"); ok {
		if it == false {
			item = ""
			if !bounded || hi > len(prefix) {
				hi, bounded = len(prefix), true
			}
		} else if item, err = c.schema(it, path+"/items", hint+"-item"); err != nil {
			return "", err
		}
	}
	if bounded && hi < lo {
		return "", &UnsupportedError{Keyword: "maxItems", Path: path + "/maxItems", Reason: "below minItems: no array fits"}
	}
	if bounded && hi < len(prefix) {
		prefix = prefix[:hi]
	}
	// The elements one by one: element k is prefix[k] or item; those past minItems optional.
	// From the end: tail(k) writes elements k on, each after a comma.
	elem := func(k int) string {
		if k < len(prefix) {
			return prefix[k]
		}
		return item
	}
	var tail func(k int) string // elements k on, each after a comma; "" when none may
	tail = func(k int) string {
		if bounded && k >= hi || k >= len(prefix) && item == "" {
			return ""
		}
		if k >= len(prefix) && k >= lo && !bounded {
			return fmt.Sprintf(`( "," ws %s ws )*`, item) // the rest is unbounded
		}
		if k >= len(prefix) && k >= lo { // bounded: hi-k more at most
			return fmt.Sprintf(`( "," ws %s ws ){0,%d}`, item, hi-k)
		}
		one := fmt.Sprintf(`"," ws %s ws %s`, elem(k), tail(k+1))
		if k >= lo {
			return c.define(hint+"-tail", fmt.Sprintf("( %s )?", one))
		}
		return c.define(hint+"-tail", one)
	}
	if (bounded && hi == 0) || (len(prefix) == 0 && item == "") {
		if lo > 0 {
			return "", &UnsupportedError{Keyword: "minItems", Path: path + "/minItems", Reason: "no element may be written"}
		}
		return `"[" ws "]"`, nil
	}
	body := fmt.Sprintf(`%s ws %s`, elem(0), tail(1))
	if lo == 0 {
		return fmt.Sprintf(`"[" ws ( %s )? "]"`, body), nil
	}
	return fmt.Sprintf(`"[" ws %s "]"`, body), nil
}

// nonNegative reads a JSON integer >= 0.
func nonNegative(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("not a number")
	}
	f, err := n.Float64()
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, errors.New("not an integer >= 0")
	}
	return int(f), nil
}

// formatNames are the string formats supported.
const formatNames = "date, time, date-time and uuid"

// format is the GBNF of a string of a format (between its quotes), or "" for one not supported.
func (c *schemaCompiler) format(name string) string {
	date := func() string { // every month's days, February's up to 28
		d28 := c.define("day28", `"0" [1-9] | "1" [0-9] | "2" [0-8]`)
		d30 := c.define("day30", d28+` | "29" | "30"`)
		d31 := c.define("day31", d30+` | "31"`)
		return c.define("date", fmt.Sprintf(`[0-9]{4} "-" ( ( "0" [13578] | "1" [02] ) "-" %s | ( "0" [469] | "11" ) "-" %s | "02-" %s )`, d31, d30, d28))
	}
	time := func() string {
		return c.define("time", `( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )`)
	}
	switch name {
	case "date":
		return date()
	case "time":
		return time()
	case "date-time":
		return date() + ` "T" ` + time()
	case "uuid":
		return `hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12}`
	}
	return ""
}

// stringType is the body of a string with its length bounds or format.
func (c *schemaCompiler) stringType(s *object, path string) (string, error) {
	if f, ok := s.get("format"); ok {
		name, _ := f.(string)
		body := c.format(name)
		if body == "" {
			return "", &UnsupportedError{Keyword: "format", Path: path + "/format", Reason: fmt.Sprintf("the format %q is not supported (%s are)", f, formatNames)}
		}
		for _, k := range []string{"minLength", "maxLength"} {
			if _, ok := s.get(k); ok {
				return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "beside format: not supported"}
			}
		}
		return `"\"" ` + body + ` "\""`, nil
	}
	lo, hi := 0, -1
	for _, k := range []string{"minLength", "maxLength"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		n, err := nonNegative(v)
		if err != nil || n > maxRepeat {
			return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: fmt.Sprintf("want an integer from 0 to %d", maxRepeat)}
		}
		if k == "minLength" {
			lo = n
		} else {
			hi = n
		}
	}
	switch {
	case hi >= 0 && hi < lo:
		return "", &UnsupportedError{Keyword: "maxLength", Path: path + "/maxLength", Reason: "below minLength: no string fits"}
	case lo == 0 && hi < 0:
		return "string", nil
	case hi < 0:
		return fmt.Sprintf(`"\"" char{%d,} "\""`, lo), nil
	}
	return fmt.Sprintf(`"\"" char{%d,%d} "\""`, lo, hi), nil
}

// maxDigits bounds integers as the integer rule does: 16 digits.
const maxDigits = 16

// integerType is the body of an integer within its bounds.
func (c *schemaCompiler) integerType(s *object, path string) (string, error) {
	limit := int64(math.Pow10(maxDigits)) - 1
	lo, hi := -limit, limit
	bounded := false
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		n, ok := v.(json.Number)
		f, err := n.Float64()
		if !ok || err != nil || math.Abs(f) > float64(limit) {
			return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: fmt.Sprintf("want a number of at most %d digits", maxDigits)}
		}
		bounded = true
		switch k {
		case "minimum":
			lo = max(lo, int64(math.Ceil(f)))
		case "exclusiveMinimum":
			lo = max(lo, int64(math.Floor(f))+1)
		case "maximum":
			hi = min(hi, int64(math.Floor(f)))
		case "exclusiveMaximum":
			hi = min(hi, int64(math.Ceil(f))-1)
		}
	}
	if !bounded {
		return "integer", nil
	}
	if lo > hi {
		return "", &UnsupportedError{Keyword: "maximum", Path: path, Reason: "the bounds leave no integer"}
	}
	return "( " + intRange(lo, hi) + " )", nil
}

// numberType is the body of a number: with minimum 0 (or more) or exclusiveMinimum 0, none
// negative. Other bounds are not supported.
func (c *schemaCompiler) numberType(s *object, path string) (string, error) {
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		n, _ := v.(json.Number)
		f, err := n.Float64()
		switch {
		case err == nil && k == "minimum" && f == 0:
			return `( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?`, nil
		case err == nil && k == "exclusiveMinimum" && f == 0:
			// Above 0: no sign, and not all zeros.
			return `( [1-9] [0-9]{0,15} ( "." [0-9]{1,16} )? | "0." [0-9]{0,15} [1-9] ) ( [eE] [-+]? [0-9]{1,2} )?`, nil
		}
		return "", &UnsupportedError{Keyword: k, Path: path + "/" + k, Reason: "a number's bounds are not supported but for minimum 0 and exclusiveMinimum 0 (an integer's are)"}
	}
	return "number", nil
}

// intRange is GBNF of the integers in [lo, hi] written as JSON writes them.
func intRange(lo, hi int64) string {
	var alts []string
	if lo < 0 {
		// -1 ... -(-lo): the magnitudes [max(1, -hi), -lo].
		alts = append(alts, `"-" ( `+natRange(max(1, -hi), -lo)+` )`)
	}
	if hi >= 0 {
		alts = append(alts, natRange(max(0, lo), hi))
	}
	return strings.Join(alts, " | ")
}

// natRange is GBNF of the naturals in [lo, hi], without leading zeros.
func natRange(lo, hi int64) string {
	var alts []string
	for digits := len(strconv.FormatInt(lo, 10)); digits <= len(strconv.FormatInt(hi, 10)); digits++ {
		first := int64(math.Pow10(digits - 1))
		if digits == 1 {
			first = 0
		}
		last := int64(math.Pow10(digits)) - 1
		a, b := max(lo, first), min(hi, last)
		if a > b {
			continue
		}
		alts = append(alts, digitRange(fmt.Sprintf("%0*d", digits, a), fmt.Sprintf("%0*d", digits, b)))
	}
	return strings.Join(alts, " | ")
}

// digitRange is GBNF of the digit strings of one length from lo to hi.
func digitRange(lo, hi string) string {
	if lo == hi {
		return `"` + lo + `"`
	}
	if len(lo) == 1 {
		return fmt.Sprintf("[%c-%c]", lo[0], hi[0])
	}
	if lo[0] == hi[0] {
		return fmt.Sprintf(`"%c" ( %s )`, lo[0], digitRange(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	nines, zeros := strings.Repeat("9", n), strings.Repeat("0", n)
	var alts []string
	a, b := lo[0], hi[0]
	if lo[1:] != zeros {
		alts = append(alts, fmt.Sprintf(`"%c" ( %s )`, a, digitRange(lo[1:], nines)))
		a++
	}
	if hi[1:] != nines {
		b--
	}
	if a <= b {
		alts = append(alts, fmt.Sprintf("[%c-%c] [0-9]{%d}", a, b, n))
	}
	if hi[1:] != nines {
		alts = append(alts, fmt.Sprintf(`"%c" ( %s )`, hi[0], digitRange(zeros, hi[1:])))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}
