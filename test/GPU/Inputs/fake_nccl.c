/* A stand-in for libnccl.so.2 next to the recording fake libcuda
 * (fake_libcuda.c): every call succeeds and is appended to FAKE_CUDA_LOG, so
 * a test can see what unroll-run asks of NCCL in a data-parallel job of GPU
 * ranks without GPUs: the communicator (ranks, unique id), and each
 * all-reduce's element count, type, operation, whether it works in place and
 * whether its buffers are device memory. Nothing is reduced ("device memory"
 * is PROT_NONE). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static void *cuda(void) { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD); }

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
  void *lib = cuda();
  void (*vlog)(const char *, va_list) =
      lib ? (void (*)(const char *, va_list))dlsym(lib, "fake_cuda_vlog") : NULL;
  if (!vlog)
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

static int isDevice(const void *p) {
  void *lib = cuda();
  int (*is)(const void *) = lib ? (int (*)(const void *))dlsym(lib, "fake_cuda_is_device") : NULL;
  return is ? is(p) : -1;
}

typedef struct {
  char internal[128];
} ncclUniqueId;
struct comm {
  int nranks, rank;
};
static struct comm comms[4];
static int ncomms;

int ncclGetVersion(int *v) {
  *v = 22800;
  return 0;
}
const char *ncclGetErrorString(int r) { return r ? "fake NCCL error" : "no error"; }
int ncclGetUniqueId(ncclUniqueId *id) {
  memset(id, 0, sizeof *id);
  strcpy(id->internal, "fake-nccl-id");
  logf_("ncclGetUniqueId");
  return 0;
}
int ncclCommInitRank(void **comm, int nranks, ncclUniqueId id, int rank) {
  if (ncomms == 4)
    return 1;
  comms[ncomms].nranks = nranks;
  comms[ncomms].rank = rank;
  *comm = &comms[ncomms++];
  logf_("ncclCommInitRank nranks %d rank %d id %s", nranks, rank, id.internal);
  return 0;
}
int ncclAllReduce(const void *send, void *recv, size_t count, int type, int op, void *comm,
                  void *stream) {
  struct comm *c = comm;
  logf_("ncclAllReduce count %zu type %d op %d inplace %d device %d %d nranks %d stream %p", count,
        type, op, send == recv, isDevice(send), isDevice(recv), c->nranks, stream);
  return 0;
}
int ncclCommDestroy(void *comm) {
  logf_("ncclCommDestroy");
  return 0;
}
int ncclCommAbort(void *comm) {
  logf_("ncclCommAbort");
  return 0;
}
