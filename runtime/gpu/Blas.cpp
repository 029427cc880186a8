//===- Blas.cpp - unroll_gpu_gemm_* over cuBLASLt --------------------------===//
//
// The contractions of a GPU library (unroll-gpu-gemm) call unroll_gpu_gemm_*
// (include/unroll/runtime/GpuKernels.h), implemented here over cuBLASLt: a
// tuned library for the contraction, generated code around it, as XLA and
// TorchInductor do. cuBLASLt is opened with dlopen, like the driver, on the
// first GEMM: $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the loader path;
// a missing library is one clear error that says what to install.
//
// Per call: the strided problem becomes a column-major one (GemmPlan.h); the
// matmul descriptor, the four layouts and the algorithm cuBLASLt's heuristic
// picks are cached per shape, so a training step's repeated GEMMs cost one
// cublasLtMatmul each, on the calling thread's stream. Compute type: FP32
// (CUBLAS_COMPUTE_32F, PyTorch's default with TF32 off), FP32 with TF32
// tensor cores under UNROLL_GEMM_TF32, FP64 for f64. UNROLL_GEMM_BIAS adds
// a bias row in cuBLASLt's BIAS epilogue.
//
//===----------------------------------------------------------------------===//
#include "Driver.h"
#include "unroll/runtime/GemmPlan.h"
#include "unroll/runtime/GpuKernels.h"

#include <dlfcn.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

using namespace unroll::gpu;

namespace {

// The few cuBLASLt types and entry points used (cublasLt.h, CUDA >= 12).
using Status = int;
using Handle = void *;
using MatmulDesc = void *;
using Layout = void *;
using Preference = void *;
struct Algo {
  uint64_t data[8];
};
struct Heuristic {
  Algo algo;
  size_t workspaceSize;
  Status state;
  float wavesCount;
  int reserved[4];
};
constexpr int CUDA_R_32F = 0, CUDA_R_64F = 1;
constexpr int COMPUTE_32F = 68, COMPUTE_32F_FAST_TF32 = 77, COMPUTE_32F_FAST_16BF = 75,
              COMPUTE_64F = 70;
constexpr int DESC_TRANSA = 3, DESC_TRANSB = 4, DESC_EPILOGUE = 7, DESC_BIAS_POINTER = 8,
              DESC_EPILOGUE_AUX_POINTER = 11, DESC_EPILOGUE_AUX_LD = 12;
constexpr int32_t EPILOGUE_BIAS = 4, EPILOGUE_GELU_AUX = 160, EPILOGUE_GELU_AUX_BIAS = 164,
                  EPILOGUE_DGELU = 192;
constexpr int PREF_MAX_WORKSPACE_BYTES = 1;
constexpr int PREF_MIN_ALIGNMENT_A_BYTES = 5; // then B, C, D: 6, 7, 8
constexpr size_t kWorkspaceBytes = 32u << 20;

struct Lt {
  Status (*create)(Handle *);
  Status (*descCreate)(MatmulDesc *, int, int);
  Status (*descSetAttribute)(MatmulDesc, int, const void *, size_t);
  Status (*layoutCreate)(Layout *, int, uint64_t, uint64_t, int64_t);
  Status (*prefCreate)(Preference *);
  Status (*prefSetAttribute)(Preference, int, const void *, size_t);
  Status (*heuristic)(Handle, MatmulDesc, Layout, Layout, Layout, Layout, Preference, int,
                      Heuristic *, int *);
  Status (*matmul)(Handle, MatmulDesc, const void *, const void *, Layout, const void *, Layout,
                   const void *, const void *, Layout, void *, Layout, const Algo *, void *, size_t,
                   CUstream);
};

std::mutex gMutex;
Lt gLt;
Handle gHandle = nullptr;
void *gWorkspace = nullptr;
Preference gPreference = nullptr;

[[noreturn]] void fail(const char *what, Status s) {
  fprintf(stderr, "unroll GPU runtime: error: cuBLASLt %s failed (status %d)\n", what, s);
  exit(70);
}

void *openLibrary() {
  std::string dirs[3];
  if (const char *home = getenv("CUDA_HOME"); home && *home)
    dirs[0] = std::string(home) + "/lib64/";
  dirs[1] = "/usr/local/cuda/lib64/";
  std::string tried;
  for (const std::string &dir : dirs)
    for (const char *name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
      std::string path = dir + name;
      if (void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL))
        return lib;
      if (!dir.empty() || std::string(name) == "libcublasLt.so")
        tried += (tried.empty() ? "" : ", ") + path;
    }
  fprintf(stderr,
          "unroll GPU runtime: error: cuBLASLt (libcublasLt.so.13 or .12), which GPU libraries "
          "use for their matrix products, cannot be loaded (tried %s). Install the CUDA "
          "toolkit's cuBLAS (e.g. the libcublas-13 package) or set CUDA_HOME to a toolkit "
          "that has lib64/libcublasLt.so.\n",
          tried.c_str());
  exit(70);
}

