package configs

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/toyml/toy/gen/genutil"
)

// Config is an engine configuration declared in specs/engines: a struct whose fields carry their
// JSON name, GGUF key, default and bounds in struct tags.
type Config struct {
	GoName  string
	Doc     string
	Fields  []*Field
	Presets []*preset
	// NoFlags: the config gets no command-line flags (//kernelgen:config noflags).
	NoFlags bool
	// Options: the struct is a group of command options (//kernelgen:options), not a model's
	// configuration: no GGUF keys, fields also of kinds int64, uint64, float64 and
	// map[int32]float64, flags named by the flag tag, and a RegisterFlags method in place of
	// the Flags type (see docs/SPECS.md).
	Options bool
	// Overlay: the group also gets a type with each option optional, as an API request gives
	// them (//kernelgen:options overlay).
	Overlay bool
	// ShapeOf names the config of choices (the Transformer spec) that the for tags of a shape's
	// fields name, ViewOf the shape a view takes its fields from, and Family the preset of the
	// choices that the config's own fields are for: //kernelgen:shape Transformer llama makes the
	// struct a shape whose type holds the fields the llama preset's choices take;
	// //kernelgen:view Llama gpt2 makes an empty struct a view of that shape, with the fields
	// the gpt2 preset's choices take (see docs/SPECS.md). "" for an ordinary config.
	ShapeOf, ViewOf, Family string
	// Whole is, for a shape and each of its families' views, the shape's view of every family
	// (//kernelgen:view SHAPE, no family), which the config converts to and from; nil if none.
	Whole *Config
	Pos   token.Position
	// presetDirs are the config's kernelgen:preset directives, read once its fields are known.
	presetDirs []genutil.Directive
}

// Field is one parameter of a Config.
type Field struct {
	GoName string
	Doc    string
	Kind   string // "int", "float32", "bool" or "string"; options also "int64", "uint64", "float64", mapKind
	JSON   string
	// GGUF is the GGUF key; "{arch}" in it stands for the file's general.architecture, so
	// one config reads and writes the keys of every architecture of its family. "-"
	// (gguf:"-") marks a field no file stores (see stored).
	GGUF string
	// Required makes FromGGUF report the key's absence (required:"true"); OmitZero makes
	// ToGGUF leave the key out when the field is zero (omitzero:"true"), for keys whose
	// absence means something else than zero to readers.
	Required, OmitZero bool
	// Default is the default value as written in the tag; Min/Max bound numbers (nil when
	// absent); Enum lists a string's allowed values; MultipleOf names (by JSON name) a field
	// this one must be a multiple of.
	Default  string
	Min, Max *float64
	// MinText is the min tag as written ("" when absent).
	MinText    string
	Enum       []string
	MultipleOf string
	// EnumType names the string type of an enum field (config name + field name, e.g.
	// LlamaRopeScaling) and EnumConsts its constants, one per value of Enum (LlamaRopeScalingNone).
	EnumType   string
	EnumConsts []string
	// Flag is the command-line flag's name, the JSON name with '_' → '-' ("" for a field tagged
	// flag:"-"); Alias is an extra name of the same flag ("" for none).
	Flag, Alias string
	// Resumable marks an option a resumed run may take from its command line (resume:"keep"):
	// it changes how the run is computed or reported, not what it computes.
	Resumable bool
	// For lists the choices a shape's field applies under (for:"norm=layer,head=lm"): the
	// field belongs to a family whose preset of the choices satisfies every condition.
	For []condition
	// Docs holds the field's doc comment as a family's view says it, by family
	// (//kernelgen:doc gpt2 DFF is …), where it differs from Doc.
	Docs map[string]string
	Pos  token.Position
}

// condition is one condition of a for tag: the choice named Choice (a field's JSON name of
// the choices config, or "family" for the preset's name) is one of Values.
type condition struct {
	Choice string
	Values []string
}

// familyChoice is the condition key that names the family (the preset of the choices) itself.
const familyChoice = "family"

// mapKind is the one map type an options field may have (a logit bias: token id → bias); it
// has no default and no flag.
const mapKind = "map[int32]float64"

// archPlaceholder stands for the architecture's name in a GGUF key.
const archPlaceholder = "{arch}"

// notStored is the gguf tag of a field that files do not store.
const notStored = "-"

// stored reports whether files store the field under its GGUF key: false for gguf:"-", a
// field that a file's general.architecture implies (a family's choices) rather than holds.
func (f *Field) stored() bool { return f.GGUF != notStored }

