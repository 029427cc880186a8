//===- Gemm.cpp - unroll-gpu-gemm --------------------------------------------===//
//
// Dense contractions of the GPU lowering become calls of unroll_gpu_gemm_*
// (cuBLASLt on the GPU, a host loop in emulated libraries). See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Transforms/Passes.h"
#include "unroll/runtime/GpuKernels.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUGEMM
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct Gemm : public mlir::unroll::impl::UnrollGPUGemmBase<Gemm> {
  using Base::Base;

  void runOnOperation() override {
    if (precision != "f32" && precision != "tf32" && precision != "bf16") {
      getOperation().emitError() << "unroll-gpu-gemm: precision must be f32, tf32 or bf16, got '"
                                 << precision << "'";
      return signalPassFailure();
    }
    mlir::unroll::generalizeMatmuls(getOperation());
    mlir::unroll::ContractionCall call;
    call.name = [](bool f32) { return std::string(::unroll::abi::gpuGemmName(f32)); };
    call.numArgs = ::unroll::abi::kGpuGemmArgs;
    call.extraArgs = {precision == "tf32"   ? UNROLL_GEMM_TF32
                      : precision == "bf16" ? UNROLL_GEMM_BF16
                                            : 0};
    // Batched products (attention's per-(batch, head) matrices) stay
    // kernels: one library call per batch index would cost more launches
    // than the products do.
    call.batchLoops = false;
    call.unitStride = true;
    // cuBLASLt's BIAS epilogue: a bias broadcast into C is not a kernel.
    call.biasArg = true;
    call.biasFlag = UNROLL_GEMM_BIAS;
    // cuBLASLt's GELU_AUX epilogue, on request (not yet checked on a GPU).
    call.epilogueArg = true;
    call.geluFlag = geluEpilogue ? UNROLL_GEMM_GELU_AUX : 0;
    call.dgeluFlag = geluEpilogue ? UNROLL_GEMM_DGELU : 0;
    // The candidates, collected first: a rewrite may erase a GELU or GELU
    // gradient op after its contraction (never another contraction).
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.getNumDpsInputs() == 2 && mlir::unroll::isMulAdd(op))
        generics.push_back(op);
    });
    for (linalg::GenericOp op : generics)
      if (succeeded(mlir::unroll::rewriteContraction(op, call)))
        ++numCalls;
  }
};

} // namespace
