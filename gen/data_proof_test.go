package gen

import (
	"go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataHeader declares, as Open MPI's mpi.h does, predefined handles that are the addresses of
// exported objects, and a function with a char *** parameter.
const dataHeader = `
typedef struct lib_comm_t *Lib_Comm;
typedef struct lib_op_t *Lib_Op;
struct lib_predefined_comm { int pad[64]; };
struct lib_predefined_op { int pad[8]; };
extern struct lib_predefined_comm lib_comm_world, lib_comm_self;
extern struct lib_predefined_op lib_op_sum;
#define LIB_COMM_WORLD ((Lib_Comm) ((void *) &(lib_comm_world)))
#define LIB_COMM_SELF ((Lib_Comm) ((void *) &(lib_comm_self)))
#define LIB_SUM ((Lib_Op) ((void *) &(lib_op_sum)))
int lib_init(int *argc, char ***argv);
`

// dataModel is the model of a spec that binds dataHeader right.
func dataModel() *Model {
	at := func(line int) token.Position { return token.Position{Filename: "specs/lib/lib.go", Line: line} }
	comm := &Handle{GoName: "Comm", Struct: "struct lib_comm_t", Typedef: "Lib_Comm", Pos: at(1)}
	op := &Handle{GoName: "Op", Struct: "struct lib_op_t", Typedef: "Lib_Op", Pos: at(2)}
	return &Model{
		Handles: []*Handle{comm, op},
		Data: []*Data{
			{GoName: "CommWorld", CName: "lib_comm_world", Macro: "LIB_COMM_WORLD", Handle: comm, Pos: at(10)},
			{GoName: "OpSum", CName: "lib_op_sum", Macro: "LIB_SUM", Handle: op, Pos: at(11)},
		},
		Funcs: []*Func{{GoName: "Init", CName: "lib_init", Result: &Type{Kind: KindInt}, Pos: at(20), Params: []*Param{
			{Name: "argc", Type: &Type{Kind: KindPtr}, ProofCType: "int *"},
			{Name: "argv", Type: &Type{Kind: KindPtr}, ProofCType: "char ***"},
		}}},
	}
}

// TestProofOfDataSymbols proves a model of exported objects against a header written here, then
// breaks one assumption at a time: the proof must refuse each, naming the spec line.
func TestProofOfDataSymbols(t *testing.T) {
	cc := needCC(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lib.h"), []byte(dataHeader), 0o644))
	lib := Library{Headers: []string{"lib.h"}}
	require.NoError(t, Prove(dataModel(), lib, dir, cc), "the right model must prove")

	for name, c := range map[string]struct {
		mutate func(m *Model)
		line   string
	}{
		"macro of another object": {func(m *Model) { m.Data[0].Macro = "LIB_COMM_SELF" }, "lib.go:10"},
		"handle of another type":  {func(m *Model) { m.Data[1].Handle = m.Handles[0] }, "lib.go:11"},
		"undeclared object":       {func(m *Model) { m.Data[1].CName = "lib_op_max" }, "lib.go:11"},
		"parameter's real type":   {func(m *Model) { m.Funcs[0].Params[1].ProofCType = "char **" }, "lib.go:20"},
		"no real type":            {func(m *Model) { m.Funcs[0].Params[0].ProofCType = "" }, "lib.go:20"},
	} {
		t.Run(name, func(t *testing.T) {
			m := dataModel()
			c.mutate(m)
			err := Prove(m, lib, dir, cc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.line)
		})
	}
}

// TestProofOfOpenMPI proves specs/mpi against the installed mpi.h, and checks that a predefined
// handle bound to the wrong object is refused. CI installs Open MPI, so there the test must run.
func TestProofOfOpenMPI(t *testing.T) {
	cc := needCC(t)
	root := repoRoot(t)
	inc, err := FindHeaders(root, OpenMPI)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs Open MPI (libopenmpi-dev), but: %v", err)
		}
		t.Skipf("Open MPI's mpi.h is not installed: %v", err)
	}
	m, err := Load(root, "./specs/mpi")
	require.NoError(t, err)
	require.NoError(t, Prove(m, OpenMPI, inc, cc), "the real spec must prove")

	m, err = Load(root, "./specs/mpi")
	require.NoError(t, err)
	var sum, max *Data
	for _, d := range m.Data {
		switch d.Macro {
		case "MPI_SUM":
			sum = d
		case "MPI_MAX":
			max = d
		}
	}
	require.NotNil(t, sum)
	require.NotNil(t, max)
	sum.CName = max.CName
	err = Prove(m, OpenMPI, inc, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MPI_SUM")
}
