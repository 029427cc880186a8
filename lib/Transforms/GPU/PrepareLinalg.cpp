//===- PrepareLinalg.cpp - unroll-gpu-prepare-linalg ------------------------===//
//
// Interchanges every linalg.generic so its parallel dimensions are outermost
// and wraps full reductions in a one-iteration scf.parallel.
// See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUPREPARELINALG
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct PrepareLinalg : public unroll::impl::UnrollGPUPrepareLinalgBase<PrepareLinalg> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Named ops whose reductions are not innermost become generics first.
    SmallVector<linalg::LinalgOp> named;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp>(op) && !reductionsInnermost(op))
        named.push_back(op);
    });
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op))) {
        op.emitOpError("cannot be generalized for the GPU lowering");
        return signalPassFailure();
      }
    }
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      if (reductionsInnermost(op))
        continue;
      SmallVector<unsigned> perm;
      auto iters = op.getIteratorTypesArray();
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] == utils::IteratorType::parallel)
          perm.push_back(i);
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] != utils::IteratorType::parallel)
          perm.push_back(i);
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, perm))) {
        op.emitOpError("cannot be interchanged for the GPU lowering");
        return signalPassFailure();
      }
      ++numInterchanged;
    }
    // A linalg op without parallel loops would become host loops over device
    // memory: give it a one-iteration parallel loop (one device thread).
    SmallVector<linalg::LinalgOp> reductions;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumParallelLoops() == 0)
        reductions.push_back(op);
    });
    for (linalg::LinalgOp op : reductions) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
      Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
      auto par = b.create<scf::ParallelOp>(loc, ValueRange{c0}, ValueRange{c1}, ValueRange{c1});
      op->moveBefore(par.getBody()->getTerminator());
      ++numWrapped;
    }
  }

  static bool reductionsInnermost(linalg::LinalgOp op) {
    bool seenReduction = false;
    for (utils::IteratorType t : op.getIteratorTypesArray()) {
      if (t != utils::IteratorType::parallel)
        seenReduction = true;
      else if (seenReduction)
        return false;
    }
    return true;
  }
};

} // namespace