// stored reports whether some field of c is stored in files: only then does c get ToGGUF and
// FromGGUF.
func (c *Config) stored() bool {
	for _, f := range c.Fields {
		if f.stored() {
			return true
		}
	}
	return false
}

// perArch reports whether some key of c names the architecture: then ToGGUF and FromGGUF take it.
func (c *Config) perArch() bool {
	for _, f := range c.Fields {
		if strings.Contains(f.GGUF, archPlaceholder) {
			return true
		}
	}
	return false
}

// enumConst is the Go constant of the enum value v ("" if v is not one of the field's values).
func (f *Field) enumConst(v string) string {
	for i, e := range f.Enum {
		if e == v {
			return f.EnumConsts[i]
		}
	}
	return ""
}

// goType is the field's Go type: its enum type or its kind.
func (f *Field) goType() string {
	if f.EnumType != "" {
		return f.EnumType
	}
	return f.Kind
}

// usage is the help text of the field's flag: its doc comment on one line, without the
// leading name (and "is") and the final period: "DModel is the width of …." → "the width of …".
func (f *Field) usage() string {
	u := strings.Join(strings.Fields(f.Doc), " ")
	if rest, ok := strings.CutPrefix(u, f.GoName+" "); ok {
		u = strings.TrimPrefix(rest, "is ")
	}
	return strings.TrimSuffix(u, ".")
}

// preset is a named set of values for some fields of a Config.
type preset struct {
	Name   string
	Values []presetValue // in the order written
	Pos    token.Position
}

// presetValue is one field=value of a preset.
type presetValue struct {
	Field *Field
	Value string
}

var configTagKeys = []string{"json", "gguf", "default", "min", "max", "enum", "multipleof", "flag", "alias", "required", "omitzero", "resume", "for"}

// loader reads an engine spec package into its configs, recording every problem in the package.
type loader struct {
	*genutil.SpecPackage
}

func (l *loader) config(ts *ast.TypeSpec, dg *ast.CommentGroup) *Config {
	c := &Config{GoName: ts.Name.Name, Doc: genutil.GoDoc(ts.Name.Name, ts.Name.Name, genutil.Doc(dg)), Pos: l.Position(ts.Pos())}
	if c.Doc == "" {
		l.Errorf(ts.Pos(), "config %s has no doc comment", c.GoName)
	}
	isConfig := false
	for _, d := range genutil.Directives(dg) {
		switch d.Name {
		case "config":
			isConfig = true
			for _, a := range d.Args {
				if a != "noflags" {
					l.Errorf(d.Pos, "kernelgen:config %s: the only argument is noflags", a)
				}
				c.NoFlags = true
			}
		case "options":
			if isConfig {
				l.Errorf(d.Pos, "%s: kernelgen:config and kernelgen:options are exclusive", c.GoName)
			}
			isConfig, c.Options = true, true
			for _, a := range d.Args {
				if a != "overlay" {
					l.Errorf(d.Pos, "kernelgen:options %s: the only argument is overlay", a)
				}
				c.Overlay = true
			}
		case "preset":
			c.presetDirs = append(c.presetDirs, d)
		case "shape", "view":
			if len(d.Args) != 2 && !(d.Name == "view" && len(d.Args) == 1) || c.ShapeOf != "" || c.ViewOf != "" {
				l.Errorf(d.Pos, "kernelgen:%s: want kernelgen:shape CHOICES FAMILY or kernelgen:view SHAPE [FAMILY], once", d.Name)
				continue
			}
			if d.Name == "shape" {
				c.ShapeOf = d.Args[0]
			} else {
				c.ViewOf = d.Args[0]
			}
			if len(d.Args) == 2 {
				c.Family = d.Args[1]
			}
		default:
			l.Errorf(d.Pos, "unknown directive kernelgen:%s on config %s (known: config, options, preset, shape, view)", d.Name, c.GoName)
		}
	}
	if !isConfig {
		l.Errorf(ts.Pos(), "type %s needs kernelgen:config or kernelgen:options", c.GoName)
		return nil
	}
	st, ok := ts.Type.(*ast.StructType)
	if !ok {
		l.Errorf(ts.Pos(), "config %s must be a struct", c.GoName)
		return nil
	}
	byJSON := map[string]*Field{}
	byGGUF := map[string]bool{}
	for _, f := range st.Fields.List {
		if len(f.Names) != 1 {
			l.Errorf(f.Pos(), "config %s: declare one field per line", c.GoName)
			continue
		}
		cf := l.configField(f, c.Options)
		if cf == nil {
			continue
		}
		if len(cf.Enum) > 0 {
			l.enumNames(c, cf)
		}
		if byJSON[cf.JSON] != nil {
			l.Errorf(f.Pos(), "json name %q is used twice", cf.JSON)
		}
		if cf.GGUF != "" && cf.stored() && byGGUF[cf.GGUF] {
			l.Errorf(f.Pos(), "gguf key %q is used twice", cf.GGUF)
		}
		byJSON[cf.JSON], byGGUF[cf.GGUF] = cf, true
		c.Fields = append(c.Fields, cf)
	}
	flags := map[string]*Field{}
	for _, cf := range c.Fields {
		for _, name := range []string{cf.Flag, cf.Alias} {
			if name == "" {
				continue
			}
			if other := flags[name]; other != nil {
				l.ErrorAt(cf.Pos, "field %s: flag -%s is already the flag of %s", cf.GoName, name, other.GoName)
				continue
			}
			flags[name] = cf
		}
	}
	for _, cf := range c.Fields {
		if cf.MultipleOf != "" {
			other := byJSON[cf.MultipleOf]
			if other == nil || other.Kind != "int" || cf.Kind != "int" {
				l.ErrorAt(cf.Pos, "multipleof %q must name another int field", cf.MultipleOf)
			}
		}
	}
	return c
}

