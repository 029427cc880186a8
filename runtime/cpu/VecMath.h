//===- VecMath.h - exp, GELU and a transpose on vectors for CPU kernels ---===//
//
// Internal to libunroll_cpu_kernels.a (Attention.cpp, Gemm.cpp): the
// transcendental functions the kernels apply to whole vectors, the lane
// reductions (Attention.cpp, LayerNorm.cpp) and the 8 x 8 transpose of f32
// rows that Attention.cpp and Gemm.cpp use to change a matrix's layout. V is a GCC
// vector of float or double (one register of the instruction set the
// calling function is compiled for). f32 uses polynomials (vectorized);
// f64 calls libm lane by lane (f64 models are small test models).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_CPU_VECMATH_H
#define UNROLL_RUNTIME_CPU_VECMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <immintrin.h>

namespace unroll::cpu {

#define UNROLL_VEC_INLINE inline __attribute__((always_inline))

template <typename V> struct LanesOf {
  using T = std::remove_reference_t<decltype(V{}[0])>;
  static constexpr int W = sizeof(V) / sizeof(T);
};

/// A GCC vector of E, Bytes long. (A template, so that the attribute's
/// argument is applied where E is dependent: on a plain typedef in a class
/// template GCC drops it.)
template <typename E, int Bytes> struct VecOf {
  typedef E V __attribute__((vector_size(Bytes)));
};

/// The maximum and the sum of a vector's lanes, by halving: log2 W
/// dependent steps instead of W - 1 (the reductions of short rows, where
/// such chains were a large share of the work).
template <int LaneBytes, int Bytes> struct IndexVec;
template <int Bytes> struct IndexVec<4, Bytes> {
  typedef int32_t I __attribute__((vector_size(Bytes)));
};
template <int Bytes> struct IndexVec<8, Bytes> {
  typedef int64_t I __attribute__((vector_size(Bytes)));
};
/// v with lane l taken from lane l ^ half.
template <typename V, size_t... L>
UNROLL_VEC_INLINE V swapHalves(V v, int half, std::index_sequence<L...>) {
  using T = typename LanesOf<V>::T;
  using I = typename IndexVec<sizeof(T), sizeof(V)>::I;
  return __builtin_shuffle(v, I{decltype(I{}[0])(L ^ half)...});
}
template <typename V> UNROLL_VEC_INLINE auto laneMax(V v) {
  constexpr int W = LanesOf<V>::W;
  for (int half = W / 2; half >= 1; half /= 2) {
    V o = swapHalves(v, half, std::make_index_sequence<W>{});
    v = o > v ? o : v;
  }
  return v[0];
}
template <typename V> UNROLL_VEC_INLINE auto laneSum(V v) {
  constexpr int W = LanesOf<V>::W;
  for (int half = W / 2; half >= 1; half /= 2)
    v += swapHalves(v, half, std::make_index_sequence<W>{});
  return v[0];
}

/// e^x for f32 vectors with x in [−87, 87] (a normal f32 either way): range
/// reduction x = t ln2 + f, |f| <= ln2/2, and Cephes' degree-6 polynomial
/// (relative error ~2e-7), its tail in Horner's form (1 + f (1 + f p)).
/// With 512-bit vectors t is rounded by vrndscaleps and 2^t applied by
/// vscalefps (one instruction each, where the generic form takes two and
/// four: the GELU epilogues and the softmax spend most of their time here).
template <typename V> UNROLL_VEC_INLINE V expInRange(V x) {
  typedef int32_t I __attribute__((vector_size(sizeof(V))));
  V t;
  if constexpr (sizeof(V) == 64) // round to nearest (imm 0), all lanes
    t = __builtin_ia32_rndscaleps_mask(x * 1.44269504088896341f, 0, V{}, (unsigned short)0xffff,
                                       4 /* _MM_FROUND_CUR_DIRECTION */);
  else
    t = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  V f = x - t * 0.693359375f + t * 2.12194440e-4f;
  V p = 1.9875691500e-4f - V{};
  p = p * f + 1.3981999507e-3f;
  p = p * f + 8.3334519073e-3f;
  p = p * f + 4.1665795894e-2f;
  p = p * f + 1.6666665459e-1f;
  p = p * f + 5.0000001201e-1f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  if constexpr (sizeof(V) == 64) {
    return __builtin_ia32_scalefps512_mask(p, t, V{}, (unsigned short)0xffff, 4);
  } else {
    I bits = (__builtin_convertvector(t, I) + 127) << 23;
    V scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
  }
}

/// exp of every lane, x <= 0 (the softmax's scores minus their maximum);
/// f32 clamps x at −87 (e^x is then ~1.6e-38 instead of smaller), f64
/// calls libm.
template <typename V> UNROLL_VEC_INLINE V expNonPositive(V x) {
  using T = typename LanesOf<V>::T;
  if constexpr (sizeof(T) == 8) {
    for (int l = 0; l < LanesOf<V>::W; ++l)
      x[l] = std::exp(x[l]);
    return x;
  } else {
    return expInRange(x < -87.0f ? V{} - 87.0f : x);
  }
}

/// exp of every lane of f32 vectors, x clamped to [−87, 87] first (at ±88
/// one side is subnormal, and the GELU epilogue with it ran 2.5x slower on
/// the Xeon host, from the microcode assists of subnormal arithmetic).
/// With 512-bit vectors the clamp is one vrangeps (|x| bounded, its sign
/// kept; AVX512DQ).
template <typename V> UNROLL_VEC_INLINE V expClamped(V x) {
  if constexpr (sizeof(V) == 64) {
    // imm 0b0010: the smaller magnitude of x and 87, with x's sign.
    x = __builtin_ia32_rangeps512_mask(x, V{} + 87.0f, 2, V{}, (unsigned short)0xffff, 4);
  } else {
    x = x < -87.0f ? V{} - 87.0f : x;
    x = x > 87.0f ? V{} + 87.0f : x;
  }
  return expInRange(x);
}

/// 1 / d for f32 vectors with d in [1, 6e37] (GELU's 1 + e, so that 1 / d
/// is a normal f32): the hardware's estimate (14 bits with AVX-512, 12
/// below) and one Newton step, r(2 − d r), within 2 ulp — a division is ~5x the issue cost, and
/// GELU had one per vector. The builtins expand in the function this is inlined into, which is
/// compiled for the instruction set of V's width.
template <typename V> UNROLL_VEC_INLINE V reciprocal(V d) {
  V r;
  if constexpr (sizeof(V) == 64)
    r = __builtin_ia32_rcp14ps512_mask(d, V{}, (unsigned short)0xffff);
  else if constexpr (sizeof(V) == 32)
    r = __builtin_ia32_rcpps256(d);
  else
    r = __builtin_ia32_rcpps(d);
  return r * (2.0f - d * r);
}

// The model's GELU (tanh form, unroll.gelu) and its derivative, through the
// identity ½(1 + tanh u) = σ(2u) = 1 / (1 + e) with e = e^{−2u}: one exp
// and one reciprocal, no tanh polynomial, and no cancellation anywhere: σ
// is a reciprocal, and its complement 1 − σ = e σ a product (a difference
// 1 − σ loses all its digits where σ nears 1, and GELU' multiplies it by
// ~x³: 1e-4 wrong at x = 20 with AVX2's reciprocal, and worse beyond). The
// exponent is clamped to ±87 (e stays a normal f32, σ ≥ 1.6e-38: GELU(x)
// for x < −10 is ~1.6e-38 x instead of 0). f64 keeps std::tanh (the
// reference precision).
constexpr double kGeluC = 0.7978845608028654, kGeluA = 0.044715;

/// f64: ½(1 + tanh u), u = c(x + a x³).
inline double halfSumTanh(double x) {
  return 0.5 * (1 + std::tanh(kGeluC * (x + kGeluA * x * x * x)));
}

/// s[q] = σ(2u) and e[q] = e^{−2u} (so that 1 − s = e s) for u = c(x +
/// a x³), N f32 vectors side by side (independent chains the core can
/// overlap). −2u = x (−2c − 2ca x²): a product, a multiply-add and a
/// product; then the exp (~12 instructions with AVX-512) and the
/// reciprocal (4).
template <typename V, int N> UNROLL_VEC_INLINE void geluSigmoidN(const V *x, V *s, V *e) {
  using T = typename LanesOf<V>::T;
  for (int q = 0; q < N; ++q)
    e[q] = expClamped(x[q] * (T(-2 * kGeluC) + T(-2 * kGeluC * kGeluA) * (x[q] * x[q])));
  for (int q = 0; q < N; ++q)
    s[q] = reciprocal(1.0f + e[q]);
}

/// x[q] ← GELU(x[q]) = x σ(2u).
template <typename V, int N> UNROLL_VEC_INLINE void geluN(V *x) {
  using T = typename LanesOf<V>::T;
  if constexpr (sizeof(T) == 8) {
    for (int q = 0; q < N; ++q)
      for (int l = 0; l < LanesOf<V>::W; ++l)
        x[q][l] *= halfSumTanh(x[q][l]);
  } else {
    V s[N], e[N];
    geluSigmoidN<V, N>(x, s, e);
    for (int q = 0; q < N; ++q)
      x[q] *= s[q];
  }
}

/// x[q] ← GELU'(x[q]) = s + 2c x s (1 − s) (1 + 3a x²) with s = σ(2u) (that
/// is ½(1 + t) + ½x(1 − t²)·c(1 + 3a x²), t = tanh u). f32 takes 1 − s as
/// e s, and x clamped to ±15 in the second term: beyond, s (1 − s) is
/// below e^{−87} by the clamped exponent while (1 + 3a x²) x grows without
/// bound (∞ · 0 past x² = 1e38); the term is < 1e-34 there.
template <typename V, int N> UNROLL_VEC_INLINE void geluGradN(V *x) {
  using T = typename LanesOf<V>::T;
  if constexpr (sizeof(T) == 8) {
    for (int q = 0; q < N; ++q)
      for (int l = 0; l < LanesOf<V>::W; ++l) {
        T v = x[q][l], s = halfSumTanh(v);
        x[q][l] = s + T(2 * kGeluC) * v * s * (T(1) - s) * (T(1) + T(3 * kGeluA) * v * v);
      }
  } else {
    V s[N], e[N];
    geluSigmoidN<V, N>(x, s, e);
    for (int q = 0; q < N; ++q) {
      V xc;
      if constexpr (sizeof(V) == 64) // the smaller magnitude of x and 15, x's sign
        xc = __builtin_ia32_rangeps512_mask(x[q], V{} + 15.0f, 2, V{}, (unsigned short)0xffff, 4);
      else
        xc = x[q] < -15.0f ? V{} - 15.0f : x[q] > 15.0f ? V{} + 15.0f : x[q];
      x[q] =
          s[q] + (T(2 * kGeluC) * xc) * s[q] * (e[q] * s[q]) * (T(1) + T(3 * kGeluA) * (xc * xc));
    }
  }
}

template <typename V> UNROLL_VEC_INLINE V gelu(V x) {
  geluN<V, 1>(&x);
  return x;
}

template <typename V> UNROLL_VEC_INLINE V geluGrad(V x) {
  geluGradN<V, 1>(&x);
  return x;
}

typedef float f32x8u __attribute__((vector_size(32)));

/// The 8 x 8 transpose of rows r[0..7] in place (unpack, 128-bit-lane
/// shuffle, cross-lane permute: 24 shuffles for 64 values instead of 64
/// scalar loads and stores at a stride). Callers compiled for 256-bit
/// vectors or wider.
UNROLL_VEC_INLINE void transpose8(f32x8u r[8]) {
  f32x8u t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] =
          __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int c = 0; c < 4; ++c) {
    r[c] = __builtin_shufflevector(u[c], u[c + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    r[c + 4] = __builtin_shufflevector(u[c], u[c + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
}

} // namespace unroll::cpu

#endif // UNROLL_RUNTIME_CPU_VECMATH_H
