package recipes

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/generated/config"
)

var updateRecords = flag.Bool("update-records", false, "rewrite testdata/model_records.golden with the records the recipes write now")

// TestModelRecordsUnchanged compares the model{} a run bundle's run_start records (and the
// options a ViT run is resumed from) for each family's presets with the golden file, first
// written by the code before the families became one spec'd description: a run bundle of
// either version reads the same (the same keys and values; since the shapes became one
// description, vit's d_ff precedes n_heads, as Llama's does), and the checks that resume a run
// compare the same values.
func TestModelRecordsUnchanged(t *testing.T) {
	var got strings.Builder
	line := func(name string, v any) {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		fmt.Fprintf(&got, "%s %s\n", name, b)
	}
	for _, name := range config.LlamaPresetNames() {
		s := DefaultScratch()
		c, err := config.LlamaPreset(name)
		require.NoError(t, err)
		s.Model = c
		line("scratch "+name+" "+s.Family()+" "+s.presetName(), s.modelRecord())
	}
	for _, name := range config.Gpt2PresetNames() {
		s := DefaultScratch()
		c, err := config.Gpt2Preset(name)
		require.NoError(t, err)
		s.GPT2 = &c
		line("scratch "+name+" "+s.Family()+" "+s.presetName(), s.modelRecord())
	}
	for _, name := range config.VitPresetNames() {
		v := DefaultViT()
		c, err := config.VitPreset(name)
		require.NoError(t, err)
		v.Model = c
		b, err := json.Marshal(v)
		require.NoError(t, err)
		var options map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(b, &options))
		line("vit "+name, options["model"])
	}
	if *updateRecords {
		require.NoError(t, os.WriteFile("testdata/model_records.golden", []byte(got.String()), 0o644))
	}
	want, err := os.ReadFile("testdata/model_records.golden")
	require.NoError(t, err)
	// Each line is a label and a JSON object: the labels must match, the objects hold the same
	// keys and values (their order is the spec's declaration order, which the readers ignore).
	wantLines := strings.Split(strings.TrimSuffix(string(want), "\n"), "\n")
	gotLines := strings.Split(strings.TrimSuffix(got.String(), "\n"), "\n")
	require.Len(t, gotLines, len(wantLines))
	for i := range wantLines {
		wl, wj, _ := strings.Cut(wantLines[i], " {")
		gl, gj, _ := strings.Cut(gotLines[i], " {")
		assert.Equal(t, wl, gl)
		assert.JSONEq(t, "{"+wj, "{"+gj, wl)
	}
}
