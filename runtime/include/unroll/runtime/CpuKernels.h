/*===- CpuKernels.h - the C ABI of the kernels inside compiled.so -*- C -*-===//
 *
 * One declaration of every function that generated code calls and the CPU
 * runtime (runtime/cpu/) defines, shared by the kernels, the compiler passes
 * that emit the calls (lib/Transforms/CPUGemm.cpp,
 * lib/Conversion/UnrollToLinalg/Attention.cpp: they take the names and the
 * argument counts from here), the benchmarks and the tests. Generated code
 * passes every argument as an index (a 64-bit integer: sizes, strides in
 * elements, and addresses), which is why the compiler needs only the count.
 *
 *   unroll_gemm_<f32|f64>           C (+)= A · B, strided (runtime/cpu/Gemm.cpp)
 *   unroll_gemm_ex_<f32|f64>        the same with the epilogues of GemmFlags.h (bias,
 *                                   GELU, GELU's gradient, a residual matrix) applied
 *                                   to the output tile, or A's row sums (a bias
 *                                   gradient) added while A is packed
 *   unroll_cpu_set_precision        bf16 operands for the f32 GEMMs (AVX512_BF16)
 *   unroll_cpu_bf16_rates           f32 and bf16 GEMM rates measured on this CPU
 *   unroll_cpu_bf16_kernel          which kernel bf16 operands run on (AMX or not)
 *   unroll_attention_<f32|f64>      causal multi-head attention forward
 *   unroll_attention_vjp_<f32|f64>  and its VJP (runtime/cpu/Attention.cpp)
 *   unroll_layer_norm_<f32|f64>     LayerNorm over the last dimension, one pass per row
 *   unroll_layer_norm_vjp_<f32|f64> and its VJP (runtime/cpu/LayerNorm.cpp)
 *   unroll_state_*                  resident training state (runtime/cpu/Alloc.cpp;
 *                                   the GPU runtime defines the same symbols)
 *
 *===----------------------------------------------------------------------===*/
#ifndef UNROLL_RUNTIME_CPUKERNELS_H
#define UNROLL_RUNTIME_CPUKERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "unroll/runtime/GemmFlags.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C[M, N] (+)= A[M, K] · B[K, N], element strides sXr (rows) and sXc
 * (columns) per operand; accumulate = 0 overwrites C. */
void unroll_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                     const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm, int64_t sCn,
                     int64_t accumulate);
void unroll_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                     const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm, int64_t sCn,
                     int64_t accumulate);

/* The GEMM with epilogues, with unroll_gpu_gemm_*'s arguments (GpuKernels.h):
 * C (+)= A · B, then, as each block of C is complete, C += bias[n]
 * (UNROLL_GEMM_BIAS), D = GELU(C) (UNROLL_GEMM_GELU_AUX) or C ∘= GELU'(D)
 * (UNROLL_GEMM_DGELU; D holds GELU's input). D has C's strides; bias and D
 * are null where their flag is not set. With UNROLL_GEMM_GELU_AUX, D = C
 * applies GELU in place (C's pre-activation is not kept). */
void unroll_gemm_ex_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t sAm, int64_t sAk,
                        const float *B, int64_t sBk, int64_t sBn, float *C, int64_t sCm,
                        int64_t sCn, int64_t accumulate, int64_t flags, const float *bias,
                        float *D);
void unroll_gemm_ex_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t sAm, int64_t sAk,
                        const double *B, int64_t sBk, int64_t sBn, double *C, int64_t sCm,
                        int64_t sCn, int64_t accumulate, int64_t flags, const double *bias,
                        double *D);

/* The operand precision of the f32 GEMMs' blocked path: 0 = f32, 1 = bf16
 * (operands rounded to bfloat16 as they are packed, products accumulated
 * in f32 with vdpbf16ps, or AMX's tdpbf16ps where the CPU and the OS allow
 * it (UNROLL_GEMM_AMX=0 turns that off); the narrow kernel and f64 are
 * unchanged). bf16
 * needs AVX512_BF16: unroll_cpu_set_precision returns the precision now in
 * effect (0 when bf16 was asked for on a CPU without it). The initial value
 * comes from $UNROLL_CPU_PRECISION (f32 or bf16). */
