//===- FuseElementwise.cpp - unroll-gpu-fuse-elementwise --------------------===//
//
// Linalg's elementwise fusion on tensors, except into contractions: those
// become library GEMM calls (unroll-gpu-gemm), which a fused prologue (a
// layer norm's normalization, GELU recomputed for every output) would
// prevent. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Utils/Markers.h"
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

/// Whether `v` is a fill with zeros.
bool isZeroFill(Value v) { return mlir::unroll::isZeroFill(v.getDefiningOp<linalg::FillOp>()); }

/// Whether `add` is an elementwise x + y over identity maps.
bool isPlainAdd(linalg::GenericOp add) {
  if (add.getNumDpsInputs() != 2 || add.getNumDpsInits() != 1 || add.getNumReductionLoops() != 0 ||
      !llvm::all_of(add.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = add.getRegion().front();
  auto sum =
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!sum || &body.front() != sum.getOperation())
    return false;
  ValueRange args = body.getArguments();
  return (sum.getLhs() == args[0] && sum.getRhs() == args[1]) ||
         (sum.getLhs() == args[1] && sum.getRhs() == args[0]);
}

/// a + r, with r a reduction into a zero fill (a contraction, a column
/// sum) used only here and `a` used only here, becomes the reduction into
/// `a`: the gradient accumulations grad[W] += Xᵀ·dY and grad[b] += Σ dY of
/// the reverse iteration then write the flat gradient in place (a GEMM with
/// accumulate, a reduction starting from the old value) instead of a
/// product into a temporary, an add kernel and a copy back.
struct AccumulateIntoInit : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp add, PatternRewriter &rewriter) const override {
    if (!isPlainAdd(add))
      return failure();
    for (unsigned k = 0; k < 2; ++k) {
      Value r = add.getDpsInputs()[k], a = add.getDpsInputs()[1 - k];
      auto red = r.getDefiningOp<linalg::GenericOp>();
      if (!red || !r.hasOneUse() || !a.hasOneUse() || a.getType() != r.getType() ||
          r.getType() != add.getResult(0).getType() || red.getNumReductionLoops() == 0 ||
          !mlir::unroll::addsToInit(red) || !isZeroFill(red.getDpsInits()[0]))
        continue;
      // Where the add is: `a` may be defined after the reduction.
      rewriter.moveOpBefore(red, add);
      rewriter.modifyOpInPlace(red, [&] { red.getDpsInitsMutable()[0].set(a); });
      rewriter.replaceOp(add, r);
      return success();
    }
    return failure();
  }
};

/// a + (s inserted into zeros) becomes s' = a[slice] + s inserted into a:
/// only the slice is added (a position-embedding gradient covers the
/// prompt's n rows of the table's 23), and AccumulateIntoInit can then sum
/// s into a's slice in place.
struct AddOfPaddedSlice : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp add, PatternRewriter &rewriter) const override {
    if (!isPlainAdd(add) || add.getDpsInputs()[0].getType() != add.getResult(0).getType())
      return failure();
    for (unsigned k = 0; k < 2; ++k) {
      Value a = add.getDpsInputs()[1 - k];
      auto ins = add.getDpsInputs()[k].getDefiningOp<tensor::InsertSliceOp>();
      if (!ins || !ins->hasOneUse() || !isZeroFill(ins.getDest()) || !ins.hasUnitStride() ||
          ins.getSourceType().getRank() != ins.getDestType().getRank())
        continue;
      Location loc = add.getLoc();
      auto slice = rewriter.create<tensor::ExtractSliceOp>(
          loc, ins.getSourceType(), a, ins.getMixedOffsets(), ins.getMixedSizes(),
          ins.getMixedStrides());
      // The slice's sizes (not tensor.dim of s, which would be a second use).
      Value init = rewriter.create<tensor::EmptyOp>(loc, ins.getMixedSizes(),
                                                    ins.getSourceType().getElementType());
      auto part = rewriter.create<linalg::GenericOp>(
          loc, TypeRange{ins.getSourceType()}, ValueRange{slice, ins.getSource()}, ValueRange{init},
          add.getIndexingMapsArray(), add.getIteratorTypesArray(),
          [&](OpBuilder &b, Location l, ValueRange args) {
            b.create<linalg::YieldOp>(l, b.create<arith::AddFOp>(l, args[0], args[1]).getResult());
          });
      rewriter.replaceOpWithNewOp<tensor::InsertSliceOp>(add, part.getResult(0), a,
                                                         ins.getMixedOffsets(), ins.getMixedSizes(),
                                                         ins.getMixedStrides());
      // Now, so that s has one use when the new add is matched.
      rewriter.eraseOp(ins);
      return success();
    }
    return failure();
  }
};

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
    patterns.add<AccumulateIntoInit, AddOfPaddedSlice>(ctx);
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
    // Fusion gave the ops it rebuilt fresh inits (and drops inits an op does
    // not read): the tape's slots are written in place again.
    unroll::writeMarkedSlicesInPlace(getOperation());
    // The inits fusion replaced may still be read by tensor.dim: folded to
    // the dims of what they filled, the dead fills go, and no longer write
    // the slots (which bufferization would then copy).
    RewritePatternSet cleanup(ctx);
    tensor::DimOp::getCanonicalizationPatterns(cleanup, ctx);
    if (failed(applyPatternsAndFoldGreedily(getOperation(), std::move(cleanup))))
      return signalPassFailure();
  }
};

} // namespace