// presets reads the kernelgen:preset directives of c, once its fields are known (a shape's and
// a view's are their family's).
func (l *loader) presets(c *Config) {
	byJSON := map[string]*Field{}
	for _, f := range c.Fields {
		byJSON[f.JSON] = f
	}
	seen := map[string]bool{}
	for _, d := range c.presetDirs {
		if len(d.Args) < 1 {
			l.Errorf(d.Pos, "kernelgen:preset needs a name")
			continue
		}
		p := &preset{Name: d.Args[0], Pos: l.Position(d.Pos)}
		if seen[p.Name] {
			l.Errorf(d.Pos, "preset %q is declared twice", p.Name)
		}
		seen[p.Name] = true
		for _, a := range d.Args[1:] {
			k, v, ok := strings.Cut(a, "=")
			f := byJSON[k]
			if !ok || f == nil {
				l.Errorf(d.Pos, "preset %s: %q is not field=value with a field of %s", p.Name, a, c.GoName)
				continue
			}
			if msg := f.Check(v); msg != "" {
				l.Errorf(d.Pos, "preset %s: %s=%s: %s", p.Name, k, v, msg)
				continue
			}
			p.Values = append(p.Values, presetValue{f, v})
		}
		c.Presets = append(c.Presets, p)
	}
	if c.ViewOf != "" && len(c.Presets) > 0 {
		// A view's defaults are its first preset's: the shape's are another family's.
		for _, v := range c.Presets[0].Values {
			v.Field.Default = v.Value
		}
	}
}

