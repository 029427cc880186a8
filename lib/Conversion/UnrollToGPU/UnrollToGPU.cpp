//===- UnrollToGPU.cpp - the convert-unroll-attention-to-gpu pass ---------===//
//
// Rewrites the attention ops whose tiles fit in shared memory as CTA kernels
// (FusedAttention.cpp) and leaves every other op, those attention ops whose
// tiles do not fit included, to convert-unroll-to-linalg.
//
//===----------------------------------------------------------------------===//
#include "unroll/Conversion/UnrollToGPU/UnrollToGPU.h"
#include "unroll/Conversion/Passes.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_CONVERTUNROLLATTENTIONTOGPU
#include "unroll/Conversion/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

struct ConvertUnrollAttentionToGPUPass
    : public unroll::impl::ConvertUnrollAttentionToGPUBase<ConvertUnrollAttentionToGPUPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t tile = attentionTile;
    if (tile < 0) {
      module.emitError() << "convert-unroll-attention-to-gpu: attention-tile must be >= 0 (0: "
                            "automatic), got "
                         << tile;
      return signalPassFailure();
    }
    // Every op stays as it is (no folding either), except the attention
    // ops that the kernels can take.
    ConversionTarget target(getContext());
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    target.addDynamicallyLegalOp<AttentionOp, AttentionVJPOp>(
        [tile](Operation *op) { return !fitsFusedAttention(op, tile); });
    RewritePatternSet patterns(&getContext());
    populateFusedAttentionPatterns(patterns, tile);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