/// Opens cuBLASLt and creates the handle, workspace and preference once.
void initLocked() {
  if (gHandle)
    return;
  void *lib = openLibrary();
  auto load = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn) {
      fprintf(stderr, "unroll GPU runtime: error: libcublasLt lacks %s (too old?)\n", name);
      exit(70);
    }
  };
  load(gLt.create, "cublasLtCreate");
  load(gLt.descCreate, "cublasLtMatmulDescCreate");
  load(gLt.descSetAttribute, "cublasLtMatmulDescSetAttribute");
  load(gLt.layoutCreate, "cublasLtMatrixLayoutCreate");
  load(gLt.prefCreate, "cublasLtMatmulPreferenceCreate");
  load(gLt.prefSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  load(gLt.heuristic, "cublasLtMatmulAlgoGetHeuristic");
  load(gLt.matmul, "cublasLtMatmul");
  Handle h;
  if (Status s = gLt.create(&h))
    fail("cublasLtCreate", s);
  gWorkspace = deviceAlloc(kWorkspaceBytes); // held for the life of the process
  if (Status s = gLt.prefCreate(&gPreference))
    fail("cublasLtMatmulPreferenceCreate", s);
  size_t ws = kWorkspaceBytes;
  if (Status s = gLt.prefSetAttribute(gPreference, PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws))
    fail("cublasLtMatmulPreferenceSetAttribute", s);
  gHandle = h;
}

/// The GELU epilogue's aux matrix (the pre-activation) and its leading
/// dimension.
void setAux(MatmulDesc desc, const void *aux, int64_t ld) {
  if (Status s = gLt.descSetAttribute(desc, DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux))
    fail("cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)", s);
  if (Status s = gLt.descSetAttribute(desc, DESC_EPILOGUE_AUX_LD, &ld, sizeof ld))
    fail("cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)", s);
}

/// One shape's descriptors and algorithm.
struct Prepared {
  MatmulDesc desc;
  Layout x, y, c;
  Algo algo;
};
using Key = std::tuple<bool, int64_t, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int64_t, std::array<uint32_t, 4>>;
std::map<Key, Prepared> gPrepared;

/// The alignment of `p` in bytes that cuBLASLt's heuristic may assume: the
/// largest power of two dividing the address, at most 256 (its default
/// assumption). An algorithm chosen for 256-byte operands refuses less
/// aligned ones with NOT_SUPPORTED (status 15): an f64 model's weights at
/// odd offsets in the flat parameter vector, seen on an H200.
uint32_t alignmentOf(const void *p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && a % align != 0)
    align /= 2;
  return align;
}

