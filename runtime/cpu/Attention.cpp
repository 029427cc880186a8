//===- Attention.cpp - the CPU causal-attention kernel of compiled.so -----===//
//
// Causal multi-head attention of a looped transformer's block, f32 and f64
// (unroll_attention_f32 / _f64, declared in
// runtime/include/unroll/runtime/CpuKernels.h):
// qkv[b, i, c·H·hd + h·hd + e] holds q (c = 0), k (1) and v (2) of token i
// (contiguous in the last index, strides sQb and sQi in elements); out[b, i,
// h·hd + e] = Σ_{j ≤ i} softmax_j(q_i · k_j / √hd) v_j.
//
// The lowering of a model for --lower-to-cpu calls this for its attention
// (lib/Conversion/UnrollToLinalg/Attention.cpp) instead of two batched
// products and four passes over the [B, H, n, n] scores: at the looped
// transformer's sizes (n = 2k ≤ 82 tokens, hd = 16 or 32) those were tiny
// GEMM calls and scalar loops. Here each (b, h) is one pass over its rows:
// k is transposed once into a [hd, n] scratch so that the scores of a row,
// the exponentials and the weighted sum of v rows are all contiguous vector
// loops, each summed in four independent register accumulators.
//
// Its vector-Jacobian product, for the backward of a training step,
// unroll_attention_vjp_f32 / _f64, writes all of dqkv (same layout as qkv) from qkv and the
// output's adjoint dout (layout of out): per (b, h) it recomputes the row's probabilities P as the
// forward does, then dP_ij = dO_i · v_j, dS = P ∘ (dP − Σ_j P dP), dq_i = Σ_j dS_ij k_j / √hd, and
// accumulates dk_j += dS_ij q_i / √hd and dv_j += P_ij dO_i over the rows.
//
// f32 uses a Cephes-style exp (range reduction to [-ln2/2, ln2/2], degree-6
// polynomial; relative error ~2e-7, like the polynomial --lower-to-cpu uses
// elsewhere) that the compiler vectorizes; f64 calls std::exp. The code is
// compiled for AVX-512, AVX2 and the baseline and picked at run time, as
// the GEMM kernel is (Isa.h).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "Isa.h"
#include "unroll/runtime/CpuKernels.h"