func (l *loader) configField(f *ast.Field, options bool) *Field {
	name := f.Names[0].Name
	cf := &Field{GoName: name, Doc: genutil.GoDoc(name, name, genutil.Doc(f.Doc)), Pos: l.Position(f.Pos())}
	if cf.Doc == "" {
		l.Errorf(f.Pos(), "field %s has no doc comment", name)
	}
	switch t := l.Pkg.TypesInfo.TypeOf(f.Type).(type) {
	case *types.Basic:
		switch t.Kind() {
		case types.Int, types.Float32, types.Bool, types.String:
			cf.Kind = t.Name()
		case types.Int64, types.Uint64, types.Float64:
			if options {
				cf.Kind = t.Name()
			}
		}
	case *types.Map:
		if options && t.String() == mapKind {
			cf.Kind = mapKind
		}
	}
	if cf.Kind == "" {
		if options {
			l.Errorf(f.Pos(), "field %s: option fields are int, int64, uint64, float64, bool, string or %s", name, mapKind)
		} else {
			l.Errorf(f.Pos(), "field %s: config fields are int, float32, bool or string", name)
		}
		return nil
	}
	if f.Tag == nil {
		l.Errorf(f.Pos(), "field %s needs a tag with json, gguf and default", name)
		return nil
	}
	raw, _ := strconv.Unquote(f.Tag.Value)
	tag := reflect.StructTag(raw)
	parts := strings.Fields(raw)
	if options {
		parts = splitTag(raw) // an option's default may hold spaces ("func ")
	}
	for _, part := range parts {
		key, val, _ := strings.Cut(part, ":")
		if _, err := strconv.Unquote(val); err != nil || !strings.HasPrefix(val, `"`) || key == "" {
			l.Errorf(f.Pos(), "field %s: malformed tag %q (want key:\"value\" pairs separated by spaces, values without spaces)", name, part)
			continue
		}
		known := false
		for _, k := range configTagKeys {
			known = known || k == key
		}
		if !known {
			l.Errorf(f.Pos(), "field %s: unknown tag key %q (known: %s)", name, key, strings.Join(configTagKeys, ", "))
		}
	}
	var ok bool
	if cf.JSON, ok = tag.Lookup("json"); !ok || cf.JSON == "" {
		l.Errorf(f.Pos(), "field %s: missing json tag", name)
	}
	if cf.GGUF, ok = tag.Lookup("gguf"); options {
		if ok {
			l.Errorf(f.Pos(), "field %s: options have no GGUF key", name)
			cf.GGUF = ""
		}
	} else if !ok || cf.GGUF == "" {
		l.Errorf(f.Pos(), "field %s: missing gguf tag", name)
	} else if rest := strings.Replace(cf.GGUF, archPlaceholder, "", 1); strings.ContainsAny(rest, "{}") {
		l.Errorf(f.Pos(), "field %s: gguf:%q: the only placeholder is %s, once", name, cf.GGUF, archPlaceholder)
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"required", &cf.Required}, {"omitzero", &cf.OmitZero}} {
		key, dst := b.key, b.dst
		if v, ok := tag.Lookup(key); ok {
			if v != "true" {
				l.Errorf(f.Pos(), "field %s: %s:%q: the only value is \"true\"", name, key, v)
			}
			*dst = true
		}
	}
	if cf.Required && cf.OmitZero {
		l.Errorf(f.Pos(), "field %s: a required key cannot be omitted", name)
	}
	if !cf.stored() && (cf.Required || cf.OmitZero) {
		l.Errorf(f.Pos(), "field %s: gguf:\"-\" is not stored: required and omitzero are for keys", name)
	}
	num := func(key string) *float64 {
		s, ok := tag.Lookup(key)
		if !ok {
			return nil
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || cf.Kind == "bool" || cf.Kind == "string" || cf.Kind == mapKind {
			l.Errorf(f.Pos(), "field %s: %s:%q is not a bound for a %s", name, key, s, cf.Kind)
			return nil
		}
		return &v
	}
	cf.Min, cf.Max = num("min"), num("max")
	if cf.Min != nil {
		cf.MinText = tag.Get("min")
	}
	if e, ok := tag.Lookup("enum"); ok {
		if cf.Kind != "string" {
			l.Errorf(f.Pos(), "field %s: enum is for strings", name)
		}
		cf.Enum = strings.Split(e, ",")
	}
	cf.MultipleOf = tag.Get("multipleof")
	cf.Flag = strings.ReplaceAll(cf.JSON, "_", "-")
	if v, ok := tag.Lookup("flag"); ok {
		switch {
		case v == "-":
			cf.Flag = ""
		case !options:
			l.Errorf(f.Pos(), "field %s: flag:%q: the only value is \"-\" (no flag; the flag's name is the json name)", name, v)
		case !isFlagName(v):
			l.Errorf(f.Pos(), "field %s: flag:%q is not a flag name (letters, digits and '-', not first) or \"-\"", name, v)
		default:
			cf.Flag = v
		}
	}
	if cf.Kind == mapKind && cf.Flag != "" {
		l.Errorf(f.Pos(), "field %s: a %s field has no flag (flag:\"-\")", name, mapKind)
	}
	if v, ok := tag.Lookup("resume"); ok {
		switch {
		case !options:
			l.Errorf(f.Pos(), "field %s: resume:%q is for options (kernelgen:options), not a model's config", name, v)
		case v != "keep":
			l.Errorf(f.Pos(), "field %s: resume:%q: the only value is \"keep\"", name, v)
		}
		cf.Resumable = true
	}
	if v, ok := tag.Lookup("alias"); ok {
		switch {
		case cf.Flag == "":
			l.Errorf(f.Pos(), "field %s: alias:%q on a field with no flag", name, v)
		case !isFlagName(v):
			l.Errorf(f.Pos(), "field %s: alias:%q is not a flag name (letters, digits and '-', not first)", name, v)
		default:
			cf.Alias = v
		}
	}
	if v, ok := tag.Lookup("for"); ok {
		if options {
			l.Errorf(f.Pos(), "field %s: for:%q is for a shape's fields (kernelgen:shape), not options", name, v)
		}
		for _, cond := range strings.Split(v, ",") {
			k, vals, ok := strings.Cut(cond, "=")
			if !ok || k == "" || vals == "" {
				l.Errorf(f.Pos(), "field %s: for:%q: want choice=value[|value…] conditions separated by ','", name, v)
				continue
			}
			cf.For = append(cf.For, condition{Choice: k, Values: strings.Split(vals, "|")})
		}
	}
	for _, d := range genutil.Directives(f.Doc) {
		if d.Name != "doc" || len(d.Args) < 2 {
			l.Errorf(d.Pos, "field %s: the only directive of a field is kernelgen:doc FAMILY TEXT", name)
			continue
		}
		if cf.Docs == nil {
			cf.Docs = map[string]string{}
		}
		if _, dup := cf.Docs[d.Args[0]]; dup {
			l.Errorf(d.Pos, "field %s: a second kernelgen:doc for %s", name, d.Args[0])
		}
		cf.Docs[d.Args[0]] = genutil.GoDoc(name, name, strings.Join(d.Args[1:], " "))
	}
	d, ok := tag.Lookup("default")
	if cf.Kind == mapKind {
		if ok {
			l.Errorf(f.Pos(), "field %s: a %s field has no default (nil)", name, mapKind)
		}
		return cf
	}
	if !ok {
		l.Errorf(f.Pos(), "field %s: missing default", name)
		return nil
	}
	cf.Default = d
	if msg := cf.Check(d); msg != "" {
		l.Errorf(f.Pos(), "field %s: default %q: %s", name, d, msg)
	}
	return cf
}

