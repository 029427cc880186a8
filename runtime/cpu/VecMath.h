//===- VecMath.h - exp, tanh and GELU on vectors for the CPU kernels ------===//
//
// Internal to libunroll_cpu_kernels.a (Attention.cpp, Gemm.cpp): the
// transcendental functions the kernels apply to whole vectors. V is a GCC
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

namespace unroll::cpu {

#define UNROLL_VEC_INLINE inline __attribute__((always_inline))

template <typename V> struct LanesOf {
  using T = std::remove_reference_t<decltype(V{}[0])>;
  static constexpr int W = sizeof(V) / sizeof(T);
};

/// exp of every lane, x <= 0. f32: range reduction x = t ln2 + f,
/// |f| <= ln2/2, and Cephes' degree-6 polynomial (relative error ~2e-7).
template <typename V> UNROLL_VEC_INLINE V expNonPositive(V x) {
  using T = typename LanesOf<V>::T;
  if constexpr (sizeof(T) == 8) {
    for (int l = 0; l < LanesOf<V>::W; ++l)
      x[l] = std::exp(x[l]);
    return x;
  } else {
    typedef int32_t I __attribute__((vector_size(sizeof(V))));
    x = x < -87.0f ? V{} - 87.0f : x;
    V t = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; // round to nearest
    V f = x - t * 0.693359375f + t * 2.12194440e-4f;
    V p = 1.9875691500e-4f - V{};
    p = p * f + 1.3981999507e-3f;
    p = p * f + 8.3334519073e-3f;
    p = p * f + 4.1665795894e-2f;
    p = p * f + 1.6666665459e-1f;
    p = p * f + 5.0000001201e-1f;
    p = p * f * f + f + 1.0f;
    I bits = (__builtin_convertvector(t, I) + 127) << 23;
    V scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
  }
}

/// tanh of every lane. f32: the odd Taylor polynomial to x⁹ below |x| 0.3
/// (error < 2e-8 there), sign(x) (1 − e) / (1 + e) with e = exp(−2|x|)
/// above (absolute error ~2e-7).
template <typename V> UNROLL_VEC_INLINE V tanhOf(V x) {
  using T = typename LanesOf<V>::T;
  if constexpr (sizeof(T) == 8) {
    for (int l = 0; l < LanesOf<V>::W; ++l)
      x[l] = std::tanh(x[l]);
    return x;
  } else {
    V a = x < 0 ? -x : x;
    V e = expNonPositive(-2.0f * a);
    V big = (1.0f - e) / (1.0f + e);
    big = x < 0 ? -big : big;
    V x2 = x * x;
    V small = x * (1.0f +
                   x2 * (-1.0f / 3 + x2 * (2.0f / 15 + x2 * (-17.0f / 315 + x2 * (62.0f / 2835)))));
    return a < 0.3f ? small : big;
  }
}

// The model's GELU (tanh form, unroll.gelu) and its derivative.
constexpr double kGeluC = 0.7978845608028654, kGeluA = 0.044715;

template <typename V> UNROLL_VEC_INLINE V gelu(V x) {
  using T = typename LanesOf<V>::T;
  return T(0.5) * x * (T(1) + tanhOf(T(kGeluC) * (x + T(kGeluA) * x * x * x)));
}

/// d/dx GELU: ½(1 + t) + ½x(1 − t²)·c(1 + 3a x²), t = tanh(c(x + a x³)).
template <typename V> UNROLL_VEC_INLINE V geluGrad(V x) {
  using T = typename LanesOf<V>::T;
  V t = tanhOf(T(kGeluC) * (x + T(kGeluA) * x * x * x));
  return T(0.5) * (T(1) + t) +
         T(0.5) * x * (T(1) - t * t) * T(kGeluC) * (T(1) + T(3 * kGeluA) * x * x);
}

} // namespace unroll::cpu

#endif // UNROLL_RUNTIME_CPU_VECMATH_H
