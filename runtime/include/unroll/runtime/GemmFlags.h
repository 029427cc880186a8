/*===- GemmFlags.h - the flags of the GEMM calls of compiled.so ---*- C -*-===*
 *
 * One set of flags for the GPU GEMM (unroll_gpu_gemm_*, GpuKernels.h:
 * cuBLASLt's compute types and epilogues) and the CPU one (unroll_gemm_ex_*,
 * CpuKernels.h: the same epilogues on the output tile; TF32 and BF16 are
 * ignored).
 *
 *===----------------------------------------------------------------------===*/
#ifndef UNROLL_RUNTIME_GEMMFLAGS_H
#define UNROLL_RUNTIME_GEMMFLAGS_H

/* Compute in TF32 (f32 operands rounded to a
 * 10-bit mantissa, f32 accumulation; cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32). */
#define UNROLL_GEMM_TF32 1
/* ... and add bias[n] to every row of C (cuBLASLt's BIAS epilogue; C
 * row-major, bias contiguous, accumulate = 0). */
#define UNROLL_GEMM_BIAS 2
/* ... and write GELU(C) (tanh GELU, after the bias) to D, which has C's
 * strides; C keeps the pre-activation (cuBLASLt's GELU_AUX(_BIAS)
 * epilogue: D the output, C the aux matrix; C row-major, accumulate = 0).
 * On the CPU D may be C: GELU in place, the pre-activation not kept. */
#define UNROLL_GEMM_GELU_AUX 4
/* ... or, instead, C = GELU'(D) ∘ (A · B), D (GELU's input, C's strides)
 * read (cuBLASLt's DGELU epilogue with D as the aux matrix; C row-major,
 * accumulate = 0, no bias). */
#define UNROLL_GEMM_DGELU 8
/* ... or C += D after the bias (D, C's strides, read): a residual sum r = x
 * + (A·B + b) written by the call that forms the product, C = r and D = x,
 * instead of a pass of its own. Not with GELU_AUX or DGELU (D is theirs).
 * CPU only (unroll-cpu-gemm); the GPU GEMM pass does not emit it. */
#define UNROLL_GEMM_ADD_D 16
/* ... and D[m] += Σ_k A[m, k] (D a contiguous vector of M): the bias
 * gradient of a weight gradient dW = dYᵀ·X, Σ over the rows of dY, summed
 * while the call packs dY instead of in a pass of its own. Not with
 * GELU_AUX, DGELU or ADD_D. CPU only. */
#define UNROLL_GEMM_ROWSUM_A 32
/* Compute in bf16 (f32 operands rounded to an 8-bit mantissa, to nearest
 * even, f32 accumulation; cuBLASLt's CUBLAS_COMPUTE_32F_FAST_16BF). Not with
 * TF32. */
#define UNROLL_GEMM_BF16 64

#endif /* UNROLL_RUNTIME_GEMMFLAGS_H */