int32_t unroll_cpu_bf16_supported(void);

/* Marks [p, p + bytes) as memory that the calling thread's kernels only
 * read until its next call of this function (p = NULL: none): a GEMM whose
 * B lies there packs it the first time and reuses the packed copy after
 * (a looped model's weights are the B of the same products in every
 * iteration). unroll-run marks θ during each call of a compiled function;
 * UNROLL_GEMM_PACKED_WEIGHTS=0 turns the reuse off. */
void unroll_cpu_read_only(const void *p, size_t bytes);
/* Lends the calling thread to the other threads' blocked f32 and f64 products
 * until *running (read atomically) drops to 0: unroll-run's threads call it
 * when they have no chunks of a batch left, with the count of threads still
 * running chunks. A product on another thread hands it blocks of its rows;
 * the results are the same bit for bit. UNROLL_HELP=0 in unroll-run turns
 * it off. */
void unroll_cpu_help(const int32_t *running);
/* How many row blocks helping threads have run so far (a diagnostic:
 * UNROLL_GEMM_PROFILE and unroll-gemm-bench --check-help print it). */
uint64_t unroll_cpu_helped_blocks(void);
int32_t unroll_cpu_set_precision(int32_t bf16);
int32_t unroll_cpu_precision(void);
/* Which kernel bf16 operands run on: "amx" (AMX tiles), "avx512bf16"
 * (vdpbf16ps) or "none" (no AVX512_BF16). */
const char *unroll_cpu_bf16_kernel(void);
/* Times one f32 GEMM (512 x 512 x 256) with f32 and with bf16 operands,
 * best of 5 each (~10 ms), into the two rates (GFLOP/s); returns 0 without
 * AVX512_BF16. vdpbf16ps is not faster everywhere: where it issues on one
 * port and FMAs on two (an Intel Xeon of this project's hosts), bf16 ran
 * at 0.6x f32 without AMX (4.6x with it). */
int32_t unroll_cpu_bf16_rates(double *f32Gflops, double *bf16Gflops);

/* out[b, i, h·hd + e] = Σ_{j ≤ i} softmax_j(q_i·k_j / √hd) v_j[e] for qkv
 * [B, n, 3·H·hd] (q | k | v, heads contiguous); strides of the batch and
 * token dimensions in elements, the last dimension contiguous. */
void unroll_attention_f32(int64_t B, int64_t n, int64_t H, int64_t hd, const float *qkv,
                          int64_t sQb, int64_t sQi, float *out, int64_t sOb, int64_t sOi);
void unroll_attention_f64(int64_t B, int64_t n, int64_t H, int64_t hd, const double *qkv,
                          int64_t sQb, int64_t sQi, double *out, int64_t sOb, int64_t sOi);
/* dqkv (layout of qkv, every element written) from qkv and dout. */
void unroll_attention_vjp_f32(int64_t B, int64_t n, int64_t H, int64_t hd, const float *qkv,
                              int64_t sQb, int64_t sQi, const float *dout, int64_t sDb, int64_t sDi,
                              float *dqkv, int64_t sGb, int64_t sGi);
void unroll_attention_vjp_f64(int64_t B, int64_t n, int64_t H, int64_t hd, const double *qkv,
                              int64_t sQb, int64_t sQi, const double *dout, int64_t sDb,
                              int64_t sDi, double *dqkv, int64_t sGb, int64_t sGi);

/* y[b, i, :] = (x − mean) · rstd · g + bias over the F values of each
 * token, rstd = 1/√(var + eps) (eps: the bits of a double); x and y strided
 * in their batch and token dimensions, the last dimension contiguous. */
void unroll_layer_norm_f32(int64_t B, int64_t n, int64_t F, const float *x, int64_t sXb,
                           int64_t sXi, const float *g, const float *bias, float *y, int64_t sYb,
                           int64_t sYi, int64_t epsBits);
void unroll_layer_norm_f64(int64_t B, int64_t n, int64_t F, const double *x, int64_t sXb,
                           int64_t sXi, const double *g, const double *bias, double *y, int64_t sYb,
                           int64_t sYi, int64_t epsBits);
