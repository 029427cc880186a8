//===- FuseElementwise.cpp - unroll-gpu-fuse-elementwise --------------------===//
//
// Linalg's elementwise fusion on tensors, except into contractions: those
// become library GEMM calls (unroll-gpu-gemm), which a fused prologue (a
// layer norm's normalization, GELU recomputed for every output) would
// prevent. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "../Contraction.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUFUSEELEMENTWISE
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

/// A contraction that unroll-gpu-gemm may turn into a library call: a
/// generic with reduction loops, two inputs and an acc + a·b body.
bool isContraction(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumReductionLoops() > 0 && generic.getNumDpsInputs() == 2 &&
         mlir::unroll::isMulAdd(generic);
}

struct FuseElementwise : public mlir::unroll::impl::UnrollGPUFuseElementwiseBase<FuseElementwise> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    linalg::ControlFusionFn control = [this](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      if (!producer || !producer->hasOneUse())
        return false;
      if (isContraction(fused->getOwner())) {
        ++numKept;
        return false;
      }
      return true;
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, control);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, control);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, ctx);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    ctx->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    GreedyRewriteConfig config;
    config.useTopDownTraversal = true;
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
  }
};

} // namespace
