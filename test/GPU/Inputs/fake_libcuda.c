/* A stand-in for libcuda.so.1 that has no GPU behind it, to test how unroll's
 * GPU runtime reports driver failures on machines without a GPU.
 *   FAKE_CUDA=no-device  cuInit fails with CUDA_ERROR_NO_DEVICE (100)
 *   FAKE_CUDA=zero       cuInit succeeds, cuDeviceGetCount reports 0
 * Built with -DOLD_DRIVER it lacks cuMemAllocManaged (an old driver). */
#include <stdlib.h>
#include <string.h>

static const char *mode(void) {
  const char *m = getenv("FAKE_CUDA");
  return m ? m : "no-device";
}
int cuGetErrorName(int e, const char **s) {
  *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return 0;
}
int cuInit(unsigned f) { return strcmp(mode(), "no-device") == 0 ? 100 : 0; }
int cuDeviceGetCount(int *n) {
  *n = 0;
  return 0;
}
int cuDeviceGet(int *d, int i) { return 100; }
int cuDeviceGetName(char *s, int n, int d) { return 100; }
int cuDeviceGetAttribute(int *v, int a, int d) { return 100; }
int cuDevicePrimaryCtxRetain(void **c, int d) { return 100; }
int cuCtxSetCurrent(void *c) { return 100; }
int cuModuleLoadData(void **m, const void *p) { return 100; }
int cuModuleGetFunction(void **f, void *m, const char *n) { return 100; }
int cuLaunchKernel(void *f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e, unsigned g,
                   unsigned h, void *s, void **p, void **x) {
  return 100;
}
int cuStreamCreate(void **s, unsigned f) { return 100; }
int cuStreamSynchronize(void *s) { return 100; }
#ifndef OLD_DRIVER
int cuMemAllocManaged(unsigned long long *p, size_t n, unsigned f) { return 100; }
#endif
int cuMemFree_v2(unsigned long long p) { return 100; }
int cuMemcpy(unsigned long long d, unsigned long long s, size_t n) { return 100; }
int cuMemsetD32_v2(unsigned long long d, unsigned v, size_t n) { return 100; }
int cuMemsetD16_v2(unsigned long long d, unsigned short v, size_t n) { return 100; }
int cuCtxSynchronize(void) { return 100; }
