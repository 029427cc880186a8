//===- MpiPlugin.h - the C ABI of libunroll_mpi.so --------------*- C++ -*-===//
//
// unroll-run does not link MPI: a launcher's ranks open libunroll_mpi.so
// (tooling/mpi/UnrollMpi.cpp, built where CMake finds MPI) with dlopen, so
// the tools run on machines without an MPI library, and a build without the
// MPI packages still works. The plugin and its caller (Distributed.cpp) both
// read the declarations below. Every call returns 0 on success, else an MPI
// error code that unroll_mpi_error() describes.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_MPIPLUGIN_H
#define UNROLL_TOOLING_MPIPLUGIN_H

#include <stddef.h>
#include <stdint.h>

extern "C" {

/// MPI_Init_thread (asking for MPI_THREAD_MULTIPLE, so that a watchdog thread
/// may call unroll_mpi_abort); errors return instead of aborting. `local*`
/// count the ranks on this node (MPI_COMM_TYPE_SHARED).
int unroll_mpi_init(int *rank, int *size, int *localRank, int *localSize, int *threadMultiple);
/// In-place sum over all ranks of n doubles.
int unroll_mpi_allreduce_sum_f64(double *buf, int64_t n);
/// `bytes` bytes from `root` to every rank.
int unroll_mpi_bcast(void *buf, int64_t bytes, int root);
/// Every rank's `bytes` bytes, in rank order, into recv [size * bytes].
int unroll_mpi_allgather(const void *send, int64_t bytes, void *recv);
/// Waits until every rank arrives, sleeping between polls (a rank that
/// waits here does not take a core from one that still works).
int unroll_mpi_barrier(void);
/// MPI_Abort(MPI_COMM_WORLD, code): ends every rank of the job.
void unroll_mpi_abort(int code);
int unroll_mpi_finalize(void);
/// MPI_Get_library_version's text, first line.
const char *unroll_mpi_library(void);
/// MPI_Error_string of a code these calls returned.
const char *unroll_mpi_error(int code);
}

#endif // UNROLL_TOOLING_MPIPLUGIN_H
