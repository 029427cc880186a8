//===- LayerNorm.cpp - the CPU layer-norm kernels of compiled.so ----------===//
//
// LayerNorm over the last dimension of a token batch and its VJP as one
// pass over each row (unroll_layer_norm_<f32|f64>, _vjp_; declared in
// runtime/include/unroll/runtime/CpuKernels.h), called by --lower-to-cpu
// instead of the loop nests of the linalg lowering (two reductions, two
// per-token maps and the normalization, each a pass over [B, n, F]; the VJP
// nine). A row (F ≤ a few thousand values) stays in L1 while its moments,
// its normalization and its gradient are formed:
//
//   y = (x − mean) · rstd · g + b,        rstd = 1 / √(Σ (x − mean)² / F + ε)
//   dx = rstd (ĝ − mean(ĝ) − x̂ mean(ĝ x̂)),  ĝ = dy · g,  x̂ = (x − mean) rstd
//   dg = Σ_tokens dy x̂,  db = Σ_tokens dy
//
// The row sums are formed in W-lane vectors (f32 rows with f64 accumulation
// for the two moments and the gradient's sums over the tokens). Compiled for
// AVX-512, AVX2 and the baseline and picked at run time (Isa.h).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "unroll/runtime/CpuIsa.h"
#include "VecMath.h"
#include "unroll/runtime/CpuKernels.h"