/* dx (layout of x, every element written), dg and db [F] (overwritten) from
 * x and dy; with a non-null `add` (strided like dy), dx = add + the layer
 * norm's part (the rest of x's cotangent, summed in the same pass). */
void unroll_layer_norm_vjp_f32(int64_t B, int64_t n, int64_t F, const float *x, int64_t sXb,
                               int64_t sXi, const float *g, const float *dy, int64_t sDb,
                               int64_t sDi, const float *add, int64_t sAb, int64_t sAi, float *dx,
                               int64_t sGb, int64_t sGi, float *dg, float *db, int64_t epsBits);
void unroll_layer_norm_vjp_f64(int64_t B, int64_t n, int64_t F, const double *x, int64_t sXb,
                               int64_t sXi, const double *g, const double *dy, int64_t sDb,
                               int64_t sDi, const double *add, int64_t sAb, int64_t sAi,
                               double *dx, int64_t sGb, int64_t sGi, double *dg, double *db,
                               int64_t epsBits);

/* Resident training state (docs/abi.md): zeroed, 64-byte aligned buffers
 * that the entry points use in place. */
void *unroll_state_alloc(size_t bytes);
void unroll_state_free(void *p);
int32_t unroll_state_resident(uintptr_t addr);
uint64_t unroll_state_hits(void);
void unroll_state_write(void *state, const void *host, size_t bytes);
void unroll_state_read(void *host, const void *state, size_t bytes);

#ifdef __cplusplus
} /* extern "C" */

namespace unroll::abi {

/// The number of (index-typed) arguments of a kernel, from its declaration.
template <typename F> struct Arity;
template <typename R, typename... A> struct Arity<R(A...)> {
  static constexpr unsigned value = sizeof...(A);
};

inline constexpr unsigned kGemmArgs = Arity<decltype(unroll_gemm_f32)>::value;
inline constexpr unsigned kGemmExArgs = Arity<decltype(unroll_gemm_ex_f32)>::value;
inline constexpr unsigned kAttentionArgs = Arity<decltype(unroll_attention_f32)>::value;
inline constexpr unsigned kAttentionVJPArgs = Arity<decltype(unroll_attention_vjp_f32)>::value;
inline constexpr unsigned kLayerNormArgs = Arity<decltype(unroll_layer_norm_f32)>::value;
inline constexpr unsigned kLayerNormVJPArgs = Arity<decltype(unroll_layer_norm_vjp_f32)>::value;
static_assert(Arity<decltype(unroll_gemm_f64)>::value == kGemmArgs &&
                  Arity<decltype(unroll_gemm_ex_f64)>::value == kGemmExArgs &&
                  Arity<decltype(unroll_attention_f64)>::value == kAttentionArgs &&
                  Arity<decltype(unroll_attention_vjp_f64)>::value == kAttentionVJPArgs &&
                  Arity<decltype(unroll_layer_norm_f64)>::value == kLayerNormArgs &&
                  Arity<decltype(unroll_layer_norm_vjp_f64)>::value == kLayerNormVJPArgs,
              "the f32 and f64 kernels take the same arguments");

/// Kernel names by element type (f32 or not).
inline const char *gemmName(bool f32) { return f32 ? "unroll_gemm_f32" : "unroll_gemm_f64"; }
inline const char *gemmExName(bool f32) {
  return f32 ? "unroll_gemm_ex_f32" : "unroll_gemm_ex_f64";
}
inline const char *layerNormName(bool f32, bool vjp) {
  return vjp ? (f32 ? "unroll_layer_norm_vjp_f32" : "unroll_layer_norm_vjp_f64")
             : (f32 ? "unroll_layer_norm_f32" : "unroll_layer_norm_f64");
}
inline const char *attentionName(bool f32, bool vjp) {
  return vjp ? (f32 ? "unroll_attention_vjp_f32" : "unroll_attention_vjp_f64")
             : (f32 ? "unroll_attention_f32" : "unroll_attention_f64");
}

} // namespace unroll::abi
#endif /* __cplusplus */

#endif /* UNROLL_RUNTIME_CPUKERNELS_H */
