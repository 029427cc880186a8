//===- IterationSpace.h - an scf.parallel's space as one index --*- C++ -*-===//
//
// unroll-gpu-map-loops (a thread per point) and unroll-gpu-map-rows (a warp
// per row) both number the points of an scf.parallel linearly, the last
// dimension fastest, and recover the induction variables from that number.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_LIB_TRANSFORMS_GPU_ITERATIONSPACE_H
#define UNROLL_LIB_TRANSFORMS_GPU_ITERATIONSPACE_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::unroll::iterspace {

/// n = ceil((ub - lb) / step), folded for the common lb = 0, step = 1.
inline Value tripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
  Value span = isConstantIntValue(lb, 0) ? ub : b.create<arith::SubIOp>(loc, ub, lb).getResult();
  if (isConstantIntValue(step, 1))
    return span;
  return b.create<arith::CeilDivSIOp>(loc, span, step);
}

/// The trip counts of `p`'s dimensions (into `counts`) and their product.
inline Value iterationCount(OpBuilder &b, scf::ParallelOp p, SmallVectorImpl<Value> &counts) {
  Location loc = p.getLoc();
  Value total;
  for (auto [lb, ub, step] : llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
    counts.push_back(tripCount(b, loc, lb, ub, step));
    total = total ? b.create<arith::MulIOp>(loc, total, counts.back()).getResult() : counts.back();
  }
  return total;
}

/// Maps `p`'s induction variables to the point numbered `linear` (last
/// dimension fastest, so neighbouring numbers touch neighbouring elements of
/// row-major buffers).
inline void delinearize(OpBuilder &b, scf::ParallelOp p, Value linear, ArrayRef<Value> counts,
                        IRMapping &map) {
  Location loc = p.getLoc();
  Value rest = linear;
  for (int k = counts.size() - 1; k >= 0; --k) {
    Value idx = k == 0 ? rest : b.create<arith::RemSIOp>(loc, rest, counts[k]).getResult();
    if (k > 0)
      rest = b.create<arith::DivSIOp>(loc, rest, counts[k]);
    Value lb = p.getLowerBound()[k], step = p.getStep()[k];
    Value iv =
        isConstantIntValue(step, 1) ? idx : b.create<arith::MulIOp>(loc, idx, step).getResult();
    if (!isConstantIntValue(lb, 0))
      iv = b.create<arith::AddIOp>(loc, lb, iv);
    map.map(p.getInductionVars()[k], iv);
  }
}

/// A grid opened by openGrid: the block's index, the index inside the block
/// (a thread on the GPU, the emulation loop's index on the host), and the op
/// that holds the body.
struct Grid {
  Value block, inner;
  Operation *scope;
};

/// Opens `blocks` blocks at b's insertion point and leaves b inside: a
/// gpu.launch of `threads` threads, or (emulated) two host loops over the
/// blocks and over `hostInner` indices per block.
inline Grid openGrid(OpBuilder &b, Location loc, Value blocks, Value threads, Value hostInner,
                     bool emulate) {
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
  Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
  if (emulate) {
    auto blockLoop = b.create<scf::ForOp>(loc, c0, blocks, c1);
    b.setInsertionPointToStart(blockLoop.getBody());
    auto innerLoop = b.create<scf::ForOp>(loc, c0, hostInner, c1);
    b.setInsertionPointToStart(innerLoop.getBody());
    return {blockLoop.getInductionVar(), innerLoop.getInductionVar(), blockLoop};
  }
  auto launch = b.create<::mlir::gpu::LaunchOp>(loc, blocks, c1, c1, threads, c1, c1);
  b.setInsertionPointToEnd(&launch.getBody().front());
  b.setInsertionPoint(b.create<::mlir::gpu::TerminatorOp>(loc));
  return {launch.getBlockIds().x, launch.getThreadIds().x, launch};
}

/// openGrid over ceil(count / perBlock) blocks, inside an scf.if that skips
/// the launch (or the host loops) when count is 0.
inline Grid openGridOver(OpBuilder &b, Location loc, Value count, Value perBlock, Value threads,
                         Value hostInner, bool emulate) {
  Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
  Value blocks = b.create<arith::CeilDivSIOp>(loc, count, perBlock);
  auto nonEmpty = b.create<scf::IfOp>(
      loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, count, c0), false);
  b.setInsertionPointToStart(&nonEmpty.getThenRegion().front());
  return openGrid(b, loc, blocks, threads, hostInner, emulate);
}

} // namespace mlir::unroll::iterspace

#endif // UNROLL_LIB_TRANSFORMS_GPU_ITERATIONSPACE_H
