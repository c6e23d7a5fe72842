package configs

import (
	"slices"
	"strings"
)

// A shape is one description of the parameters of several families of models: a config
// (//kernelgen:shape CHOICES FAMILY) whose fields say, in for tags, which of the choices config's
// values they apply under. Its own type holds the fields that apply to FAMILY; each view
// (an empty struct marked //kernelgen:view SHAPE FAMILY, with its doc and presets) gets the
// fields that apply to its family, with their defaults, bounds, flags and doc comments (a
// kernelgen:doc directive on the field may say it for the family), stored in no file: the
// shape's own type and the configs beside it hold the GGUF keys. A view with no family
// (//kernelgen:view SHAPE) holds every field of the shape, at the shape's defaults; the shape's
// type and each family's view then convert to it and back, and validate and bind their flags
// through it (throughWhole).

// resolveShapes fills the fields of every shape and view among cs with those its family's
// choices take, and checks their for tags and kernelgen:doc directives.
func (l *loader) resolveShapes(cs []*Config) {
	byName := map[string]*Config{}
	for _, c := range cs {
		byName[c.GoName] = c
	}
	families := map[*Config][]string{} // the families of a shape: its own and its views'
	for _, c := range cs {
		switch {
		case c.ShapeOf != "":
			families[c] = append(families[c], c.Family)
		case c.ViewOf != "":
			s := byName[c.ViewOf]
			if s == nil || s.ShapeOf == "" {
				break
			}
			if c.Family != "" {
				families[s] = append(families[s], c.Family)
			} else if s.Whole != nil {
				l.ErrorAt(c.Pos, "%s: %s already has a view of every family, %s", c.GoName, s.GoName, s.Whole.GoName)
			} else {
				s.Whole = c
			}
		}
	}
	for _, c := range cs {
		if s := byName[c.ViewOf]; s != nil && c.Family != "" {
			c.Whole = s.Whole
		}
	}
	// The shapes' fields are resolved first: a view copies them from the shape's declaration.
	declared := map[*Config][]*Field{}
	for _, c := range cs {
		declared[c] = c.Fields
	}
	for _, c := range cs {
		switch {
		case c.ShapeOf != "":
			if c.Options {
				l.ErrorAt(c.Pos, "%s: a shape is a model's config (kernelgen:config), not options", c.GoName)
				continue
			}
			choices := l.choicesOf(c, byName)
			if choices == nil {
				continue
			}
			for _, f := range c.Fields {
				l.checkShapeField(c, f, choices, families[c])
			}
			c.Fields = l.familyFields(c, c.Fields, choices, c.Family, false)
		case c.ViewOf != "":
			s := byName[c.ViewOf]
			if s == nil || s.ShapeOf == "" {
				l.ErrorAt(c.Pos, "%s: kernelgen:view %s: no shape (kernelgen:shape) of that name", c.GoName, c.ViewOf)
				continue
			}
			if len(c.Fields) > 0 || c.Options {
				l.ErrorAt(c.Pos, "%s: a view is an empty struct marked kernelgen:config: its fields are the shape's", c.GoName)
				continue
			}
			if choices := l.choicesOf(s, byName); choices != nil {
				c.Fields = l.familyFields(c, declared[s], choices, c.Family, true)
			}
			if c.Family == "" && len(c.presetDirs) > 0 {
				l.ErrorAt(c.Pos, "%s: a view of every family has no presets", c.GoName)
			}
		default:
			for _, f := range c.Fields {
				if len(f.For) > 0 || len(f.Docs) > 0 {
					l.ErrorAt(f.Pos, "field %s: for tags and kernelgen:doc are for a shape's fields (kernelgen:shape)", f.GoName)
				}
			}
		}
	}
}

