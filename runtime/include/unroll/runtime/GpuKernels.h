/*===- GpuKernels.h - the library ABI of GPU compiled.so ---------*- C -*-===*
 *
 * What the host code of a --lower-to-gpu library calls besides MLIR's mgpu*
 * interface (unroll-gpu-gemm, unroll-gpu-serial-kernels):
 *
 *   unroll_gpu_gemm_<f32|f64>   C (+)= A · B, strided, on the calling
 *                               thread's stream: cuBLASLt in GPU libraries
 *                               (runtime/gpu/Blas.cpp), a plain host loop in
 *                               --lower-to-gpu-emulated libraries
 *                               (runtime/cpu/GpuGemmHost.cpp)
 *   unroll_gpu_read_<type>      a device scalar for host control flow
 *
 *===----------------------------------------------------------------------===*/
#ifndef UNROLL_RUNTIME_GPUKERNELS_H
#define UNROLL_RUNTIME_GPUKERNELS_H

#include <stdint.h>

#include "unroll/runtime/GemmFlags.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Flags of unroll_gpu_gemm_*: GemmFlags.h (the CPU GEMM takes the same). */

/* C[M, N] (+)= A[M, K] · B[K, N] (+ bias[N] with UNROLL_GEMM_BIAS) with
 * element strides sXr (rows) and sXc (columns); each operand has a unit
 * stride in one of the two. accumulate = 0 overwrites C. With
 * UNROLL_GEMM_GELU_AUX also D = GELU(C). A, B, C, bias and D are device
 * addresses; bias is null without UNROLL_GEMM_BIAS, D without
 * UNROLL_GEMM_GELU_AUX or UNROLL_GEMM_DGELU. */
void unroll_gpu_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                         const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm,
                         int64_t sCn, int64_t accumulate, int64_t flags, const float *bias,
                         float *D);
void unroll_gpu_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                         const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm,
                         int64_t sCn, int64_t accumulate, int64_t flags, const double *bias,
                         double *D);

#ifdef __cplusplus
} /* extern "C" */

namespace unroll::abi {
/// unroll_gpu_gemm_*'s arguments: the CPU GEMM's 13, the flags, the bias,
/// the GELU output.
inline constexpr unsigned kGpuGemmArgs = 16;
inline const char *gpuGemmName(bool f32) {
  return f32 ? "unroll_gpu_gemm_f32" : "unroll_gpu_gemm_f64";
}
} // namespace unroll::abi
#endif /* __cplusplus */

#endif /* UNROLL_RUNTIME_GPUKERNELS_H */
