//===- UnrollToLinalg.cpp - the convert-unroll-to-linalg pass -------------===//
//
// Applies every op family's conversion patterns to the functions that
// convert-unroll-to-entry-points built, then folds the casts between energy
// terms and their scalar values and writes the tape's marked slices in place.
//
//===----------------------------------------------------------------------===//
#include "unroll/Conversion/UnrollToLinalg/UnrollToLinalg.h"
#include "unroll/Conversion/Passes.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_CONVERTUNROLLTOLINALG
#include "unroll/Conversion/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

void mlir::unroll::populateUnrollToLinalgPatterns(RewritePatternSet &patterns, bool cpuKernels) {
  populateLinearPatterns(patterns);
  populateLayerNormPatterns(patterns, cpuKernels);
  populateAttentionPatterns(patterns, cpuKernels);
  populateElementwisePatterns(patterns);
  populateEnergyTermPatterns(patterns);
  populateStepPatterns(patterns);
  populateSparseCodingPatterns(patterns);
  populateHopfieldPatterns(patterns);
  populateKernelEnergyPatterns(patterns);
}

namespace {

/// cast(cast(v : T -> !unroll.energy) : !unroll.energy -> T) -> v: the entry
/// points read a term's value back from its lowered scalar.
void foldEnergyCasts(Operation *root) {
  SmallVector<UnrealizedConversionCastOp> casts;
  root->walk([&](UnrealizedConversionCastOp c) { casts.push_back(c); });
  for (UnrealizedConversionCastOp c : casts) {
    if (c.getNumOperands() != 1 || c.getNumResults() != 1)
      continue;
    auto inner = c.getOperand(0).getDefiningOp<UnrealizedConversionCastOp>();
    if (!inner || inner.getNumOperands() != 1 ||
        inner.getOperand(0).getType() != c.getResult(0).getType())
      continue;
    c.getResult(0).replaceAllUsesWith(inner.getOperand(0));
    c.erase();
    if (inner->use_empty())
      inner.erase();
  }
}

struct ConvertUnrollToLinalgPass
    : public unroll::impl::ConvertUnrollToLinalgBase<ConvertUnrollToLinalgPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (Operation &op : *module.getBody())
      if (isa<EnergyOp, ModelOp>(op)) {
        op.emitOpError("must be turned into entry points first: run "
                       "--convert-unroll-to-entry-points (or use --lower-to-cpu)");
        return signalPassFailure();
      }
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, math::MathDialect, linalg::LinalgDialect,
                           tensor::TensorDialect, scf::SCFDialect, func::FuncDialect,
                           memref::MemRefDialect, bufferization::BufferizationDialect>();
    target.addIllegalDialect<UnrollDialect>();
    // Terminators of the scalar regions inside ops that are being converted.
    target.addLegalOp<YieldOp, UnrealizedConversionCastOp>();
    // Calls of the CPU kernels (cpu-kernels), made func.calls after bufferization.
    target.addLegalOp<KernelCallOp>();
    RewritePatternSet patterns(ctx);
    populateUnrollToLinalgPatterns(patterns, cpuKernels);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();
    foldEnergyCasts(module);
    // The marks stay for unroll-gpu-fuse-elementwise (bufferization ignores
    // them).
    writeMarkedSlicesInPlace(module, /*keepMarks=*/true);
  }
};

} // namespace
