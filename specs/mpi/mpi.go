// Package mpi declares the part of the MPI C API (mpi.h, Open MPI's libmpi.so.40) that toy's
// data-parallel training uses: initialization with a thread level, the rank and size of the
// world communicator, an error handler that returns codes instead of aborting, allreduce,
// broadcast, barrier, abort, finalize and error strings. It is a spec: cmd/kernelgen reads it
// and emits generated/mpi, whose Load opens the library with dlopen, so a binary needs no MPI
// unless it runs under mpirun. See docs/SPECS.md and docs/DISTRIBUTED.md.
//
// The target ABI is Open MPI's. Its handles are pointers to opaque structs, and its predefined
// handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM …) are the addresses of objects the library
// exports (ompi_mpi_comm_world, …): the Predefined interface declares them as data symbols,
// and the proof checks that each header macro is the address of its object. MPICH and its
// derivatives spell handles as ints and are a different ABI.
package mpi

import . "github.com/toyml/toy/specs/spec"

// Result is the status every MPI call returns: MPI_SUCCESS or an error class. Only the codes
// toy names are listed; ErrorString describes any.
//
//kernelgen:enum int prefix=MPI_
type Result int32

const (
	ResultSuccess    Result = 0
	ResultErrBuffer  Result = 1
	ResultErrCount   Result = 2
	ResultErrType    Result = 3
	ResultErrComm    Result = 5
	ResultErrRoot    Result = 8
	ResultErrOp      Result = 10
	ResultErrArg     Result = 13
	ResultErrUnknown Result = 14
	ResultErrOther   Result = 16
	ResultErrIntern  Result = 17
)

// ThreadLevel is the thread support MPI_Init_thread asks for and reports: SINGLE (one
// thread), FUNNELED (only the thread that initialized calls MPI), SERIALIZED (any thread, one
// at a time) or MULTIPLE (any thread, concurrently).
//
//kernelgen:enum int prefix=MPI_THREAD_
type ThreadLevel int32

const (
	ThreadLevelSingle     ThreadLevel = 0
	ThreadLevelFunneled   ThreadLevel = 1
	ThreadLevelSerialized ThreadLevel = 2
	ThreadLevelMultiple   ThreadLevel = 3
)

// Limit is a size the header fixes: the longest error or library version string a buffer
// must hold (the terminating NUL included).
//
//kernelgen:enum int prefix=MPI_MAX_
type Limit int32

const (
	LimitErrorString          Limit = 256
	LimitLibraryVersionString Limit = 256
)

// Comm is a communicator (MPI_Comm): a group of processes that talk to each other.
//
//kernelgen:handle MPI_Comm = struct ompi_communicator_t
type Comm struct{}

// Datatype is the element type of a buffer (MPI_Datatype).
//
//kernelgen:handle MPI_Datatype = struct ompi_datatype_t
type Datatype struct{}

// Op is a reduction operation (MPI_Op).
//
//kernelgen:handle MPI_Op = struct ompi_op_t
type Op struct{}

// Errhandler says what a communicator does when a call fails (MPI_Errhandler).
//
//kernelgen:handle MPI_Errhandler = struct ompi_errhandler_t
type Errhandler struct{}

// Predefined are Open MPI's predefined handles: each is the address of an object libmpi
// exports, which mpi.h's macro casts to the handle type; and MPI_IN_PLACE, a constant address.
//
//kernelgen:data prefix=ompi_mpi_
type Predefined interface {
	// CommWorld is the communicator of every process of the job.
	//kernelgen:macro MPI_COMM_WORLD
	CommWorld() Comm
	// Float is C's float (IEEE-754 binary32).
	//kernelgen:macro MPI_FLOAT
	Float() Datatype
	// Double is C's double (IEEE-754 binary64).
	//kernelgen:macro MPI_DOUBLE
	Double() Datatype
	// Byte is an uninterpreted byte.
	//kernelgen:macro MPI_BYTE
	Byte() Datatype
	// OpSum adds.
	//kernelgen:macro MPI_SUM
	OpSum() Op
	// OpMax takes the maximum.
	//kernelgen:macro MPI_MAX
	OpMax() Op
	// OpMin takes the minimum.
	//kernelgen:macro MPI_MIN
	OpMin() Op
	// ErrorsReturn makes a failed call return its error code instead of aborting the job.
	//kernelgen:macro MPI_ERRORS_RETURN
	ErrorsReturn() Errhandler
	// InPlace, passed as an allreduce's send buffer, makes the receive buffer both the input
	// and the result: no second buffer, no copy. It is no object but the constant address 1.
	//kernelgen:macro MPI_IN_PLACE value=1
	InPlace() Ptr
}

// Funcs are the MPI calls toy binds. Counts are C ints: a buffer of more than 2³¹−1 elements
// must be sent in parts.
//
//kernelgen:functions prefix=MPI_
type Funcs interface {
	// InitThread initializes MPI, asking for the thread level required and writing the level
	// provided. argc and argv may be nil (MPI-2): toy passes them so.
	//kernelgen:c MPI_Init_thread
	//kernelgen:ctype argc int *
	//kernelgen:ctype argv char ***
	InitThread(argc, argv Ptr, required ThreadLevel, provided *ThreadLevel) Result
	// Initialized writes whether InitThread has been called (1) or not (0).
	//kernelgen:c MPI_Initialized
	Initialized(flag *Int) Result
	// Finalized writes whether Finalize has been called.
	//kernelgen:c MPI_Finalized
	Finalized(flag *Int) Result
	// GetLibraryVersion writes the library's version text into version (at least
	// LimitLibraryVersionString bytes) and its length into length.
	//kernelgen:c MPI_Get_library_version
	GetLibraryVersion(version []Char, length *Int) Result
	// CommRank writes the calling process's rank in comm.
	//kernelgen:c MPI_Comm_rank
	CommRank(comm Comm, rank *Int) Result
	// CommSize writes the number of processes in comm.
	//kernelgen:c MPI_Comm_size
	CommSize(comm Comm, size *Int) Result
	// CommSetErrhandler sets what comm does when a call on it fails.
	//kernelgen:c MPI_Comm_set_errhandler
	CommSetErrhandler(comm Comm, handler Errhandler) Result
	// Allreduce combines count elements of sendbuf from every process of comm with op and
	// writes the result into every process's recvbuf (the buffers must not overlap); with
	// sendbuf InPlace(), recvbuf is the input too.
	//kernelgen:c MPI_Allreduce
	Allreduce(sendbuf Const[Ptr], recvbuf Ptr, count Int, datatype Datatype, op Op, comm Comm) Result
	// Bcast copies count elements of buffer from process root to every other process of comm.
	//kernelgen:c MPI_Bcast
	Bcast(buffer Ptr, count Int, datatype Datatype, root Int, comm Comm) Result
	// Barrier returns when every process of comm has called it.
	//kernelgen:c MPI_Barrier
	Barrier(comm Comm) Result
	// Abort ends every process of comm's job, with errorcode as their exit status where the
	// launcher allows.
	//kernelgen:c MPI_Abort
	Abort(comm Comm, errorcode Int) Result
	// Finalize ends MPI in this process; every process must call it before exiting.
	//kernelgen:c MPI_Finalize
	Finalize() Result
	// ErrorString writes the description of an error code into text (at least
	// LimitErrorString bytes) and its length into length.
	//kernelgen:c MPI_Error_string
	ErrorString(code Result, text []Char, length *Int) Result
}
