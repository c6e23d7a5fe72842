// Package nccl declares the part of NCCL (nccl.h, libnccl.so.2), NVIDIA's collective
// communication library, that data-parallel training on GPUs needs: a communicator made from a
// unique id that rank 0 creates and MPI broadcasts, allreduce and broadcast on device memory,
// and error strings. It is a spec: cmd/kernelgen reads it and emits generated/nccl, whose Load
// opens the library with dlopen, so nothing needs NCCL until a cuda build asks for it. The
// prototypes are proven where nccl.h and the CUDA toolkit's headers are installed
// (generated/nccl/abiproof otherwise). See docs/DISTRIBUTED.md.
//
// NCCL declares its enums and its unique id as typedefs of anonymous types
// (typedef enum { … } ncclResult_t;), which the spec names by the typedef.
package nccl

import . "github.com/toyml/toy/specs/spec"

// Result is the status every NCCL call returns (ncclResult_t).
//
//kernelgen:enum ncclResult_t prefix=nccl
type Result int32

const (
	ResultSuccess            Result = 0 //kernelgen:c ncclSuccess
	ResultUnhandledCudaError Result = 1 //kernelgen:c ncclUnhandledCudaError
	ResultSystemError        Result = 2 //kernelgen:c ncclSystemError
	ResultInternalError      Result = 3 //kernelgen:c ncclInternalError
	ResultInvalidArgument    Result = 4 //kernelgen:c ncclInvalidArgument
	ResultInvalidUsage       Result = 5 //kernelgen:c ncclInvalidUsage
	ResultRemoteError        Result = 6 //kernelgen:c ncclRemoteError
	ResultInProgress         Result = 7 //kernelgen:c ncclInProgress
)

// DataType is the element type of a buffer (ncclDataType_t).
//
//kernelgen:enum ncclDataType_t prefix=nccl
type DataType int32

const (
	DataTypeInt8    DataType = 0 //kernelgen:c ncclInt8
	DataTypeInt32   DataType = 2 //kernelgen:c ncclInt32
	DataTypeFloat16 DataType = 6 //kernelgen:c ncclFloat16
	DataTypeFloat32 DataType = 7 //kernelgen:c ncclFloat32
	DataTypeFloat64 DataType = 8 //kernelgen:c ncclFloat64
)

// RedOp is a reduction (ncclRedOp_t).
//
//kernelgen:enum ncclRedOp_t prefix=nccl
type RedOp int32

const (
	RedOpSum RedOp = 0 //kernelgen:c ncclSum
	RedOpMax RedOp = 2 //kernelgen:c ncclMax
	RedOpAvg RedOp = 4 //kernelgen:c ncclAvg
)

// UniqueID names a communicator being created: rank 0 makes it (GetUniqueID) and every rank
// passes the same bytes to CommInitRank (ncclUniqueId).
//
//kernelgen:struct ncclUniqueId
type UniqueID struct {
	// Internal are the id's 128 bytes (NCCL_UNIQUE_ID_BYTES), opaque.
	Internal [128]Char
}

// Comm is a communicator: this rank's place in a group of GPUs (ncclComm_t).
//
//kernelgen:handle ncclComm_t = struct ncclComm
type Comm struct{}

// Stream is a CUDA stream (cudaStream_t); the zero Stream is the device's default stream.
//
//kernelgen:handle cudaStream_t = struct CUstream_st
type Stream struct{}

// Funcs are the NCCL calls toy binds. Buffers are device addresses on the communicator's GPU.
//
//kernelgen:functions prefix=nccl
type Funcs interface {
	// GetVersion writes NCCL's version (major·10000 + minor·100 + patch since 2.9).
	//kernelgen:c ncclGetVersion
	GetVersion(version *Int) Result
	// GetUniqueID writes a new unique id into id (a UniqueID's 128 bytes), on rank 0.
	//kernelgen:c ncclGetUniqueId
	//kernelgen:ctype id ncclUniqueId *
	GetUniqueID(id Ptr) Result
	// CommInitRank makes this rank's communicator of a group of nranks GPUs named by id; the
	// calling thread's current CUDA device is the rank's. Every rank must call it.
	//kernelgen:c ncclCommInitRank
	CommInitRank(comm *Comm, nranks Int, id UniqueID, rank Int) Result
	// CommDestroy frees a communicator.
	//kernelgen:c ncclCommDestroy
	CommDestroy(comm Comm) Result
	// AllReduce combines count elements of sendbuff from every rank with op into every rank's
	// recvbuff (the same address works in place), queued on stream.
	//kernelgen:c ncclAllReduce
	AllReduce(sendbuff Const[Ptr], recvbuff Ptr, count Size, datatype DataType, op RedOp, comm Comm, stream Stream) Result
	// Broadcast copies count elements of root's sendbuff into every rank's recvbuff, queued on
	// stream.
	//kernelgen:c ncclBroadcast
	Broadcast(sendbuff Const[Ptr], recvbuff Ptr, count Size, datatype DataType, root Int, comm Comm, stream Stream) Result
	// GetErrorString describes a result.
	//kernelgen:c ncclGetErrorString
	GetErrorString(result Result) string
}