namespace {

#define INLINE inline __attribute__((always_inline))

// W-lane vectors (GCC vector extensions): 64 bytes, one zmm register with
// AVX-512, two ymm with AVX2, four xmm otherwise. Accumulators stay in
// registers; memory is touched with unaligned loads and stores.
template <typename T> struct Vec;
template <> struct Vec<float> {
  typedef float V __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
  static constexpr int W = 16;
};
template <> struct Vec<double> {
  typedef double V __attribute__((vector_size(64)));
  typedef int64_t I __attribute__((vector_size(64)));
  static constexpr int W = 8;
};

template <typename T> INLINE typename Vec<T>::V load(const T *p) {
  typename Vec<T>::V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T> INLINE void store(T *p, typename Vec<T>::V v) {
  std::memcpy(p, &v, sizeof v);
}
template <typename T> INLINE typename Vec<T>::V splat(T x) { return typename Vec<T>::V{} + x; }

/// Σ_{r < count} rows[r · stride .. + W) · coef[r] · mul, in four
/// independent accumulators (one would wait on each FMA's latency: the
/// sums here are 16 to 90 terms long).
template <typename T>
INLINE typename Vec<T>::V combine(int64_t count, const T *coef, T mul, const T *rows,
                                  int64_t stride) {
  using V = typename Vec<T>::V;
  V a0{}, a1{}, a2{}, a3{};
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    a0 += load<T>(rows + r * stride) * (coef[r] * mul);
    a1 += load<T>(rows + (r + 1) * stride) * (coef[r + 1] * mul);
    a2 += load<T>(rows + (r + 2) * stride) * (coef[r + 2] * mul);
    a3 += load<T>(rows + (r + 3) * stride) * (coef[r + 3] * mul);
  }
  for (; r < count; ++r)
    a0 += load<T>(rows + r * stride) * (coef[r] * mul);
  return (a0 + a1) + (a2 + a3);
}

/// exp of every lane, x <= 0 (scores minus their row maximum). f32: range
/// reduction x = t ln2 + f, |f| <= ln2/2, and Cephes' degree-6 polynomial
/// (relative error ~2e-7); f64: libm, lane by lane.
INLINE Vec<float>::V expNonPositive(Vec<float>::V x) {
  using V = Vec<float>::V;
  x = x < -87.0f ? splat(-87.0f) : x;
  V t = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
  V f = x - t * 0.693359375f + t * 2.12194440e-4f;
  V p = splat(1.9875691500e-4f);
  p = p * f + 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f * f + f + 1.0f;
  Vec<float>::I bits = (__builtin_convertvector(t, Vec<float>::I) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}
INLINE Vec<double>::V expNonPositive(Vec<double>::V x) {
  for (int l = 0; l < Vec<double>::W; ++l)
    x[l] = std::exp(x[l]);
  return x;
}

template <typename T> struct Scratch {
  std::vector<T> kt, vt, p, dp, dk, dv;
};

/// kt[e, j] = k[j, e] for j < n, zero up to np.
template <typename T>
INLINE void transpose(int64_t n, int64_t np, int64_t hd, const T *k, int64_t ld, T *kt) {
  for (int64_t e = 0; e < hd; ++e) {
    for (int64_t j = 0; j < n; ++j)
      kt[e * np + j] = k[j * ld + e];
    for (int64_t j = n; j < np; ++j)
      kt[e * np + j] = 0;
  }
}

/// p[0..len) = softmax_j(q · k_j · scale) over the first len keys (kt is k
/// transposed, [hd, np]); p is zero from len to the end of its last vector.
template <typename T>
INLINE void probs(int64_t len, int64_t np, int64_t hd, const T *qi, const T *kt, T scale, T *p) {
  using V = typename Vec<T>::V;
  constexpr int W = Vec<T>::W;
  const int64_t blocks = (len + W - 1) / W;
  // Scores, a block of W keys at a time, the block in a register.
  for (int64_t jb = 0; jb < blocks; ++jb)
    store<T>(p + jb * W, combine<T>(hd, qi, scale, kt + jb * W, np));
  T m = p[0];
  for (int64_t j = 1; j < len; ++j)
    m = p[j] > m ? p[j] : m;
  V lane, sum{};
  for (int l = 0; l < W; ++l)
    lane[l] = T(l);
  for (int64_t jb = 0; jb < blocks; ++jb) {
    V x = expNonPositive(load<T>(p + jb * W) - m);
    x = lane + T(jb * W) < T(len) ? x : V{}; // keys past i weigh nothing
    sum += x;
    store<T>(p + jb * W, x);
  }
  T total = 0;
  for (int l = 0; l < W; ++l)
    total += sum[l];
  const V inv = splat<T>(T(1) / total);
  for (int64_t jb = 0; jb < blocks; ++jb)
    store<T>(p + jb * W, load<T>(p + jb * W) * inv);
}

/// out[e] = Σ_{j < len} w[j] · rows[j · ld + e] for e < hd, W features at a
/// time in registers.
template <typename T>
INLINE void weightedRows(int64_t len, int64_t hd, const T *w, const T *rows, int64_t ld, T *out) {
  constexpr int W = Vec<T>::W;
  int64_t e0 = 0;
  for (; e0 + W <= hd; e0 += W)
    store<T>(out + e0, combine<T>(len, w, T(1), rows + e0, ld));
  for (int64_t e = e0; e < hd; ++e) {
    T acc = 0;
    for (int64_t j = 0; j < len; ++j)
      acc += w[j] * rows[j * ld + e];
    out[e] = acc;
  }
}

/// One (b, h): q, k, v point at token 0 of this head (token stride ld);
/// kt is [hd, np] and p [np], np = n rounded up to whole vectors.
template <typename T>
INLINE void head(int64_t n, int64_t np, int64_t hd, const T *q, const T *k, const T *v, int64_t ld,
                 T *o, int64_t ldo, T *kt, T *p) {
  const T scale = T(1) / std::sqrt(T(hd));
  transpose<T>(n, np, hd, k, ld, kt);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = i + 1; // causal: keys 0..i
    probs<T>(len, np, hd, q + i * ld, kt, scale, p);
    weightedRows<T>(len, hd, p, v, ld, o + i * ldo);
  }
}

/// acc[e] += w · x[e] for e < hd, W at a time.
template <typename T> INLINE void axpy(int64_t hd, T w, const T *x, T *acc) {
  constexpr int W = Vec<T>::W;
  int64_t e = 0;
  for (; e + W <= hd; e += W)
    store<T>(acc + e, load<T>(acc + e) + load<T>(x + e) * w);
  for (; e < hd; ++e)
    acc[e] += w * x[e];
}

/// The VJP of one (b, h): q, k, v and dO point at token 0 of this head
/// (token strides ld and ldd); writes dq, dk, dv rows (token stride ldg).
template <typename T>
INLINE void headVJP(int64_t n, int64_t np, int64_t hd, const T *q, const T *k, const T *v,
                    int64_t ld, const T *dO, int64_t ldd, T *dq, T *dk, T *dv, int64_t ldg,
                    Scratch<T> &s) {
  using V = typename Vec<T>::V;
  constexpr int W = Vec<T>::W;
  const T scale = T(1) / std::sqrt(T(hd));
  T *kt = s.kt.data(), *vt = s.vt.data(), *p = s.p.data(), *dp = s.dp.data();
  T *dkAcc = s.dk.data(), *dvAcc = s.dv.data();
  transpose<T>(n, np, hd, k, ld, kt);
  transpose<T>(n, np, hd, v, ld, vt);
  std::fill(dkAcc, dkAcc + n * hd, T(0));
  std::fill(dvAcc, dvAcc + n * hd, T(0));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t len = i + 1, blocks = (len + W - 1) / W;
    const T *qi = q + i * ld, *dOi = dO + i * ldd;
    probs<T>(len, np, hd, qi, kt, scale, p);
    // dP_ij = dO_i · v_j, a block of keys at a time; then Σ_j P_ij dP_ij.
    V dot{};
    for (int64_t jb = 0; jb < blocks; ++jb) {
      V acc = combine<T>(hd, dOi, T(1), vt + jb * W, np);
      store<T>(dp + jb * W, acc);
      dot += acc * load<T>(p + jb * W); // p is zero past len
    }
    T rowDot = 0;
    for (int l = 0; l < W; ++l)
      rowDot += dot[l];
    // dS_ij = P_ij (dP_ij − rowDot), scaled by 1/√hd for dq and dk.
    for (int64_t jb = 0; jb < blocks; ++jb)
      store<T>(dp + jb * W, load<T>(p + jb * W) * (load<T>(dp + jb * W) - rowDot) * scale);
    weightedRows<T>(len, hd, dp, k, ld, dq + i * ldg); // dq_i = Σ_j dS_ij k_j
    // dk_j += dS_ij q_i and dv_j += P_ij dO_i for the keys of this row.
    for (int64_t j = 0; j < len; ++j) {
      axpy<T>(hd, dp[j], qi, dkAcc + j * hd);
      axpy<T>(hd, p[j], dOi, dvAcc + j * hd);
    }
  }
  for (int64_t j = 0; j < n; ++j) {
    std::memcpy(dk + j * ldg, dkAcc + j * hd, hd * sizeof(T));
    std::memcpy(dv + j * ldg, dvAcc + j * hd, hd * sizeof(T));
  }
}