// splitTag splits a struct tag into its key:"value" parts at the spaces between them, a quoted
// value's own spaces (and escaped quotes) kept.
func splitTag(raw string) []string {
	var parts []string
	start, quoted := -1, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ' ' && !quoted:
			if start >= 0 {
				parts = append(parts, raw[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		parts = append(parts, raw[start:])
	}
	return parts
}

// isFlagName reports whether s can name a flag: ASCII letters, digits and '-', starting with a
// letter or digit.
func isFlagName(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case r == '-' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// enumNames names the Go type and constants of the enum field cf of config c: LlamaRopeScaling
// and LlamaRopeScalingNone for the value "none" of Llama.RopeScaling.
func (l *loader) enumNames(c *Config, cf *Field) {
	cf.EnumType = c.GoName + cf.GoName
	seen := map[string]string{}
	for _, v := range cf.Enum {
		id := enumValueName(v)
		if id == "" {
			l.ErrorAt(cf.Pos, "field %s: enum value %q has no letter or digit to name its constant", cf.GoName, v)
		} else if prev, dup := seen[id]; dup {
			l.ErrorAt(cf.Pos, "field %s: enum values %q and %q both name the constant %s", cf.GoName, prev, v, cf.EnumType+id)
		}
		seen[id] = v
		cf.EnumConsts = append(cf.EnumConsts, cf.EnumType+id)
	}
}

// enumValueName turns an enum value into the suffix of its constant's name: its runs of letters
// and digits, each with an upper-case first letter (yarn → Yarn, f32 → F32, q4_k → Q4K).
func enumValueName(v string) string {
	var b strings.Builder
	for _, part := range strings.FieldsFunc(v, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		r, size := utf8.DecodeRuneInString(part)
		b.WriteRune(unicode.ToUpper(r))
		b.WriteString(part[size:])
	}
	return b.String()
}

// Check reports what is wrong with s as a value of the field ("" if nothing).
func (f *Field) Check(s string) string {
	var v float64
	switch f.Kind {
	case "int":
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "not an int"
		}
		v = float64(i)
	case "int64":
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return "not an int64"
		}
		v = float64(i)
	case "uint64":
		i, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return "not a uint64"
		}
		v = float64(i)
	case "float32", "float64":
		x, err := strconv.ParseFloat(s, map[string]int{"float32": 32, "float64": 64}[f.Kind])
		if err != nil {
			return "not a " + f.Kind
		}
		v = x
	case mapKind:
		return "a map takes no value here"
	case "bool":
		if _, err := strconv.ParseBool(s); err != nil {
			return "not a bool"
		}
		return ""
	case "string":
		if len(f.Enum) > 0 {
			for _, e := range f.Enum {
				if e == s {
					return ""
				}
			}
			return fmt.Sprintf("not one of %s", strings.Join(f.Enum, ", "))
		}
		return ""
	}
	if f.Min != nil && v < *f.Min {
		return fmt.Sprintf("below the minimum %g", *f.Min)
	}
	if f.Max != nil && v > *f.Max {
		return fmt.Sprintf("above the maximum %g", *f.Max)
	}
	return ""
}

// OptionGroup is the option group (//kernelgen:options) named name among cs, nil if none.
func OptionGroup(cs []*Config, name string) *Config {
	for _, c := range cs {
		if c.GoName == name && c.Options {
			return c
		}
	}
	return nil
}
