//===- UnrollMpi.cpp - libunroll_mpi.so: the MPI calls of unroll-run ------===//
//
// The only code that links MPI. unroll-run opens it when a launcher (mpirun,
// srun) started it as one of several ranks (tooling/Distributed.cpp); its
// ABI is MpiPlugin.h.
//
//===----------------------------------------------------------------------===//
#include "unroll/tooling/MpiPlugin.h"

#include <mpi.h>

#include <climits>
#include <cstring>
#include <ctime>

namespace {
/// MPI counts are ints: longer buffers go in pieces of at most 2^30.
constexpr int64_t kPiece = int64_t(1) << 30;
} // namespace

extern "C" {

#define UNROLL_MPI_EXPORT __attribute__((visibility("default")))

UNROLL_MPI_EXPORT int unroll_mpi_init(int *rank, int *size, int *localRank, int *localSize,
                                      int *threadMultiple) {
  int provided = MPI_THREAD_SINGLE;
  int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  if (rc != MPI_SUCCESS)
    return rc;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  *threadMultiple = provided >= MPI_THREAD_MULTIPLE;
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, rank)) != MPI_SUCCESS ||
      (rc = MPI_Comm_size(MPI_COMM_WORLD, size)) != MPI_SUCCESS)
    return rc;
  MPI_Comm node;
  if ((rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, *rank, MPI_INFO_NULL,
                                &node)) != MPI_SUCCESS)
    return rc;
  MPI_Comm_rank(node, localRank);
  MPI_Comm_size(node, localSize);
  MPI_Comm_free(&node);
  return MPI_SUCCESS;
}

UNROLL_MPI_EXPORT int unroll_mpi_allreduce_sum_f64(double *buf, int64_t n) {
  for (int64_t at = 0; at < n; at += kPiece) {
    int count = static_cast<int>(n - at < kPiece ? n - at : kPiece);
    if (int rc = MPI_Allreduce(MPI_IN_PLACE, buf + at, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD))
      return rc;
  }
  return MPI_SUCCESS;
}

UNROLL_MPI_EXPORT int unroll_mpi_bcast(void *buf, int64_t bytes, int root) {
  for (int64_t at = 0; at < bytes; at += kPiece) {
    int count = static_cast<int>(bytes - at < kPiece ? bytes - at : kPiece);
    if (int rc = MPI_Bcast(static_cast<char *>(buf) + at, count, MPI_BYTE, root, MPI_COMM_WORLD))
      return rc;
  }
  return MPI_SUCCESS;
}

UNROLL_MPI_EXPORT int unroll_mpi_allgather(const void *send, int64_t bytes, void *recv) {
  if (bytes > INT_MAX)
    return MPI_ERR_COUNT;
  return MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes),
                       MPI_BYTE, MPI_COMM_WORLD);
}

UNROLL_MPI_EXPORT int unroll_mpi_barrier(void) {
  MPI_Request req;
  if (int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req))
    return rc;
  for (;;) {
    int done = 0;
    if (int rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE))
      return rc;
    if (done)
      return MPI_SUCCESS;
    timespec ts{0, 2000000}; // 2 ms
    nanosleep(&ts, nullptr);
  }
}

UNROLL_MPI_EXPORT void unroll_mpi_abort(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

UNROLL_MPI_EXPORT int unroll_mpi_finalize(void) { return MPI_Finalize(); }

UNROLL_MPI_EXPORT const char *unroll_mpi_library(void) {
  static char text[MPI_MAX_LIBRARY_VERSION_STRING + 1];
  int len = 0;
  MPI_Get_library_version(text, &len);
  text[len < 0 ? 0 : len] = 0;
  if (char *nl = strchr(text, '\n'))
    *nl = 0;
  if (char *comma = strchr(text, ','))
    *comma = 0; // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
  return text;
}

UNROLL_MPI_EXPORT const char *unroll_mpi_error(int code) {
  static char text[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
    return "unknown MPI error";
  text[len] = 0;
  return text;
}

} // extern "C"
