package infer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/toyml/toy/cmd/toy/internal/clitest"
)

// TestGenerateStructured: toy generate -json-schema, -json-schema-file, -grammar and
// -grammar-file constrain the random model's output: every output that completed parses and
// validates against its schema (a JSON-Schema validator), or matches the grammar's only
// sentences; conflicting and bad flags are refused.
func TestGenerateStructured(t *testing.T) {
	model := clitest.TinyCheckpoint(t)
	dir := t.TempDir()
	schema := `{"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}}, "required": ["ok", "n"], "additionalProperties": false}`
	schemaFile := filepath.Join(dir, "schema.json")
	require.NoError(t, os.WriteFile(schemaFile, []byte(schema), 0o644))
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	v, err := c.Compile("schema.json")
	require.NoError(t, err)

	base := []string{"generate", "-m", model, "-p", "x", "-n", "60", "-t", "1"}
	complete := 0
	for seed := range 6 {
		args := append(base, "--temp", "1", "--seed", fmt.Sprint(seed), "-json-schema", schema)
		if seed%2 == 1 {
			args = append(base, "--temp", "1", "--seed", fmt.Sprint(seed), "-json-schema-file", schemaFile)
		}
		out, errOut, code := runToy(args...)
		require.Equal(t, 0, code, errOut)
		require.True(t, strings.HasPrefix(out, "x") && strings.HasSuffix(out, "\n"), "%q", out)
		text := strings.TrimSuffix(strings.TrimPrefix(out, "x"), "\n")
		if strings.Contains(errOut, "before the output was complete") {
			continue
		}
		complete++
		var any any
		require.NoError(t, json.Unmarshal([]byte(text), &any), "%q", text)
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		require.NoError(t, err)
		require.NoError(t, v.Validate(inst), "%q", text)
	}
	assert.Positive(t, complete)
	t.Logf("%d of 6 outputs complete within 60 tokens, all valid", complete)

	grammarFile := filepath.Join(dir, "yesno.gbnf")
	require.NoError(t, os.WriteFile(grammarFile, []byte("# yes or no\nroot ::= (\"yes\" | \"no\") \"!\"{1,3}\n"), 0o644))
	for _, args := range [][]string{{"-grammar", `root ::= ("yes" | "no") "!"{1,3}`}, {"-grammar-file", grammarFile}} {
		for _, temp := range []string{"0", "1"} {
			out, errOut, code := runToy(append(base, append([]string{"--temp", temp}, args...)...)...)
			require.Equal(t, 0, code, errOut)
			assert.Regexp(t, `^x(yes|no)!{1,3}\n$`, out)
		}
	}

	for _, bad := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-grammar", `root ::= "a"`, "-json-schema", "{}"}, 2, "give one of"},
		{[]string{"-json-schema", `{"type": "string", "pattern": "a+"}`}, 2, `"pattern"`},
		{[]string{"-json-schema", `{"type": `}, 2, "-json-schema"},
		{[]string{"-grammar", `root ::= undefined`}, 2, `"undefined"`},
		{[]string{"-grammar-file", filepath.Join(dir, "none.gbnf")}, 1, "none.gbnf"},
		{[]string{"-grammar-file", dir}, 1, "-grammar-file"},
		{[]string{"-json-schema-file", grammarFile}, 1, "yesno.gbnf"},
		{[]string{"-grammar", `root ::= "a"`, "-draft", model}, 2, "speculative"},
	} {
		_, errOut, code := runToy(append(base, bad.args...)...)
		assert.Equal(t, bad.code, code, "%v: %s", bad.args, errOut)
		assert.Contains(t, errOut, bad.msg, bad.args)
	}
}