// choicesOf is the config of choices shape s names, nil (with the error recorded) if none.
func (l *loader) choicesOf(s *Config, byName map[string]*Config) *Config {
	choices := byName[s.ShapeOf]
	if choices == nil || choices.ShapeOf != "" || choices.ViewOf != "" || choices.Options {
		l.ErrorAt(s.Pos, "%s: kernelgen:shape %s: no config of choices of that name", s.GoName, s.ShapeOf)
		return nil
	}
	return choices
}

// checkShapeField checks the for tag of a shape's field against the choices and its
// kernelgen:doc directives against the shape's families.
func (l *loader) checkShapeField(s *Config, f *Field, choices *Config, families []string) {
	for _, cond := range f.For {
		if cond.Choice == familyChoice {
			for _, v := range cond.Values {
				if choicePreset(choices, v) == nil {
					l.ErrorAt(f.Pos, "field %s: for: %s has no preset %q", f.GoName, choices.GoName, v)
				}
			}
			continue
		}
		cf := fieldByJSON(choices.Fields, cond.Choice)
		if cf == nil {
			l.ErrorAt(f.Pos, "field %s: for: %q is no choice of %s (nor %s)", f.GoName, cond.Choice, choices.GoName, familyChoice)
			continue
		}
		for _, v := range cond.Values {
			if msg := cf.Check(v); msg != "" {
				l.ErrorAt(f.Pos, "field %s: for: %s=%s: %s", f.GoName, cond.Choice, v, msg)
			}
		}
	}
	for family := range f.Docs {
		if !slices.Contains(families, family) {
			l.ErrorAt(f.Pos, "field %s: kernelgen:doc for %s, which is no family of %s or its views", f.GoName, family, s.GoName)
		}
	}
}

// familyFields are copies of the fields among fields that apply to family, with the family's
// doc, for config c: the shape itself or, when view, a view, whose fields have no GGUF key and
// enum types of its own.
func (l *loader) familyFields(c *Config, fields []*Field, choices *Config, family string, view bool) []*Field {
	var values map[string]string // nil: every family's fields
	if family != "" {
		p := choicePreset(choices, family)
		if p == nil {
			l.ErrorAt(c.Pos, "%s: %s has no preset %q", c.GoName, choices.GoName, family)
			return nil
		}
		values = map[string]string{familyChoice: family}
		for _, f := range choices.Fields {
			values[f.JSON] = f.Default
		}
		for _, d := range p.Args[1:] {
			if k, v, ok := strings.Cut(d, "="); ok {
				values[k] = v
			}
		}
	}
	var out []*Field
	for _, f := range fields {
		if values != nil && !applies(f, values) {
			continue
		}
		v := *f
		if doc, ok := f.Docs[family]; ok {
			v.Doc = doc
		}
		if view {
			v.GGUF, v.Required, v.OmitZero = notStored, false, false
			if len(v.Enum) > 0 {
				v.EnumConsts = nil
				l.enumNames(c, &v)
			}
		}
		out = append(out, &v)
	}
	for _, f := range out {
		if f.MultipleOf != "" && fieldByJSON(out, f.MultipleOf) == nil {
			f.MultipleOf = "" // the family has no such field: nothing to divide
		}
	}
	return out
}

// applies reports whether every condition of f's for tag holds for the choices' values.
func applies(f *Field, values map[string]string) bool {
	for _, cond := range f.For {
		if !slices.Contains(cond.Values, values[cond.Choice]) {
			return false
		}
	}
	return true
}

// choicePreset is the kernelgen:preset directive of the choices config named name, nil if none.
func choicePreset(choices *Config, name string) *directiveArgs {
	for _, d := range choices.presetDirs {
		if len(d.Args) > 0 && d.Args[0] == name {
			return &directiveArgs{d.Args}
		}
	}
	return nil
}

// directiveArgs are the arguments of a directive: the preset's name, then its field=value.
type directiveArgs struct{ Args []string }

// fieldByJSON is the field of fields named json, nil if none.
func fieldByJSON(fields []*Field, json string) *Field {
	for _, f := range fields {
		if f.JSON == json {
			return f
		}
	}
	return nil
}