namespace {

#define INLINE inline __attribute__((always_inline))

using unroll::cpu::VecOf;

/// W values at a time through one register of the instruction set: V is a
/// GCC vector of T.
template <typename T, int Bytes> struct Lanes {
  typedef T V __attribute__((vector_size(Bytes)));
  static constexpr int W = Bytes / sizeof(T);
  static INLINE V load(const T *p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static INLINE void store(T *p, V v) { std::memcpy(p, &v, sizeof v); }
  /// The lanes' total in double, by halving (log2 steps instead of a chain
  /// of W dependent adds, which was most of a row's time: a row has four
  /// such totals in the VJP, two of them one after the other).
  static INLINE double sum(V v) {
    if constexpr (std::is_same_v<T, double>)
      return unroll::cpu::laneSum(v);
    else
      return unroll::cpu::laneSum(widen(v, std::make_index_sequence<W / 2>{}));
  }

private:
  using D = typename VecOf<double, Bytes>::V;
  /// f32 lanes 0..W/2-1 plus lanes W/2..W-1, in double.
  template <size_t... I> static INLINE D widen(V v, std::index_sequence<I...>) {
    using H = typename VecOf<T, Bytes / 2>::V;
    H lo = __builtin_shufflevector(v, v, I...), hi = __builtin_shufflevector(v, v, (I + W / 2)...);
    return __builtin_convertvector(lo, D) + __builtin_convertvector(hi, D);
  }
};

double epsOf(int64_t bits) {
  double eps;
  std::memcpy(&eps, &bits, sizeof eps);
  return eps;
}

/// Accumulators side by side: a row of F = 256 f32 values is 16 AVX-512
/// vectors, and one accumulator made each sum a chain of 16 dependent adds
/// (~64 cycles of latency per sum, most of a row's time).
constexpr int kAcc = 4;

/// Σ_q a[q], pairwise.
template <typename V> INLINE V total(const V (&a)[kAcc]) { return (a[0] + a[1]) + (a[2] + a[3]); }

/// Mean and rstd of one row of F values. Sums in kAcc vectors of T (the
/// row's partial sums over F / W lanes), totals in double.
template <typename T, int Bytes>
INLINE void moments(int64_t F, const T *x, double eps, T &mean, T &rstd) {
  using L = Lanes<T, Bytes>;
  using V = typename L::V;
  constexpr int W = L::W;
  int64_t f = 0;
  V a[kAcc]{};
  for (; f + kAcc * W <= F; f += kAcc * W)
    for (int q = 0; q < kAcc; ++q)
      a[q] += L::load(x + f + q * W);
  for (; f + W <= F; f += W)
    a[0] += L::load(x + f);
  double s = L::sum(total(a));
  for (; f < F; ++f)
    s += x[f];
  mean = T(s / F);
  V c[kAcc]{};
  f = 0;
  for (; f + kAcc * W <= F; f += kAcc * W)
    for (int q = 0; q < kAcc; ++q) {
      V d = L::load(x + f + q * W) - mean;
      c[q] += d * d;
    }
  for (; f + W <= F; f += W) {
    V d = L::load(x + f) - mean;
    c[0] += d * d;
  }
  double q = L::sum(total(c));
  for (; f < F; ++f)
    q += double(x[f] - mean) * double(x[f] - mean);
  rstd = T(1.0 / std::sqrt(q / F + eps));
}

template <typename T, int Bytes>
INLINE void layerNorm(int64_t B, int64_t n, int64_t F, const T *x, int64_t sXb, int64_t sXi,
                      const T *g, const T *bias, T *y, int64_t sYb, int64_t sYi, int64_t epsBits) {
  using L = Lanes<T, Bytes>;
  constexpr int W = L::W;
  const double eps = epsOf(epsBits);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const T *xr = x + b * sXb + i * sXi;
      T *yr = y + b * sYb + i * sYi;
      T mean, rstd;
      moments<T, Bytes>(F, xr, eps, mean, rstd);
      int64_t f = 0;
      for (; f + W <= F; f += W)
        L::store(yr + f, (L::load(xr + f) - mean) * rstd * L::load(g + f) + L::load(bias + f));
      for (; f < F; ++f)
        yr[f] = (xr[f] - mean) * rstd * g[f] + bias[f];
    }
}

template <typename T, int Bytes>
INLINE void layerNormVJP(int64_t B, int64_t n, int64_t F, const T *x, int64_t sXb, int64_t sXi,
                         const T *g, const T *dy, int64_t sDb, int64_t sDi, const T *add,
                         int64_t sAb, int64_t sAi, T *dx, int64_t sGb, int64_t sGi, T *dg, T *db,
                         int64_t epsBits) {
  using L = Lanes<T, Bytes>;
  using V = typename L::V;
  constexpr int W = L::W;
  const double eps = epsOf(epsBits);
  // The sums over tokens: thousands of rows add into each, so vectors of T
  // gather kChunk rows at a time and those partial sums add in double.
  constexpr int kChunk = 16;
  thread_local std::vector<double> dgAcc, dbAcc;
  thread_local std::vector<T> xhat, ghat, dgPart, dbPart;
  dgAcc.assign(F, 0.0);
  dbAcc.assign(F, 0.0);
  dgPart.assign(F, T(0));
  dbPart.assign(F, T(0));
  xhat.resize(F);
  ghat.resize(F);
  int pending = 0;
  auto flush = [&] {
    for (int64_t e = 0; e < F; ++e) {
      dgAcc[e] += double(dgPart[e]);
      dbAcc[e] += double(dbPart[e]);
      dgPart[e] = dbPart[e] = T(0);
    }
    pending = 0;
  };
  const T invF = T(1.0 / F);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const T *xr = x + b * sXb + i * sXi, *dyr = dy + b * sDb + i * sDi;
      T *dxr = dx + b * sGb + i * sGi;
      const T *ar = add ? add + b * sAb + i * sAi : nullptr;
      T mean, rstd;
      moments<T, Bytes>(F, xr, eps, mean, rstd);
      // x̂, Σ ĝ and Σ ĝ x̂ (ĝ = dy g), and the token sums of dg and db.
      V s1[kAcc]{}, s2[kAcc]{};
      int64_t f = 0;
      auto step = [&](int q) __attribute__((always_inline)) {
        V xh = (L::load(xr + f) - mean) * rstd, gh = L::load(dyr + f) * L::load(g + f);
        L::store(xhat.data() + f, xh);
        L::store(ghat.data() + f, gh);
        s1[q] += gh;
        s2[q] += gh * xh;
        f += W;
      };
      while (f + kAcc * W <= F)
        for (int q = 0; q < kAcc; ++q)
          step(q);
      while (f + W <= F)
        step(0);
      double t1 = L::sum(total(s1)), t2 = L::sum(total(s2));
      for (; f < F; ++f) {
        T xh = (xr[f] - mean) * rstd, gh = dyr[f] * g[f];
        xhat[f] = xh;
        ghat[f] = gh;
        t1 += gh;
        t2 += double(gh) * xh;
      }
      const T m1 = T(t1) * invF, m2 = T(t2) * invF;
      f = 0;
      // dx (plus the addend), and the token sums of dg and db, in one pass.
      // ĝ as stored: a product formed again here could round (or fuse)
      // otherwise, which rstd amplifies where a row's variance is ~0.
      auto rows = [&](auto withAdd) __attribute__((always_inline)) {
        for (; f + W <= F; f += W) {
          V xh = L::load(xhat.data() + f), d = L::load(dyr + f);
          V v = (L::load(ghat.data() + f) - m1 - xh * m2) * rstd;
          if constexpr (decltype(withAdd)::value)
            v += L::load(ar + f);
          L::store(dxr + f, v);
          L::store(dgPart.data() + f, L::load(dgPart.data() + f) + d * xh);
          L::store(dbPart.data() + f, L::load(dbPart.data() + f) + d);
        }
        for (; f < F; ++f) {
          T v = (ghat[f] - m1 - xhat[f] * m2) * rstd;
          if constexpr (decltype(withAdd)::value)
            v += ar[f];
          dxr[f] = v;
          dgPart[f] += dyr[f] * xhat[f];
          dbPart[f] += dyr[f];
        }
      };
      if (ar)
        rows(std::true_type{});
      else
        rows(std::false_type{});
      if (++pending == kChunk)
        flush();
    }
  flush();
  for (int64_t e = 0; e < F; ++e) {
    dg[e] = T(dgAcc[e]);
    db[e] = T(dbAcc[e]);
  }
}

