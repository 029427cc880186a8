/* A stand-in for libcuda.so.1 with no GPU behind it.
 *
 *   FAKE_CUDA=no-device  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
 *   FAKE_CUDA=zero       cuInit succeeds, cuDeviceGetCount reports 0
 *   FAKE_CUDA=record     every call succeeds and is appended, one line each,
 *                        to the file FAKE_CUDA_LOG: a device that runs
 *                        nothing, to check what the runtime asks of the
 *                        driver (launches, waits, allocations, copies).
 *                        "Device memory" is mapped PROT_NONE, so host code
 *                        that touches a device buffer dies with SIGSEGV;
 *                        copies to the host deliver zeros. While a stream
 *                        is captured into a graph, every call is logged as
 *                        "captured:<call>", and nothing runs.
 *   FAKE_CUDA_DEVICES=N  (with record) the driver reports N devices (default 1)
 *
 * Built with -DOLD_DRIVER it lacks cuMemAlloc_v2 (an old driver). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef unsigned long long dptr;

static const char *mode(void) {
  const char *m = getenv("FAKE_CUDA");
  return m ? m : "no-device";
}
static int recording(void) { return strcmp(mode(), "record") == 0; }
static int fail(void) { return recording() ? 0 : 100; }

static int capturing;

/* One log line; calls made while a stream is captured are marked. Exported
 * for the fake cuBLASLt (fake_cublaslt.c), which logs through it. */
void fake_cuda_vlog(const char *fmt, va_list ap) {
  const char *path = getenv("FAKE_CUDA_LOG");
  if (!path)
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  if (capturing)
    fputs("captured:", f);
  vfprintf(f, fmt, ap);
  fputc('\n', f);
  fclose(f);
}

static void logf_(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fake_cuda_vlog(fmt, ap);
  va_end(ap);
}

/* Device allocations: PROT_NONE mappings, remembered to tell device from
 * host pointers. */
static struct {
  char *p;
  size_t n;
} regions[1 << 16];
static int nregions;
static int isDevice(dptr p) {
  for (int i = 0; i < nregions; ++i)
    if ((char *)p >= regions[i].p && (char *)p < regions[i].p + regions[i].n)
      return 1;
  return 0;
}
/* For the fake NCCL (fake_nccl.c): whether a pointer is "device memory". */
int fake_cuda_is_device(const void *p) { return isDevice((dptr)p); }

int cuGetErrorName(int e, const char **s) {
  *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuInit(unsigned f) { return strcmp(mode(), "no-device") == 0 ? 100 : 0; }
int cuDeviceGetCount(int *n) {
  const char *env = getenv("FAKE_CUDA_DEVICES");
  *n = recording() ? (env ? atoi(env) : 1) : 0;
  return 0;
}
int cuDeviceGet(int *d, int i) {
  *d = i;
  logf_("cuDeviceGet %d", i);
  return fail();
}
int cuDeviceGetName(char *s, int n, int d) {
  snprintf(s, n, "fake GPU");
  return fail();
}
int cuDeviceGetAttribute(int *v, int a, int d) {
  *v = a == 75 ? 9 : 0;
  return fail();
}
int cuDevicePrimaryCtxRetain(void **c, int d) {
  *c = (void *)1;
  return fail();
}
int cuCtxSetCurrent(void *c) { return fail(); }
int cuCtxSynchronize(void) {
  logf_("cuCtxSynchronize");
  return fail();
}
int cuModuleLoadData(void **m, const void *p) {
  *m = (void *)p;
  logf_("cuModuleLoadData");
  return fail();
}
int cuModuleGetFunction(void **f, void *m, const char *n) {
  *f = strdup(n);
  return fail();
}
int cuFuncSetAttribute(void *f, int a, int v) {
  logf_("cuFuncSetAttribute %s %d %d", (const char *)f, a, v);
  return fail();
}
int cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                   unsigned h, void *s, void **p, void **x) {
  logf_("cuLaunchKernel %s", (const char *)f);
  return fail();
}
int cuStreamCreate(void **s, unsigned f) {
  static int n;
  *s = (void *)(long)(0x100 + n++);
  logf_("cuStreamCreate");
  return fail();
}
int cuStreamSynchronize(void *s) {
  logf_("cuStreamSynchronize");
  return fail();
}
#ifndef OLD_DRIVER
int cuMemAlloc_v2(dptr *p, size_t n) {
  if (!recording())
    return 100;
  size_t len = (n + 4095) / 4096 * 4096;
  char *m = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED || nregions == (int)(sizeof regions / sizeof regions[0]))
    return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
  regions[nregions].p = m;
  regions[nregions++].n = len;
  *p = (dptr)m;
  logf_("cuMemAlloc %zu", n);
  return 0;
}
#endif
int cuMemAllocManaged(dptr *p, size_t n, unsigned f) {
  logf_("cuMemAllocManaged %zu", n);
  return 100;
}
int cuMemFree_v2(dptr p) {
  logf_("cuMemFree");
  return fail();
}
int cuMemGetInfo_v2(size_t *f, size_t *t) {
  *f = 1ull << 30;
  *t = 1ull << 31;
  return fail();
}
/* Host -> device reads the source (a bad host pointer faults here); device
 * -> host writes zeros. */
static void copy(dptr d, dptr s, size_t n) {
  if (isDevice(d) && !isDevice(s)) {
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += ((unsigned char *)s)[i];
    (void)sum;
  } else if (!isDevice(d)) {
    memset((void *)d, 0, n);
  }
}
int cuMemcpy(dptr d, dptr s, size_t n) {
  logf_("cuMemcpy %s%s %zu", isDevice(s) ? "D" : "H", isDevice(d) ? "D" : "H", n);
  if (recording())
    copy(d, s, n);
  return fail();
}
int cuMemcpyAsync(dptr d, dptr s, size_t n, void *st) {
  logf_("cuMemcpyAsync %s%s %zu", isDevice(s) ? "D" : "H", isDevice(d) ? "D" : "H", n);
  if (recording())
    copy(d, s, n);
  return fail();
}
int cuMemsetD32Async(dptr d, unsigned v, size_t n, void *s) {
  logf_("cuMemsetD32Async");
  return fail();
}
int cuMemsetD16Async(dptr d, unsigned short v, size_t n, void *s) { return fail(); }
int cuEventCreate(void **e, unsigned f) {
  static long n;
  *e = (void *)(0x1000 + n++);
  return fail();
}
int cuEventRecord(void *e, void *s) { return fail(); }
int cuEventElapsedTime_v2(float *ms, void *a, void *b) {
  *ms = 0.001f;
  return fail();
}
int cuStreamBeginCapture_v2(void *s, int mode) {
  logf_("cuStreamBeginCapture mode %d", mode);
  capturing = 1;
  return fail();
}
int cuStreamEndCapture(void *s, void **g) {
  capturing = 0;
  *g = (void *)0x2000;
  logf_("cuStreamEndCapture");
  return fail();
}
int cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long f) {
  *e = (void *)0x3000;
  logf_("cuGraphInstantiate");
  return fail();
}
int cuGraphLaunch(void *e, void *s) {
  logf_("cuGraphLaunch");
  return fail();
}
int cuGraphExecDestroy(void *e) {
  logf_("cuGraphExecDestroy");
  return fail();
}
int cuGraphDestroy(void *g) { return fail(); }