template <typename T>
INLINE void attention(int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb,
                      int64_t sQi, T *out, int64_t sOb, int64_t sOi) {
  thread_local Scratch<T> s;
  const int64_t np = (n + Vec<T>::W - 1) / Vec<T>::W * Vec<T>::W;
  if ((int64_t)s.kt.size() < hd * np)
    s.kt.resize(hd * np);
  if ((int64_t)s.p.size() < np)
    s.p.resize(np);
  const int64_t D = H * hd;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T *base = qkv + b * sQb + h * hd;
      head<T>(n, np, hd, base, base + D, base + 2 * D, sQi, out + b * sOb + h * hd, sOi,
              s.kt.data(), s.p.data());
    }
}

template <typename T>
INLINE void attentionVJP(int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb,
                         int64_t sQi, const T *dout, int64_t sDb, int64_t sDi, T *dqkv, int64_t sGb,
                         int64_t sGi) {
  thread_local Scratch<T> s;
  const int64_t np = (n + Vec<T>::W - 1) / Vec<T>::W * Vec<T>::W;
  for (auto *v : {&s.kt, &s.vt})
    if ((int64_t)v->size() < hd * np)
      v->resize(hd * np);
  for (auto *v : {&s.p, &s.dp})
    if ((int64_t)v->size() < np)
      v->resize(np);
  for (auto *v : {&s.dk, &s.dv})
    if ((int64_t)v->size() < n * hd)
      v->resize(n * hd);
  const int64_t D = H * hd;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const T *base = qkv + b * sQb + h * hd;
      T *g = dqkv + b * sGb + h * hd;
      headVJP<T>(n, np, hd, base, base + D, base + 2 * D, sQi, dout + b * sDb + h * hd, sDi, g,
                 g + D, g + 2 * D, sGi, s);
    }
}

