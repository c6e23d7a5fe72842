package configs

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestEnumValueName(t *testing.T) {
	for in, want := range map[string]string{"none": "None", "yarn": "Yarn", "f32": "F32", "q4_k": "Q4K", "top-p": "TopP", "": "", "-": ""} {
		assert.Equal(t, want, enumValueName(in), in)
	}
}
