package kerneltables

import "testing"

func TestPTXRunsOn(t *testing.T) {
	for _, c := range []struct {
		ptx, arch string
		want      bool
	}{
		{"sm_80", "sm_80", true},
		{"sm_80", "sm_86", true},
		{"sm_86", "sm_80", false},
		{"sm_90", "sm_90a", true},
		{"sm_90", "sm_80", false},
		{"sm_90a", "sm_90a", true},
		{"sm_90a", "sm_90", false},
		{"sm_90a", "sm_100a", false},
		{"sm_90", "sm_121", true},
		{"sm_121", "sm_90", false},
		{"sm_100f", "sm_103a", true},
		{"sm_100f", "sm_103f", true},
		{"sm_103f", "sm_100f", false},
		{"sm_100f", "sm_100", false},
		{"sm_100f", "sm_120a", false},
	} {
		if got := ptxRunsOn(c.ptx, c.arch); got != c.want {
			t.Errorf("ptxRunsOn(%s, %s) = %v, want %v", c.ptx, c.arch, got, c.want)
		}
	}
}