#define ARGS(T)                                                                                    \
  int64_t B, int64_t n, int64_t F, const T *x, int64_t sXb, int64_t sXi, const T *g,               \
      const T *bias, T *y, int64_t sYb, int64_t sYi, int64_t epsBits
#define PASS B, n, F, x, sXb, sXi, g, bias, y, sYb, sYi, epsBits
#define VJP_ARGS(T)                                                                                \
  int64_t B, int64_t n, int64_t F, const T *x, int64_t sXb, int64_t sXi, const T *g, const T *dy,  \
      int64_t sDb, int64_t sDi, const T *add, int64_t sAb, int64_t sAi, T *dx, int64_t sGb,        \
      int64_t sGi, T *dg, T *db, int64_t epsBits
#define VJP_PASS B, n, F, x, sXb, sXi, g, dy, sDb, sDi, add, sAb, sAi, dx, sGb, sGi, dg, db, epsBits

UNROLL_AVX512 void lnF32Avx512(ARGS(float)) { layerNorm<float, 64>(PASS); }
UNROLL_AVX2 void lnF32Avx2(ARGS(float)) { layerNorm<float, 32>(PASS); }
void lnF32Plain(ARGS(float)) { layerNorm<float, 16>(PASS); }
UNROLL_AVX512 void lnF64Avx512(ARGS(double)) { layerNorm<double, 64>(PASS); }
UNROLL_AVX2 void lnF64Avx2(ARGS(double)) { layerNorm<double, 32>(PASS); }
void lnF64Plain(ARGS(double)) { layerNorm<double, 16>(PASS); }
UNROLL_AVX512 void lnVjpF32Avx512(VJP_ARGS(float)) { layerNormVJP<float, 64>(VJP_PASS); }
UNROLL_AVX2 void lnVjpF32Avx2(VJP_ARGS(float)) { layerNormVJP<float, 32>(VJP_PASS); }
void lnVjpF32Plain(VJP_ARGS(float)) { layerNormVJP<float, 16>(VJP_PASS); }
UNROLL_AVX512 void lnVjpF64Avx512(VJP_ARGS(double)) { layerNormVJP<double, 64>(VJP_PASS); }
UNROLL_AVX2 void lnVjpF64Avx2(VJP_ARGS(double)) { layerNormVJP<double, 32>(VJP_PASS); }
void lnVjpF64Plain(VJP_ARGS(double)) { layerNormVJP<double, 16>(VJP_PASS); }

} // namespace

extern "C" {

void unroll_layer_norm_f32(ARGS(float)) {
  unroll::cpu::dispatchIsa(lnF32Avx512, lnF32Avx2, lnF32Plain, PASS);
}
void unroll_layer_norm_f64(ARGS(double)) {
  unroll::cpu::dispatchIsa(lnF64Avx512, lnF64Avx2, lnF64Plain, PASS);
}
void unroll_layer_norm_vjp_f32(VJP_ARGS(float)) {
  unroll::cpu::dispatchIsa(lnVjpF32Avx512, lnVjpF32Avx2, lnVjpF32Plain, VJP_PASS);
}
void unroll_layer_norm_vjp_f64(VJP_ARGS(double)) {
  unroll::cpu::dispatchIsa(lnVjpF64Avx512, lnVjpF64Avx2, lnVjpF64Plain, VJP_PASS);
}

} // extern "C"
