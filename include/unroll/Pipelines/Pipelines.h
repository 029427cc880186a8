//===- Pipelines.h - named unroll pipelines ---------------------*- C++ -*-===//
//
// --lower-to-cpu, --lower-to-gpu and --lower-to-gpu-emulated as library code
// with option structs (the options after the pipeline's name on the
// command line: --lower-to-gpu="chip=sm_90 format=isa").
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_PIPELINES_PIPELINES_H
#define UNROLL_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace mlir::unroll {

/// The front end's options, which every pipeline takes: how models are
/// differentiated and when their loops halt.
template <typename Derived>
struct FrontEndOptions : public PassPipelineOptions<Derived> {
  template <typename T>
  using Option = mlir::detail::PassOptions::Option<T>;
  Option<bool> recomputeWindow{
      *this, "recompute-window",
      llvm::cl::desc("Models: the backward pass recomputes each window iteration's block from "
                     "its stored input instead of storing the activations its VJPs read (less "
                     "memory, more arithmetic)"),
      llvm::cl::init(false)};
  Option<std::string> gradient{
      *this, "gradient",
      llvm::cl::desc("Models: override how each loop is differentiated: bptt, "
                     "implicit[:TOL[:MAX]], jfb or phantom[:K[:TAU]] (docs/training.md)"),
      llvm::cl::init("")};
  Option<std::string> until{
      *this, "until", llvm::cl::desc("Models: override each loop's halting rule: TOL:MAX, or none"),
      llvm::cl::init("")};
};

/// Options of --lower-to-cpu.
struct LowerToCPUOptions : public FrontEndOptions<LowerToCPUOptions> {
  Option<bool> fuseElementwise{
      *this, "fuse-elementwise",
      llvm::cl::desc("Fold elementwise producers into their consumers (not into contractions, "
                     "which call the GEMM kernel) and accumulate gradients in place"),
      llvm::cl::init(true)};
};

/// Options of --lower-to-gpu (and of --lower-to-gpu-emulated, which ignores
/// chip, format and cuda-path).
/// How the GPU pipeline lowers attention.
enum class AttentionLowering { Fused, Generic };

struct LowerToGPUOptions : public FrontEndOptions<LowerToGPUOptions> {
  Option<std::string> chip{*this, "chip",
                           llvm::cl::desc("GPU to compile kernels for (e.g. sm_80, sm_90)"),
                           llvm::cl::init("sm_90")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Kernel format embedded in the library: bin (cubin, needs ptxas), isa "
                     "(PTX text, JIT-compiled by the driver) or fatbin"),
      llvm::cl::init("bin")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit for ptxas and libdevice (default: $CUDA_HOME, else "
                     "/usr/local/cuda)"),
      llvm::cl::init("")};
  Option<int64_t> blockSize{*this, "block-size", llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Matrix products (cuBLASLt): f32 (FP32 compute, as PyTorch with TF32 off), "
                     "tf32 (TF32 tensor cores, f32 accumulation) or bf16 (operands rounded to "
                     "bf16 on tensor cores, f32 accumulation; activations, weights and Adam "
                     "stay f32)"),
      llvm::cl::init("f32")};
  Option<bool> geluEpilogue{
      *this, "gelu-epilogue",
      llvm::cl::desc("The MLP's GELU in the up-projection's cuBLASLt epilogue (GELU_AUX_BIAS, "
                     "the pre-activation kept for the backward); off by default until a GPU "
                     "run shows cuBLASLt's GELU matches the model's tanh GELU"),
      llvm::cl::init(false)};
  Option<AttentionLowering> attention{
      *this, "attention", llvm::cl::desc("Attention and its gradient"),
      llvm::cl::init(AttentionLowering::Fused),
      llvm::cl::values(
          clEnumValN(AttentionLowering::Fused, "fused",
                     "one kernel and three, tiles in shared memory, online softmax "
                     "(convert-unroll-attention-to-gpu)"),
          clEnumValN(AttentionLowering::Generic, "generic",
                     "score, softmax and product kernels over [B, H, n, n] "
                     "(convert-unroll-to-linalg)"))};
  Option<int64_t> attentionTile{
      *this, "attention-tile",
      llvm::cl::desc("Fused attention: rows per query/key tile (0: the largest of 32, 16, 8, "
                     "... that fits in 48 KB of shared memory)"),
      llvm::cl::init(0)};
  Option<bool> emulateReverseThreads{
      *this, "emulate-reverse-threads",
      llvm::cl::desc("--lower-to-gpu-emulated: run the threads of each phase of a shared-memory "
                     "kernel last to first (a test for races between threads)"),
      llvm::cl::init(false)};

  /// cuda-path if given, else $CUDA_HOME, else /usr/local/cuda.
  std::string toolkit() const;
};

/// --lower-to-cpu: derive steps, differentiate, build the entry points, lower
/// to linalg, bufferize, and lower to the LLVM dialect; the result is
/// translated by unroll-translate.
void buildLowerToCPUPipeline(OpPassManager &pm, const LowerToCPUOptions &options);
/// --lower-to-gpu: the same front end, then one gpu.launch per fused loop
/// nest, NVVM kernels serialized for the chip in the format with the CUDA
/// toolkit, and host code calling the mgpu* runtime.
void buildLowerToGPUPipeline(OpPassManager &pm, const LowerToGPUOptions &options);
/// --lower-to-gpu-emulated: --lower-to-gpu's kernel mapping with the kernels
/// run as host loops; the CPU oracle for the GPU lowering.
void buildLowerToGPUEmulatedPipeline(OpPassManager &pm, const LowerToGPUOptions &options);
/// Registers the named pipelines with the pass registry.
void registerUnrollPipelines();

} // namespace mlir::unroll

#endif // UNROLL_PIPELINES_PIPELINES_H