/// `aux`: the first call's aux matrix (GELU_AUX), whose alignment the
/// heuristic assumes. `align`: the operands' alignments (X, Y, C, D), part of
/// the key, since the algorithm depends on them.
const Prepared &prepare(bool f32, int64_t flags, const GemmPlan &p, const void *aux,
                        const std::array<uint32_t, 4> &align) {
  Key key{f32,   flags, p.transX, p.transY, p.m,     p.n,     p.k,  p.ldx,
          p.ldy, p.ldc, p.rowsX,  p.colsX,  p.rowsY, p.colsY, align};
  auto it = gPrepared.find(key);
  if (it != gPrepared.end())
    return it->second;
  int type = f32 ? CUDA_R_32F : CUDA_R_64F;
  int compute = !f32                         ? COMPUTE_64F
                : (flags & UNROLL_GEMM_TF32) ? COMPUTE_32F_FAST_TF32
                : (flags & UNROLL_GEMM_BF16) ? COMPUTE_32F_FAST_16BF
                                             : COMPUTE_32F;
  Prepared r;
  if (Status s = gLt.descCreate(&r.desc, compute, type))
    fail("cublasLtMatmulDescCreate", s);
  int32_t tx = p.transX, ty = p.transY;
  if (Status s = gLt.descSetAttribute(r.desc, DESC_TRANSA, &tx, sizeof tx))
    fail("cublasLtMatmulDescSetAttribute(TRANSA)", s);
  if (Status s = gLt.descSetAttribute(r.desc, DESC_TRANSB, &ty, sizeof ty))
    fail("cublasLtMatmulDescSetAttribute(TRANSB)", s);
  if (flags & (UNROLL_GEMM_BIAS | UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU)) {
    // D = op(X)·op(Y) + bias broadcast along D's columns: D's rows are C's
    // columns (C row-major: the plan swaps), so bias[n] as cuBLASLt wants.
    // With GELU_AUX the pre-activation goes to the aux matrix (our C).
    // With DGELU the aux matrix (our D) is GELU's input, read.
    int32_t epilogue = (flags & UNROLL_GEMM_DGELU)       ? EPILOGUE_DGELU
                       : !(flags & UNROLL_GEMM_GELU_AUX) ? EPILOGUE_BIAS
                       : (flags & UNROLL_GEMM_BIAS)      ? EPILOGUE_GELU_AUX_BIAS
                                                         : EPILOGUE_GELU_AUX;
    if (Status s = gLt.descSetAttribute(r.desc, DESC_EPILOGUE, &epilogue, sizeof epilogue))
      fail("cublasLtMatmulDescSetAttribute(EPILOGUE)", s);
  }
  if (flags & (UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU))
    setAux(r.desc, aux, p.ldc);
  if (Status s = gLt.layoutCreate(&r.x, type, p.rowsX, p.colsX, p.ldx))
    fail("cublasLtMatrixLayoutCreate(A)", s);
  if (Status s = gLt.layoutCreate(&r.y, type, p.rowsY, p.colsY, p.ldy))
    fail("cublasLtMatrixLayoutCreate(B)", s);
  if (Status s = gLt.layoutCreate(&r.c, type, p.m, p.n, p.ldc))
    fail("cublasLtMatrixLayoutCreate(C)", s);
  for (int i = 0; i < 4; ++i)
    if (Status s = gLt.prefSetAttribute(gPreference, PREF_MIN_ALIGNMENT_A_BYTES + i, &align[i],
                                        sizeof align[i]))
      fail("cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT)", s);
  Heuristic h[1];
  int found = 0;
  Status s = gLt.heuristic(gHandle, r.desc, r.x, r.y, r.c, r.c, gPreference, 1, h, &found);
  if (s || found == 0) {
    fprintf(stderr,
            "unroll GPU runtime: error: cuBLASLt has no algorithm for a %lld x %lld x %lld "
            "%s GEMM (status %d)\n",
            (long long)p.m, (long long)p.n, (long long)p.k, f32 ? "f32" : "f64", s);
    exit(70);
  }
  r.algo = h[0].algo;
  return gPrepared.emplace(key, r).first->second;
}

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk, const T *B,
          int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, int64_t accumulate,
          int64_t flags, const T *bias, T *D) {
  if (M == 0 || N == 0)
    return;
  GemmPlan p = planGemm(M, N, K, sAm, sAk, sBk, sBn, sCm, sCn, flags & UNROLL_GEMM_BIAS);
  if ((flags & UNROLL_GEMM_BIAS) && (!p.swap || accumulate || !bias)) {
    // unroll-gpu-gemm only folds a bias into row-major, overwritten C.
    fprintf(stderr, "unroll GPU runtime: error: unroll_gpu_gemm with a bias needs a row-major C "
                    "that it overwrites\n");
    exit(70);
  }
  if ((flags & (UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU)) &&
      (!p.swap || accumulate || !D || p.ldc % 8 != 0 ||
       ((flags & UNROLL_GEMM_DGELU) && (flags & (UNROLL_GEMM_BIAS | UNROLL_GEMM_GELU_AUX))))) {
    // unroll-gpu-gemm folds GELU only into row-major, overwritten C whose
    // row stride cuBLASLt accepts as the aux matrix's (a multiple of 8).
    fprintf(stderr, "unroll GPU runtime: error: unroll_gpu_gemm with GELU or its gradient needs a "
                    "row-major C that it overwrites, with a row stride divisible by 8, and D "
                    "(and no bias with the gradient)\n");
    exit(70);
  }
  if (!p.ok) {
    // unroll-gpu-gemm only emits calls with a unit stride per operand.
    fprintf(stderr,
            "unroll GPU runtime: error: unroll_gpu_gemm called with strides (%lld, %lld), "
            "(%lld, %lld), (%lld, %lld) that no BLAS layout expresses\n",
            (long long)sAm, (long long)sAk, (long long)sBk, (long long)sBn, (long long)sCm,
            (long long)sCn);
    exit(70);
  }
  CUstream stream = threadStream();
  const T alpha = 1, beta = accumulate ? 1 : 0;
  std::lock_guard<std::mutex> lock(gMutex);
  initLocked();
  T *out = (flags & UNROLL_GEMM_GELU_AUX) ? D : C;
  const T *x = p.swap ? B : A, *y = p.swap ? A : B;
  std::array<uint32_t, 4> align{alignmentOf(x), alignmentOf(y), alignmentOf(C), alignmentOf(out)};
  const Prepared &r = prepare(sizeof(T) == 4, flags, p, (flags & UNROLL_GEMM_DGELU) ? D : C, align);
  if (flags & UNROLL_GEMM_BIAS)
    if (Status s = gLt.descSetAttribute(r.desc, DESC_BIAS_POINTER, &bias, sizeof bias))
      fail("cublasLtMatmulDescSetAttribute(BIAS_POINTER)", s);
  if (flags & UNROLL_GEMM_GELU_AUX) // cuBLASLt's D is GELU's output; the aux matrix (C) its input
    setAux(r.desc, C, p.ldc);
  if (flags & UNROLL_GEMM_DGELU) // the aux matrix (our D): GELU's input
    setAux(r.desc, D, p.ldc);
  int token = profiling() ? profileBegin(stream) : -1;
  if (Status s = gLt.matmul(gHandle, r.desc, &alpha, x, r.x, y, r.y, &beta, C, r.c, out, r.c,
                            &r.algo, gWorkspace, kWorkspaceBytes, stream)) {
    fprintf(stderr,
            "unroll GPU runtime: error: cuBLASLt cublasLtMatmul failed (status %d) for a %lld x "
            "%lld x %lld %s GEMM, flags %lld, operands aligned to %u, %u, %u, %u bytes\n",
            s, (long long)M, (long long)N, (long long)K, sizeof(T) == 4 ? "f32" : "f64",
            (long long)flags, align[0], align[1], align[2], align[3]);
    exit(70);
  }
  if (token >= 0) {
    char name[96];
    snprintf(name, sizeof name, "cublasLt %s %lldx%lldx%lld%s%s", sizeof(T) == 4 ? "f32" : "f64",
             (long long)M, (long long)N, (long long)K,
             (flags & UNROLL_GEMM_TF32)   ? " tf32"
             : (flags & UNROLL_GEMM_BF16) ? " bf16"
                                          : "",
             (flags & UNROLL_GEMM_GELU_AUX) ? " gelu"
             : (flags & UNROLL_GEMM_DGELU)  ? " dgelu"
                                            : "");
    profileEnd(token, stream, name);
  }
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) void
unroll_gpu_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                    const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm, int64_t sCn,
                    int64_t accumulate, int64_t flags, const float *bias, float *D) {
  gemm(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate, flags, bias, D);
}

__attribute__((visibility("default"))) void
unroll_gpu_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                    const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm, int64_t sCn,
                    int64_t accumulate, int64_t flags, const double *bias, double *D) {
  gemm(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, accumulate, flags, bias, D);
}

} // extern "C"
