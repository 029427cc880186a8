//===- GemmTiles.h - register tiles, thin kernels, epilogues ----------------===//
//
// Part of Gemm.cpp's translation unit, which includes it once (everything
// here has internal linkage). The file comment of Gemm.cpp explains the whole.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "GemmPack.h"
#include "unroll/runtime/CpuIsa.h"
#include "unroll/runtime/CpuKernels.h"

namespace {

/// The register tile: acc[MR][NR] = Σ_k a[r][k] b[k][c], then C += acc.
/// A is a k-major packed sliver (lda = 0: a[k·MR + r]) or, for row-major A,
/// the matrix itself (row r at a + r·lda, contiguous in k: no packing). V is
/// a GCC vector type of W elements; NR = 2 W. Never inlined into the
/// driver: whether GCC inlined it there changed with unrelated edits to the
/// driver, and the tile's code should not. UNROLL_K unrolls the loop over k
/// (UNROLL_K8 with AVX-512, UNROLL_K4 below): without it the loop overhead
/// holds the 8 x 32 tile to ~75% of the FMA rate.
#define NOINLINE __attribute__((noinline))
#define UNROLL_TILE(NAME, T, V, W, MR, UNROLL_K, ATTR)                                             \
  ATTR NOINLINE void NAME(int64_t kc, const T *a, int64_t lda, const T *b, T *C, int64_t sCm,      \
                          int64_t sCn, int64_t rows, int64_t cols, bool add) {                     \
    V acc[MR][2];                                                                                  \
    for (int r = 0; r < MR; ++r)                                                                   \
      acc[r][0] = acc[r][1] = V{};                                                                 \
    if (lda == 0) {                                                                                \
      UNROLL_K for (int64_t k = 0; k < kc; ++k) {                                                  \
        V b0, b1;                                                                                  \
        memcpy(&b0, b + k * 2 * W, sizeof(V));                                                     \
        memcpy(&b1, b + k * 2 * W + W, sizeof(V));                                                 \
        for (int r = 0; r < MR; ++r) {                                                             \
          V av = a[k * MR + r] - V{}; /* x - 0 folds: one broadcast load (0 + x is an add) */      \
          acc[r][0] += av * b0;                                                                    \
          acc[r][1] += av * b1;                                                                    \
        }                                                                                          \
      }                                                                                            \
    } else {                                                                                       \
      const T *rp[MR];                                                                             \
      for (int r = 0; r < MR; ++r)                                                                 \
        rp[r] = a + r * lda;                                                                       \
      UNROLL_K for (int64_t k = 0; k < kc; ++k) {                                                  \
        V b0, b1;                                                                                  \
        memcpy(&b0, b + k * 2 * W, sizeof(V));                                                     \
        memcpy(&b1, b + k * 2 * W + W, sizeof(V));                                                 \
        for (int r = 0; r < MR; ++r) {                                                             \
          V av = rp[r][k] - V{};                                                                   \
          acc[r][0] += av * b0;                                                                    \
          acc[r][1] += av * b1;                                                                    \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    if (rows == MR && cols == 2 * W && sCn == 1) {                                                 \
      for (int r = 0; r < MR; ++r) {                                                               \
        V c0 = acc[r][0], c1 = acc[r][1];                                                          \
        if (add) {                                                                                 \
          V o0, o1;                                                                                \
          memcpy(&o0, C + r * sCm, sizeof(V));                                                     \
          memcpy(&o1, C + r * sCm + W, sizeof(V));                                                 \
          c0 += o0;                                                                                \
          c1 += o1;                                                                                \
        }                                                                                          \
        memcpy(C + r * sCm, &c0, sizeof(V));                                                       \
        memcpy(C + r * sCm + W, &c1, sizeof(V));                                                   \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    T tile[MR][2 * W];                                                                             \
    memcpy(tile, acc, sizeof tile);                                                                \
    for (int64_t r = 0; r < rows; ++r)                                                             \
      for (int64_t c = 0; c < cols; ++c)                                                           \
        C[r * sCm + c * sCn] = add ? C[r * sCm + c * sCn] + tile[r][c] : tile[r][c];               \
  }

// GCC does not unroll loops at -O3 without -funroll-loops: the tiles ask.
#define UNROLL_K4 _Pragma("GCC unroll 4")
#define UNROLL_K8 _Pragma("GCC unroll 8")

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x8 __attribute__((vector_size(64)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef double f64x2 __attribute__((vector_size(16)));

#define AVX512 __attribute__((target("avx512f,fma")))
#define AVX2 __attribute__((target("avx2,fma")))
#define PLAIN

/// DEF(PREFIX<variant>, T, V, ATTR) for each precision and instruction set:
/// the kernels whose variants differ in nothing but these.
#define UNROLL_FOR_EACH_VARIANT(DEF, PREFIX) UNROLL_FOR_EACH_VARIANT_AT(DEF, PREFIX, AVX512)
/// The same with the AVX-512 variants compiled for ATTR512.
#define UNROLL_FOR_EACH_VARIANT_AT(DEF, PREFIX, ATTR512)                                           \
  DEF(PREFIX##F32Avx512, float, f32x16, ATTR512)                                                   \
  DEF(PREFIX##F32Avx2, float, f32x8, AVX2)                                                         \
  DEF(PREFIX##F32Plain, float, f32x4, PLAIN)                                                       \
  DEF(PREFIX##F64Avx512, double, f64x8, ATTR512)                                                   \
  DEF(PREFIX##F64Avx2, double, f64x4, AVX2)                                                        \
  DEF(PREFIX##F64Plain, double, f64x2, PLAIN)

UNROLL_TILE(tileF32Avx512, float, f32x16, 16, 8, UNROLL_K8, AVX512)
UNROLL_TILE(tileF32Avx2, float, f32x8, 8, 6, UNROLL_K4, AVX2)
UNROLL_TILE(tileF32Plain, float, f32x4, 4, 4, UNROLL_K4, PLAIN)
UNROLL_TILE(tileF64Avx512, double, f64x8, 8, 8, UNROLL_K8, AVX512)
UNROLL_TILE(tileF64Avx2, double, f64x4, 4, 6, UNROLL_K4, AVX2)
UNROLL_TILE(tileF64Plain, double, f64x2, 2, 4, UNROLL_K4, PLAIN)

/// Narrow products: N = W or 2 W columns with rows of B and C contiguous
/// (attention's P·V and its gradients, N = head dim). No packing at all: each
/// row of C is one or two vectors accumulated over k from B's rows. Packing
/// B for these small products cost as much as the arithmetic.
#define UNROLL_NARROW(NAME, T, V, W, ATTR)                                                         \
  ATTR void NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,            \
                 const T *B, int64_t sBk, T *C, int64_t sCm, bool add) {                           \
    constexpr int R = 8; /* rows at a time */                                                      \
    bool two = N == 2 * W;                                                                         \
    for (int64_t i = 0; i < M; i += R) {                                                           \
      int rows = int(std::min<int64_t>(R, M - i));                                                 \
      V acc[R][2];                                                                                 \
      for (int r = 0; r < R; ++r)                                                                  \
        acc[r][0] = acc[r][1] = V{};                                                               \
      for (int64_t k = 0; k < K; ++k) {                                                            \
        V b0, b1 = V{};                                                                            \
        memcpy(&b0, B + k * sBk, sizeof(V));                                                       \
        if (two)                                                                                   \
          memcpy(&b1, B + k * sBk + W, sizeof(V));                                                 \
        for (int r = 0; r < R; ++r) {                                                              \
          if (r >= rows)                                                                           \
            break;                                                                                 \
          V av = A[(i + r) * sAm + k * sAk] - V{};                                                 \
          acc[r][0] += av * b0;                                                                    \
          if (two)                                                                                 \
            acc[r][1] += av * b1;                                                                  \
        }                                                                                          \
      }                                                                                            \
      for (int r = 0; r < rows; ++r)                                                               \
        for (int h = 0; h < (two ? 2 : 1); ++h) {                                                  \
          T *c = C + (i + r) * sCm + h * W;                                                        \
          V v = acc[r][h];                                                                         \
          if (add) {                                                                               \
            V o;                                                                                   \
            memcpy(&o, c, sizeof(V));                                                              \
            v += o;                                                                                \
          }                                                                                        \
          memcpy(c, &v, sizeof(V));                                                                \
        }                                                                                          \
    }                                                                                              \
  }

UNROLL_NARROW(narrowF32Avx512, float, f32x16, 16, AVX512)
UNROLL_NARROW(narrowF32Avx2, float, f32x8, 8, AVX2)
UNROLL_NARROW(narrowF64Avx512, double, f64x8, 8, AVX512)
UNROLL_NARROW(narrowF64Avx2, double, f64x4, 4, AVX2)

/// Thin products: one of M, N, K is 1 (the model's readout y = h·w + b, its
/// gradients dh = dy wᵀ and dw = hᵀ dy). The blocked kernel would compute
/// them as whole register tiles of which one row or column counts (8-32x the
/// arithmetic; the readout ran at 4 GFLOP/s); these read each operand once.
///
/// y[i] (+)= Σ_k A[i·sAm + k·sAk] x[k·sx] for i < M (a matrix-vector
/// product): dot products along rows of A contiguous in k (four rows at a
/// time), or with columns contiguous in i, y's W·U entries in registers
/// updated by each k. Other layouts go element by element.
template <typename V, typename T>
DRIVER void gemv(int64_t M, int64_t K, const T *A, int64_t sAm, int64_t sAk, const T *x, int64_t sx,
                 T *y, int64_t sy, bool add) {
  constexpr int W = sizeof(V) / sizeof(T);
  auto put = [&](int64_t i, T v) __attribute__((always_inline)) {
    T &o = y[i * sy];
    o = add ? o + v : v;
  };
  if (sAk == 1 && sx == 1) {
    constexpr int R = 4;
    int64_t i = 0;
    for (; i + R <= M; i += R) {
      V acc[R] = {};
      int64_t k = 0;
      for (; k + W <= K; k += W) {
        V xv;
        memcpy(&xv, x + k, sizeof xv);
        for (int r = 0; r < R; ++r) {
          V av;
          memcpy(&av, A + (i + r) * sAm + k, sizeof av);
          acc[r] += av * xv;
        }
      }
      for (int r = 0; r < R; ++r) {
        T s = 0;
        for (int l = 0; l < W; ++l)
          s += acc[r][l];
        for (int64_t kk = k; kk < K; ++kk)
          s += A[(i + r) * sAm + kk] * x[kk];
        put(i + r, s);
      }
    }
    for (; i < M; ++i) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += A[i * sAm + k] * x[k];
      put(i, s);
    }
    return;
  }
  if (sAm == 1 && sy == 1) {
    constexpr int U = 4;
    int64_t i = 0;
    auto columns = [&](auto u) __attribute__((always_inline)) {
      constexpr int N = decltype(u)::value;
      V acc[N] = {};
      for (int64_t k = 0; k < K; ++k) {
        V xk = x[k * sx] - V{};
        for (int q = 0; q < N; ++q) {
          V av;
          memcpy(&av, A + i + q * W + k * sAk, sizeof av);
          acc[q] += av * xk;
        }
      }
      for (int q = 0; q < N; ++q) {
        if (add) {
          V o;
          memcpy(&o, y + i + q * W, sizeof o);
          acc[q] += o;
        }
        memcpy(y + i + q * W, &acc[q], sizeof acc[q]);
      }
    };
    for (; i + U * W <= M; i += U * W)
      columns(std::integral_constant<int, U>{});
    for (; i + W <= M; i += W)
      columns(std::integral_constant<int, 1>{});
    for (; i < M; ++i) {
      T s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += A[i + k * sAk] * x[k * sx];
      put(i, s);
    }
    return;
  }
  for (int64_t i = 0; i < M; ++i) {
    T s = 0;
    for (int64_t k = 0; k < K; ++k)
      s += A[i * sAm + k * sAk] * x[k * sx];
    put(i, s);
  }
}

/// C[i, j] (+)= a[i·sa] b[j·sb] (K = 1): rows of C contiguous in j go a
/// vector at a time.
template <typename V, typename T>
DRIVER void outer(int64_t M, int64_t N, const T *a, int64_t sa, const T *b, int64_t sb, T *C,
                  int64_t sCm, int64_t sCn, bool add) {
  constexpr int W = sizeof(V) / sizeof(T);
  for (int64_t i = 0; i < M; ++i) {
    const T ai = a[i * sa];
    T *c = C + i * sCm;
    int64_t j = 0;
    if (sCn == 1 && sb == 1)
      for (; j + W <= N; j += W) {
        V bv, o;
        memcpy(&bv, b + j, sizeof bv);
        bv *= ai;
        if (add) {
          memcpy(&o, c + j, sizeof o);
          bv += o;
        }
        memcpy(c + j, &bv, sizeof bv);
      }
    for (; j < N; ++j) {
      T &o = c[j * sCn];
      o = add ? o + ai * b[j * sb] : ai * b[j * sb];
    }
  }
}

/// Whether a product is thin (thinProduct takes it).
inline bool isThin(int64_t M, int64_t N, int64_t K) {
  return M > 0 && N > 0 && K > 0 && (M == 1 || N == 1 || K == 1);
}

/// A thin product (isThin) by gemv or outer: N = 1 is y = A x, M = 1 the
/// same for Cᵀ = Bᵀ Aᵀ.
template <typename V, typename T>
DRIVER void thinProduct(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,
                        const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn,
                        bool add) {
  if (K == 1)
    outer<V>(M, N, A, sAm, B, sBn, C, sCm, sCn, add);
  else if (N == 1)
    gemv<V>(M, K, A, sAm, sAk, B, sBk, C, sCm, add);
  else
    gemv<V>(N, K, B, sBn, sBk, A, sAk, C, sCn, add);
}

#define UNROLL_THIN(NAME, T, V, ATTR)                                                              \
  ATTR void NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk,            \
                 const T *B, int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, bool add) { \
    thinProduct<V>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, add);                           \
  }
UNROLL_FOR_EACH_VARIANT(UNROLL_THIN, thin)

/// The epilogue of unroll_gemm_ex on rows [0, rows) x columns [0, cols) of
/// a finished block of C (and D at C's strides): C += bias, then C += D, D =
/// GELU(C) or C ∘= GELU'(D), while the block is still in cache. V is the
/// instruction set's vector of T; contiguous rows go W at a time.
template <typename V, typename T>
inline __attribute__((always_inline)) void epilogueBlock(int64_t rows, int64_t cols, T *C,
                                                         int64_t sCm, int64_t sCn, int64_t flags,
                                                         const T *bias, T *D) {
  using unroll::cpu::gelu;
  using unroll::cpu::geluGrad;
  using unroll::cpu::geluGradN;
  using unroll::cpu::geluN;
  constexpr int W = sizeof(V) / sizeof(T);
  const bool addBias = flags & UNROLL_GEMM_BIAS, toD = flags & UNROLL_GEMM_GELU_AUX,
             grad = flags & UNROLL_GEMM_DGELU, addD = flags & UNROLL_GEMM_ADD_D;
  // D = C: GELU in place, the pre-activation not kept (stored once).
  const bool keepC = !(toD && D == C);
  // The lambdas are always inlined: compiled on their own they would not
  // get the caller's target attribute, and a 512-bit GCC vector would be
  // emulated with SSE2 (the AVX-512 GELU epilogue was: 13% of the paper
  // step on a Zen 4 host).
  auto one = [&](T *c, T *d, int64_t j) __attribute__((always_inline)) {
    V v{}, x{};
    v[0] = *c;
    if (addBias)
      v[0] += bias[j];
    if (addD)
      v[0] += *d;
    if (grad) {
      x[0] = *d;
      v[0] *= geluGrad(x)[0];
    }
    if (keepC)
      *c = v[0];
    if (toD)
      *d = gelu(v)[0];
  };
  for (int64_t i = 0; i < rows; ++i) {
    T *c = C + i * sCm, *d = D ? D + i * sCm : nullptr;
    int64_t j = 0;
    // U vectors at a time: GELU is a ~40-deep dependency chain per vector,
    // and independent chains side by side keep both FMA pipes busy. AVX-512
    // has the registers for 4 (~2% faster than 2; 8 no better); 4 spills on
    // AVX2.
    constexpr int U = sizeof(V) == 64 ? 4 : 2;
    auto vectors = [&](auto u) __attribute__((always_inline)) {
      constexpr int N = decltype(u)::value;
      V v[N], x[N];
      for (int q = 0; q < N; ++q)
        memcpy(&v[q], c + j + q * W, sizeof(V));
      if (addBias)
        for (int q = 0; q < N; ++q) {
          V bv;
          memcpy(&bv, bias + j + q * W, sizeof bv);
          v[q] += bv;
        }
      if (addD)
        for (int q = 0; q < N; ++q) {
          V dv;
          memcpy(&dv, d + j + q * W, sizeof dv);
          v[q] += dv;
        }
      if (grad) {
        for (int q = 0; q < N; ++q)
          memcpy(&x[q], d + j + q * W, sizeof(V));
        geluGradN<V, N>(x);
        for (int q = 0; q < N; ++q)
          v[q] *= x[q];
      }
      if (keepC)
        for (int q = 0; q < N; ++q)
          memcpy(c + j + q * W, &v[q], sizeof(V));
      if (toD) {
        geluN<V, N>(v);
        for (int q = 0; q < N; ++q)
          memcpy(d + j + q * W, &v[q], sizeof(V));
      }
    };
    if (sCn == 1) {
      for (; j + U * W <= cols; j += U * W)
        vectors(std::integral_constant<int, U>{});
      for (; j + W <= cols; j += W)
        vectors(std::integral_constant<int, 1>{});
    }
    for (; j < cols; ++j)
      one(c + j * sCn, d ? d + j * sCn : nullptr, j);
  }
}

template <typename T>
using EpilogueFn = void (*)(int64_t, int64_t, T *, int64_t, int64_t, int64_t, const T *, T *);

#define UNROLL_EPILOGUE(NAME, T, V, ATTR)                                                          \
  ATTR void NAME(int64_t rows, int64_t cols, T *C, int64_t sCm, int64_t sCn, int64_t flags,        \
                 const T *bias, T *D) {                                                            \
    epilogueBlock<V, T>(rows, cols, C, sCm, sCn, flags, bias, D);                                  \
  }
// With the extensions Isa.h's AVX-512 variants have (GELU's exponent is
// clamped by vrangeps, AVX512DQ); the dispatch picks them only where the
// CPU has those.
UNROLL_FOR_EACH_VARIANT_AT(UNROLL_EPILOGUE, epi, UNROLL_AVX512)

/// What unroll_gemm_ex adds to a product: its flags, vectors and the
/// instruction set's epilogue (flags 0: none).
template <typename T> struct Epilogue {
  int64_t flags = 0;
  const T *bias = nullptr;
  T *D = nullptr;
  EpilogueFn<T> fn = nullptr;
  /// ROWSUM_A: where A's row sums go (D), which the blocked product adds
  /// while it packs A; null otherwise.
  T *rowSums = nullptr;
  /// D's rows i0.. and columns j0.. of one register tile asked for into L2,
  /// where the epilogue reads D (the GELU's input, the residual) or writes
  /// it (the GELU's output). The drivers call it tile by tile in the last
  /// k-block, so that the block's epilogue does not wait on memory (it
  /// takes 4-8% off the products with an epilogue). Inlined like the rest of the
  /// driver (DRIVER): GCC does not inline it on its own into the drivers
  /// compiled for AVX2/AVX-512, and drops the call to a function of
  /// prefetches alone as having no effect.
  DRIVER void prefetchD(int64_t i0, int64_t j0, int64_t rows, int64_t cols, int64_t sCm,
                        int64_t sCn) const {
    if (!D || sCn != 1 || !(flags & (UNROLL_GEMM_GELU_AUX | UNROLL_GEMM_DGELU | UNROLL_GEMM_ADD_D)))
      return;
    for (int64_t r = 0; r < rows; ++r)
      prefetchRow<T, 0, 2>(D + (i0 + r) * sCm + j0, cols);
  }
  void apply(int64_t i0, int64_t j0, int64_t rows, int64_t cols, T *C, int64_t sCm,
             int64_t sCn) const {
    if (flags)
      fn(rows, cols, C + i0 * sCm + j0 * sCn, sCm, sCn, flags, bias ? bias + j0 : nullptr,
         D ? D + i0 * sCm + j0 * sCn : nullptr);
  }
};

} // namespace
