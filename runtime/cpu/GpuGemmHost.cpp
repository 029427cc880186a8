//===- GpuGemmHost.cpp - unroll_gpu_gemm_* for emulated GPU libraries -----===//
//
// --lower-to-gpu-emulated libraries run every kernel as host loops; their
// contractions call the GPU GEMM ABI like real GPU libraries, and this file
// implements it on the host with a plain triple loop (the oracle for the
// strides, transposes and accumulation that the cuBLASLt path in
// runtime/gpu/Blas.cpp receives). With UNROLL_GEMM_TF32 the f32 operands are
// rounded to TF32 first (10-bit mantissa, to nearest, ties away from zero:
// cvt.rna.tf32.f32), as tensor cores do; with UNROLL_GEMM_BF16 to bf16
// (8-bit mantissa, to nearest even: cvt.rn.bf16.f32).
//
//===----------------------------------------------------------------------===//
#include "unroll/runtime/GpuKernels.h"

#include <cmath>
#include <cstring>

namespace {

float toTF32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) // finite: round the low 13 bits away
    bits = (bits + 0x1000u) & 0xffffe000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

float toBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) // finite: the low 16 bits, to nearest even
    bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// The model's GELU (tanh form, unroll.gelu).
template <typename T> T gelu(T x) {
  const T c = T(0.7978845608028654), a = T(0.044715);
  return T(0.5) * x * (T(1) + std::tanh(c * (x + a * x * x * x)));
}

/// Its derivative: ½(1 + t) + ½x(1 − t²)·c(1 + 3a x²), t = tanh(c(x + a x³)).
template <typename T> T geluGrad(T x) {
  const T c = T(0.7978845608028654), a = T(0.044715);
  T t = std::tanh(c * (x + a * x * x * x));
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * c * (T(1) + T(3) * a * x * x);
}

template <typename T>
void gemm(int64_t M, int64_t N, int64_t K, const T *A, int64_t sAm, int64_t sAk, const T *B,
          int64_t sBk, int64_t sBn, T *C, int64_t sCm, int64_t sCn, int64_t accumulate,
          int64_t flags, const T *bias, T *D) {
  bool tf32 = sizeof(T) == 4 && (flags & UNROLL_GEMM_TF32);
  bool bf16 = sizeof(T) == 4 && (flags & UNROLL_GEMM_BF16);
  auto in = [&](T v) { return tf32 ? T(toTF32(float(v))) : bf16 ? T(toBF16(float(v))) : v; };
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += in(A[i * sAm + k * sAk]) * in(B[k * sBk + j * sBn]);
      if (flags & UNROLL_GEMM_BIAS)
        acc += bias[j];
      if (flags & UNROLL_GEMM_DGELU)
        acc *= geluGrad(D[i * sCm + j * sCn]);
      T &c = C[i * sCm + j * sCn];
      c = accumulate ? c + acc : acc;
      if (flags & UNROLL_GEMM_GELU_AUX)
        D[i * sCm + j * sCn] = gelu(c);
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
