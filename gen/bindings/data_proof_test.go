package bindings

import (
	"errors"
	"go/token"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/toyml/toy/gen/internal/gentest"
)

// dataHeader declares, as Open MPI's mpi.h does, predefined handles that are the addresses of
// exported objects, constant addresses, and a function with a char *** parameter.
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
#define LIB_IN_PLACE ((void *) 1)
#define LIB_BOTTOM ((void *) 0)
#define LIB_ONE_INT 1
int lib_init(int *argc, char ***argv);
`

// dataModel is the model of a spec that binds dataHeader right.
func dataModel() *model {
	at := func(line int) token.Position { return token.Position{Filename: "specs/lib/lib.go", Line: line} }
	comm := &handle{GoName: "Comm", Struct: "struct lib_comm_t", Typedef: "Lib_Comm", Pos: at(1)}
	op := &handle{GoName: "Op", Struct: "struct lib_op_t", Typedef: "Lib_Op", Pos: at(2)}
	return &model{
		Handles: []*handle{comm, op},
		Data: []*data{
			{GoName: "CommWorld", CName: "lib_comm_world", Macro: "LIB_COMM_WORLD", Handle: comm, Pos: at(10)},
			{GoName: "OpSum", CName: "lib_op_sum", Macro: "LIB_SUM", Handle: op, Pos: at(11)},
			{GoName: "InPlace", Macro: "LIB_IN_PLACE", Constant: true, Address: 1, Pos: at(12)},
		},
		Funcs: []*function{{GoName: "Init", CName: "lib_init", Result: &specType{Kind: kindInt}, Pos: at(20), Params: []*param{
			{Name: "argc", Type: &specType{Kind: kindPtr}, ProofCType: "int *"},
			{Name: "argv", Type: &specType{Kind: kindPtr}, ProofCType: "char ***"},
		}}},
	}
}

// TestProofOfDataSymbols proves a model of exported objects against a header written here, then
// breaks one assumption at a time: the proof must refuse each, naming the spec line.
func TestProofOfDataSymbols(t *testing.T) {
	cc := gentest.NeedCC(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "lib.h"), []byte(dataHeader), 0o644))
	lib := library{Headers: []string{"lib.h"}}
	require.NoError(t, prove(dataModel(), lib, dir, cc), "the right model must prove")

	for name, c := range map[string]struct {
		mutate func(m *model)
		line   string
	}{
		"macro of another object":   {func(m *model) { m.Data[0].Macro = "LIB_COMM_SELF" }, "lib.go:10"},
		"handle of another type":    {func(m *model) { m.Data[1].Handle = m.Handles[0] }, "lib.go:11"},
		"undeclared object":         {func(m *model) { m.Data[1].CName = "lib_op_max" }, "lib.go:11"},
		"constant of another value": {func(m *model) { m.Data[2].Address = 2 }, "lib.go:12"},
		"constant of another macro": {func(m *model) { m.Data[2].Macro = "LIB_BOTTOM" }, "lib.go:12"},
		"constant that is an int":   {func(m *model) { m.Data[2].Macro = "LIB_ONE_INT" }, "lib.go:12"},
		"parameter's real type":     {func(m *model) { m.Funcs[0].Params[1].ProofCType = "char **" }, "lib.go:20"},
		"no real type":              {func(m *model) { m.Funcs[0].Params[0].ProofCType = "" }, "lib.go:20"},
	} {
		t.Run(name, func(t *testing.T) {
			m := dataModel()
			c.mutate(m)
			err := prove(m, lib, dir, cc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.line)
		})
	}
}

// TestProofOfOpenMPI proves specs/mpi against the installed mpi.h, and checks that a predefined
// handle bound to the wrong object is refused. CI installs Open MPI, so there the test must run.
func TestProofOfOpenMPI(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	inc, err := findHeaders(root, openMPI)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI installs Open MPI (libopenmpi-dev), but: %v", err)
		}
		t.Skipf("Open MPI's mpi.h is not installed: %v", err)
	}
	fresh := specLoader(t, root, "./specs/mpi")
	require.NoError(t, prove(fresh(), openMPI, inc, cc), "the real spec must prove")

	m := fresh()
	var sum, max *data
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
	err = prove(m, openMPI, inc, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MPI_SUM")
}

// typedefHeader declares, as nccl.h does, enums and a struct that C names only by typedef of an
// anonymous type, and functions taking them (a transcription of the interface, for the
// generator's sake: the real nccl.h is not installed here).
const typedefHeader = `
#include <stddef.h>
typedef struct CUstream_st *cudaStream_t;
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum { ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
	ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7, ncclNumResults = 8 } ncclResult_t;
typedef enum { ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3, ncclInt64 = 4,
	ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8, ncclDouble = 8 } ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;
ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
	ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
	ncclComm_t comm, cudaStream_t stream);
const char *ncclGetErrorString(ncclResult_t result);
`

// TestProofOfTypedefs proves specs/nccl against a header that declares its interface as nccl.h
// does (typedefs of anonymous enums and of a struct passed by value), then breaks an enum value
// and the struct's layout: the proof must refuse each, naming the spec line.
func TestProofOfTypedefs(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nccl.h"), []byte(typedefHeader), 0o644))
	lib := library{Headers: []string{"nccl.h"}}
	fresh := specLoader(t, root, "./specs/nccl")
	require.NoError(t, prove(fresh(), lib, dir, cc), "the spec must prove against the interface")

	m := fresh()
	m.Enums[2].Values[2].Value = 5 // ncclAvg
	err := prove(m, lib, dir, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ncclAvg is not 5")

	m = fresh()
	m.Structs[0].Fields[0].Type.Len = 127
	err = prove(m, lib, dir, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ncclUniqueId has another size")
}

// TestProofOfNCCL proves specs/nccl against NCCL's own nccl.h where one is found ($NCCL_INCLUDE,
// $NCCL_HOME/include, the CUDA toolkit's include directories, /usr/include), with the CUDA
// runtime headers it includes or, where those are missing, the generator's stand-ins; then
// breaks an enum value and a prototype: the proof must refuse each, naming the spec line. Where
// no nccl.h is installed it is skipped (no Debian package ships it).
func TestProofOfNCCL(t *testing.T) {
	cc := gentest.NeedCC(t)
	root := gentest.RepoRoot(t)
	dirs, err := includeDirs(root, nccl)
	if errors.Is(err, errNoHeaders) {
		t.Skipf("NCCL's nccl.h is not installed (set NCCL_INCLUDE to its directory): %v", err)
	}
	require.NoError(t, err)
	fresh := specLoader(t, root, "./specs/nccl")
	require.NoError(t, proveWith(fresh(), nccl, dirs, cc), "the spec must prove against %s", dirs[0])
	runtime := "the generator's stand-ins"
	if len(dirs) > 1 {
		runtime = dirs[1]
	}
	t.Logf("proven against %s/nccl.h, CUDA runtime headers: %s", dirs[0], runtime)

	m := fresh()
	for _, v := range m.Enums[1].Values {
		if v.CName == "ncclFloat32" {
			v.Value = 9
		}
	}
	err = proveWith(m, nccl, dirs, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ncclFloat32 is not 9")

	m = fresh()
	for _, f := range m.Funcs {
		if f.CName == "ncclAllReduce" {
			f.Params[2].Type = &specType{Kind: kindInt} // count is a size_t
		}
	}
	err = proveWith(m, nccl, dirs, cc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "specs/nccl/nccl.go:")
	assert.Contains(t, err.Error(), "ncclAllReduce")
}
