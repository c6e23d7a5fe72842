package cli

import (
	"flag"
	"reflect"
	"strings"

	"github.com/toyml/toy/engines/sample"
	"github.com/toyml/toy/generated/config"
	"github.com/toyml/toy/generated/kernels"
)

// ApplyPreset takes every sampling option the user did not set (by its flag or the flag's
// alias, as the Sampling spec's options table names them) from the entry's preset of that name
// (MODEL.toml's [sampling.NAME]; "default" unless -sampling-preset names another); an option
// the preset leaves out stays as it is. Two values a preset may hold are not applied: a
// repeat_penalty of 0 (no penalty: the sampler's off is 1) and a seed of 0 (none: one is drawn);
// a seed it does apply counts as given, as by -seed, so that none is drawn. A name the entry
// lacks is a usage error listing the entry's presets; the entry's "default" may be absent
// (toy's defaults hold).
func ApplyPreset(p *sample.Params, entry *kernels.Model, name string, set map[string]bool) error {
	var names []string
	for _, pr := range entry.Presets {
		names = append(names, pr.Name)
		if pr.Name != name {
			continue
		}
		o := withoutFlagsSet(pr.Sampling, set)
		if o.RepeatPenalty != nil && *o.RepeatPenalty == 0 {
			o.RepeatPenalty = nil
		}
		if o.Seed != nil && *o.Seed == 0 {
			o.Seed = nil
		}
		s := config.Sampling(*p)
		o.Apply(&s)
		*p = sample.Params(s)
		if o.Seed != nil {
			set["seed"] = true // a seed given, as by -seed: not drawn
		}
		return nil
	}
	if name == "default" {
		return nil
	}
	if len(names) == 0 {
		return Usagef("-sampling-preset %s: the kernel table's entry %s declares no sampling presets", name, entry.Name)
	}
	return Usagef("-sampling-preset %s: the kernel table's entry %s declares %s", name, entry.Name, strings.Join(names, ", "))
}

// withoutFlagsSet returns o without the options whose flag, or its alias, set names: for each
// option of the Sampling spec's table, the overlay's field of the same JSON key is cleared.
func withoutFlagsSet(o config.SamplingOverlay, set map[string]bool) config.SamplingOverlay {
	v := reflect.ValueOf(&o).Elem()
	for _, opt := range config.SamplingOptions() {
		if opt.Flag == "" || !set[opt.Flag] && (opt.Alias == "" || !set[opt.Alias]) {
			continue
		}
		for i := range v.NumField() {
			if key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ","); key == opt.JSON {
				v.Field(i).SetZero()
			}
		}
	}
	return o
}

// RegisterPreset adds -sampling-preset to a command's flags.
func RegisterPreset(fs *flag.FlagSet) *string {
	return fs.String("sampling-preset", "default", "the kernel table entry's sampling preset whose values every sampling flag not given takes (MODEL.toml's [sampling.NAME]: default, greedy, ...; toy kernels -m MODEL lists them); the entry must name the model for \"default\" to apply")
}

// PresetFor applies -sampling-preset: the named preset of entry, which must name the model for
// the default preset (an entry that resolved by architecture or size alone imposes nothing);
// a preset asked for by name applies from whichever entry resolved.
func PresetFor(p *sample.Params, entry *kernels.Model, named bool, name string, set map[string]bool) error {
	switch {
	case entry == nil && name != "default":
		return Usagef("-sampling-preset %s: the kernel table has no entry for this model", name)
	case entry == nil, name == "default" && !named:
		return nil
	}
	return ApplyPreset(p, entry, name, set)
}
