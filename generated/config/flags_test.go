package config

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestLlamaFlags parses flags over a preset: Apply sets exactly the fields whose flags were set
// (an alias counts as its flag), and an enum flag refuses a value the spec does not list.
func TestLlamaFlags(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := NewLlamaFlags(fs, DefaultLlama())
	if err := fs.Parse([]string{"-d-model", "64", "-c", "16", "-rope-scaling", "yarn"}); err != nil {
		t.Fatal(err)
	}
	c, err := LlamaPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	want := c
	want.DModel, want.Context, want.RopeScaling = 64, 16, LlamaRopeScalingYarn
	if err := flags.Apply(&c); err != nil {
		t.Fatal(err)
	}
	if c != want {
		t.Errorf("Apply set %+v, want %+v", c, want)
	}

	fs = flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	NewLlamaFlags(fs, DefaultLlama())
	err = fs.Parse([]string{"-rope-scaling", "bogus"})
	if err == nil || !strings.Contains(err.Error(), "none, linear, yarn") {
		t.Errorf("-rope-scaling bogus: got error %v, want one naming the choices", err)
	}
}

// TestLlamaFlagsValidate checks that Apply validates the result and that a flag's default is the
// spec's default.
func TestLlamaFlagsValidate(t *testing.T) {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	flags := NewLlamaFlags(fs, DefaultLlama())
	if err := fs.Parse([]string{"-d-model", "65"}); err != nil {
		t.Fatal(err)
	}
	c := DefaultLlama()
	if err := flags.Apply(&c); err == nil || !strings.Contains(err.Error(), "d_model 65 is not a multiple of n_heads") {
		t.Errorf("Apply: got %v, want the multiple-of error", err)
	}
	if got := fs.Lookup("rope-base").DefValue; got != "10000" {
		t.Errorf("-rope-base default %q, want 10000", got)
	}
	if fs.Lookup("seed") != nil {
		t.Error("seed is tagged flag:\"-\" but has a flag")
	}
}