#define ARGS(T)                                                                                    \
  int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb, int64_t sQi, T *out,     \
      int64_t sOb, int64_t sOi
#define PASS B, n, H, hd, qkv, sQb, sQi, out, sOb, sOi

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma"))) void f32Avx512(ARGS(float)) {
  attention<float>(PASS);
}
__attribute__((target("avx2,fma"))) void f32Avx2(ARGS(float)) { attention<float>(PASS); }
void f32Plain(ARGS(float)) { attention<float>(PASS); }
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma"))) void f64Avx512(ARGS(double)) {
  attention<double>(PASS);
}
__attribute__((target("avx2,fma"))) void f64Avx2(ARGS(double)) { attention<double>(PASS); }
void f64Plain(ARGS(double)) { attention<double>(PASS); }

#define VJP_ARGS(T)                                                                                \
  int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb, int64_t sQi,             \
      const T *dout, int64_t sDb, int64_t sDi, T *dqkv, int64_t sGb, int64_t sGi
#define VJP_PASS B, n, H, hd, qkv, sQb, sQi, dout, sDb, sDi, dqkv, sGb, sGi

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma"))) void
vjpF32Avx512(VJP_ARGS(float)) {
  attentionVJP<float>(VJP_PASS);
}
__attribute__((target("avx2,fma"))) void vjpF32Avx2(VJP_ARGS(float)) {
  attentionVJP<float>(VJP_PASS);
}
void vjpF32Plain(VJP_ARGS(float)) { attentionVJP<float>(VJP_PASS); }
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,fma"))) void
vjpF64Avx512(VJP_ARGS(double)) {
  attentionVJP<double>(VJP_PASS);
}
__attribute__((target("avx2,fma"))) void vjpF64Avx2(VJP_ARGS(double)) {
  attentionVJP<double>(VJP_PASS);
}
void vjpF64Plain(VJP_ARGS(double)) { attentionVJP<double>(VJP_PASS); }

using unroll::cpu::Isa;

/// Calls the variant for this machine's instruction set.
template <typename... A>
void dispatch(void (*avx512)(A...), void (*avx2)(A...), void (*plain)(A...), A... args) {
  switch (unroll::cpu::detectIsa()) {
  case Isa::Avx512:
    return avx512(args...);
  case Isa::Avx2:
    return avx2(args...);
  case Isa::Plain:
    return plain(args...);
  }
}

} // namespace

extern "C" {

void unroll_attention_f32(ARGS(float)) { dispatch(f32Avx512, f32Avx2, f32Plain, PASS); }
void unroll_attention_f64(ARGS(double)) { dispatch(f64Avx512, f64Avx2, f64Plain, PASS); }
void unroll_attention_vjp_f32(VJP_ARGS(float)) {
  dispatch(vjpF32Avx512, vjpF32Avx2, vjpF32Plain, VJP_PASS);
}
void unroll_attention_vjp_f64(VJP_ARGS(double)) {
  dispatch(vjpF64Avx512, vjpF64Avx2, vjpF64Plain, VJP_PASS);
}

} // extern "C"
