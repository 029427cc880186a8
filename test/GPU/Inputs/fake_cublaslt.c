/* A stand-in for libcublasLt.so.13 next to the recording fake libcuda
 * (fake_libcuda.c): every call succeeds and is appended to FAKE_CUDA_LOG,
 * matmuls with their column-major problem (m n k, transposes, leading
 * dimensions), so a test can see what the GPU runtime asks of cuBLASLt. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stdarg.h>

/* Logs through the fake driver's fake_cuda_vlog (one log, captured calls
 * marked). The driver is opened RTLD_LOCAL: ask its handle, not the global
 * scope. */
static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  void (*vlog)(const char *, va_list) =
      cuda ? (void (*)(const char *, va_list))dlsym(cuda, "fake_cuda_vlog") : NULL;
  if (!vlog)
    return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

struct layout {
  uint64_t rows, cols;
  int64_t ld;
};
struct desc {
  int compute, transa, transb, epilogue;
};

int cublasLtCreate(void **h) {
  *h = (void *)1;
  logf_("cublasLtCreate");
  return 0;
}
int cublasLtMatmulDescCreate(void **d, int compute, int scale) {
  struct desc *x = calloc(1, sizeof *x);
  x->compute = compute;
  *d = x;
  logf_("cublasLtMatmulDescCreate compute %d", compute);
  return 0;
}
int cublasLtMatmulDescSetAttribute(void *d, int attr, const void *buf, size_t n) {
  struct desc *x = d;
  if (attr == 3)
    x->transa = *(const int32_t *)buf;
  if (attr == 4)
    x->transb = *(const int32_t *)buf;
  if (attr == 7)
    x->epilogue = *(const int32_t *)buf;
  return 0;
}
int cublasLtMatrixLayoutCreate(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  struct layout *x = malloc(sizeof *x);
  x->rows = rows, x->cols = cols, x->ld = ld;
  *l = x;
  return 0;
}
int cublasLtMatmulPreferenceCreate(void **p) {
  *p = (void *)1;
  return 0;
}
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t n) { return 0; }
int cublasLtMatmulAlgoGetHeuristic(void *h, void *d, void *a, void *b, void *c, void *dd, void *p,
                                   int requested, void *results, int *found) {
  memset(results, 0, 64 + 8 + 4 + 4 + 16);
  *found = 1;
  logf_("cublasLtMatmulAlgoGetHeuristic");
  return 0;
}
int cublasLtMatmul(void *h, void *d, const void *alpha, const void *A, void *Ad, const void *B,
                   void *Bd, const void *beta, const void *C, void *Cd, void *D, void *Dd,
                   const void *algo, void *ws, size_t wsBytes, void *stream) {
  struct desc *x = d;
  struct layout *a = Ad, *b = Bd, *c = Cd;
  logf_("cublasLtMatmul m %llu n %llu k %llu trans %d%d ld %lld %lld %lld compute %d beta %g "
        "epilogue %d",
        (unsigned long long)c->rows, (unsigned long long)c->cols,
        (unsigned long long)(x->transa ? a->rows : a->cols), x->transa, x->transb, (long long)a->ld,
        (long long)b->ld, (long long)c->ld, x->compute, *(const float *)beta, x->epilogue);
  return 0;
}
