//===- Attention.cpp - the CPU causal-attention kernel of compiled.so -----===//
//
// Causal multi-head attention of a looped transformer's block, f32 and f64:
//
//   void unroll_attention_f32(int64 B, int64 n, int64 H, int64 hd,
//                             const float *qkv, int64 sQb, int64 sQi,
//                             float *out, int64 sOb, int64 sOi);
//
// qkv[b, i, c·H·hd + h·hd + e] holds q (c = 0), k (1) and v (2) of token i
// (contiguous in the last index, strides sQb and sQi in elements); out[b, i,
// h·hd + e] = Σ_{j ≤ i} softmax_j(q_i · k_j / √hd) v_j.
//
// The lowering of a model for --lower-to-cpu calls this for its forward
// attention (lib/Conversion/UnrollToLinalg/ModelToLinalg.cpp) instead of two
// batched products and four passes over the [B, H, n, n] scores: at the
// looped transformer's sizes (n = 2k ≤ 82 tokens, hd = 16 or 32) those were
// tiny GEMM calls and scalar loops. Here each (b, h) is one pass over its
// rows: k is transposed once into a [hd, n] scratch so that the scores of a
// row, the exponentials and the weighted sum of v rows are all contiguous
// vector loops. The backward (attention_vjp) keeps its linalg form.
//
// f32 uses a Cephes-style exp (range reduction to [-ln2/2, ln2/2], degree-6
// polynomial; relative error ~2e-7, like the polynomial --lower-to-cpu uses
// elsewhere) that the compiler vectorizes; f64 calls std::exp. The code is
// compiled for AVX-512, AVX2 and the baseline and picked at run time
// (UNROLL_GEMM_ISA=avx2|plain forces one, as for the GEMM kernel).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

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
template <typename T> INLINE void store(T *p, typename Vec<T>::V v) { std::memcpy(p, &v, sizeof v); }
template <typename T> INLINE typename Vec<T>::V splat(T x) { return typename Vec<T>::V{} + x; }

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
  std::vector<T> kt, p;
};

/// One (b, h): q, k, v point at token 0 of this head (token stride ld);
/// kt is [hd, np] and p [np], np = n rounded up to whole vectors.
template <typename T>
INLINE void head(int64_t n, int64_t np, int64_t hd, const T *q, const T *k, const T *v,
                 int64_t ld, T *o, int64_t ldo, T *kt, T *p) {
  using V = typename Vec<T>::V;
  constexpr int W = Vec<T>::W;
  const T scale = T(1) / std::sqrt(T(hd));
  for (int64_t e = 0; e < hd; ++e) {
    for (int64_t j = 0; j < n; ++j)
      kt[e * np + j] = k[j * ld + e];
    for (int64_t j = n; j < np; ++j)
      kt[e * np + j] = 0;
  }
  V lane;
  for (int l = 0; l < W; ++l)
    lane[l] = T(l);
  for (int64_t i = 0; i < n; ++i) {
    const T *qi = q + i * ld;
    const int64_t len = i + 1, blocks = (len + W - 1) / W; // causal: keys 0..i
    // Scores, a block of W keys at a time, the block in a register.
    for (int64_t jb = 0; jb < blocks; ++jb) {
      V acc{};
      for (int64_t e = 0; e < hd; ++e)
        acc += load<T>(kt + e * np + jb * W) * (qi[e] * scale);
      store<T>(p + jb * W, acc);
    }
    T m = p[0];
    for (int64_t j = 1; j < len; ++j)
      m = p[j] > m ? p[j] : m;
    V sum{};
    for (int64_t jb = 0; jb < blocks; ++jb) {
      V x = expNonPositive(load<T>(p + jb * W) - m);
      x = lane + T(jb * W) < T(len) ? x : V{}; // keys past i weigh nothing
      sum += x;
      store<T>(p + jb * W, x);
    }
    T total = 0;
    for (int l = 0; l < W; ++l)
      total += sum[l];
    const T inv = T(1) / total;
    // Weighted sum of v rows, W features at a time in a register.
    T *oi = o + i * ldo;
    int64_t e0 = 0;
    for (; e0 + W <= hd; e0 += W) {
      V acc{};
      for (int64_t j = 0; j < len; ++j)
        acc += load<T>(v + j * ld + e0) * p[j];
      store<T>(oi + e0, acc * inv);
    }
    for (int64_t e = e0; e < hd; ++e) {
      T acc = 0;
      for (int64_t j = 0; j < len; ++j)
        acc += p[j] * v[j * ld + e];
      oi[e] = acc * inv;
    }
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

#define ARGS(T)                                                                                \
  int64_t B, int64_t n, int64_t H, int64_t hd, const T *qkv, int64_t sQb, int64_t sQi, T *out,  \
      int64_t sOb, int64_t sOi
#define PASS B, n, H, hd, qkv, sQb, sQi, out, sOb, sOi

__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"))) void
f32Avx512(ARGS(float)) { attention<float>(PASS); }
__attribute__((target("avx2,fma"))) void f32Avx2(ARGS(float)) { attention<float>(PASS); }
void f32Plain(ARGS(float)) { attention<float>(PASS); }
__attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma"))) void
f64Avx512(ARGS(double)) { attention<double>(PASS); }
__attribute__((target("avx2,fma"))) void f64Avx2(ARGS(double)) { attention<double>(PASS); }
void f64Plain(ARGS(double)) { attention<double>(PASS); }

enum class Isa { Avx512, Avx2, Plain };
Isa detect() {
  static const Isa isa = [] {
    if (const char *e = getenv("UNROLL_GEMM_ISA")) { // as in Gemm.cpp: tests
      if (!strcmp(e, "plain")) return Isa::Plain;
      if (!strcmp(e, "avx2")) return Isa::Avx2;
    }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw"))
      return Isa::Avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return Isa::Avx2;
    return Isa::Plain;
  }();
  return isa;
}

} // namespace

extern "C" {

void unroll_attention_f32(ARGS(float)) {
  switch (detect()) {
  case Isa::Avx512:
    return f32Avx512(PASS);
  case Isa::Avx2:
    return f32Avx2(PASS);
  case Isa::Plain:
    return f32Plain(PASS);
  }
}

void unroll_attention_f64(ARGS(double)) {
  switch (detect()) {
  case Isa::Avx512:
    return f64Avx512(PASS);
  case Isa::Avx2:
    return f64Avx2(PASS);
  case Isa::Plain:
    return f64Plain(PASS);
  }
}

} // extern "C"
