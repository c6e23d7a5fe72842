// fakenccl.c is a stand-in for NCCL's libnccl.so.2 for mpi's tests on machines without GPUs:
// it takes "device" addresses to be host memory and does its collectives with Open MPI, which
// the test process has already loaded. It checks what a real NCCL would rely on: every rank
// joins with rank 0's unique id, its own MPI rank and the job's size, and reduces float32 sums.
// Built by the test with mpicc; written for toy, declaring NCCL's interface as toy's bindings
// call it.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t; // ncclSuccess 0, ncclInvalidArgument 4, ncclInvalidUsage 5, ncclSystemError 2
struct ncclComm { int rank, nranks; };
typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;

ncclResult_t ncclGetVersion(int *version) { *version = 23007; return 0; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(rand() ^ (i * 31));
	memcpy(id->internal, "fakenccl", 8);
	return 0;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	int size, me;
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	if (nranks != size || rank != me || memcmp(id.internal, "fakenccl", 8) != 0) return 4;
	// Every rank must hold rank 0's id: compare it with rank 0's copy.
	ncclUniqueId root = id;
	MPI_Bcast(root.internal, 128, MPI_BYTE, 0, MPI_COMM_WORLD);
	int differs = memcmp(root.internal, id.internal, 128) != 0, any = 0;
	MPI_Allreduce(&differs, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (any) return 4;
	*comm = malloc(sizeof(struct ncclComm));
	(*comm)->rank = rank;
	(*comm)->nranks = nranks;
	return 0;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { free(comm); return 0; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int datatype, int op, ncclComm_t comm, cudaStream_t stream) {
	if (comm == NULL || datatype != 7 /* ncclFloat32 */ || op != 0 /* ncclSum */ || stream != NULL || count > 0x7fffffff) return 4;
	const void *from = send == recv ? MPI_IN_PLACE : send;
	return MPI_Allreduce(from, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 2;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int datatype, int root, ncclComm_t comm, cudaStream_t stream) {
	if (comm == NULL || datatype != 7 || count > 0x7fffffff / 4) return 4;
	if (comm->rank == root && send != recv) memcpy(recv, send, count * 4);
	return MPI_Bcast(recv, (int)count, MPI_FLOAT, root, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : 2;
}

const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case 0: return "no error";
	case 2: return "unhandled system error";
	case 4: return "invalid argument";
	}
	return "unknown result code";
}
