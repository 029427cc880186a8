//===- GroupAllocs.cpp - unroll-gpu-group-allocs ----------------------------===//
//
// Moves allocations and deallocations out of the way so that
// scf-parallel-loop-fusion sees adjacent parallel loops.
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
#define GEN_PASS_DEF_UNROLLGPUGROUPALLOCS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

/// A dealloc, or an `scf.if` that only deallocates (ownership-based
/// deallocation's conditional frees).
bool isDealloc(Operation *op) {
  if (isa<memref::DeallocOp>(op))
    return true;
  auto ifOp = dyn_cast<scf::IfOp>(op);
  if (!ifOp || ifOp.getNumResults() != 0)
    return false;
  bool only = true;
  ifOp->walk([&](Operation *inner) {
    if (inner != ifOp && !isa<memref::DeallocOp, scf::YieldOp>(inner))
      only = false;
  });
  return only;
}

/// The size `memref.dim %v, i` stands for, looked up through casts,
/// reshapes and the allocation (null when it cannot be seen). Loop bounds
/// written as dims of different views of one buffer become the same value,
/// which parallel-loop fusion requires.
Value sizeOf(OpBuilder &b, Value v, int64_t i) {
  while (true) {
    auto type = cast<MemRefType>(v.getType());
    if (!type.isDynamicDim(i))
      return b.create<arith::ConstantIndexOp>(v.getLoc(), type.getDimSize(i));
    if (auto alloc = v.getDefiningOp<memref::AllocOp>())
      return alloc.getDynamicSizes()[type.getDynamicDimIndex(i)];
    if (auto ex = v.getDefiningOp<memref::ExpandShapeOp>()) {
      // output_shape lists the dynamic sizes in order
      return ex.getOutputShape()[type.getDynamicDimIndex(i)];
    }
    if (auto co = v.getDefiningOp<memref::CollapseShapeOp>()) {
      ReassociationIndices group = co.getReassociationIndices()[i];
      if (group.size() != 1)
        return nullptr;
      v = co.getSrc();
      i = group[0];
      continue;
    }
    if (auto c = v.getDefiningOp<memref::CastOp>()) {
      v = c.getSource();
      continue;
    }
    return nullptr;
  }
}

struct GroupAllocs : public unroll::impl::UnrollGPUGroupAllocsBase<GroupAllocs> {
  void runOnOperation() override {
    SmallVector<memref::DimOp> dims;
    getOperation().walk([&](memref::DimOp d) { dims.push_back(d); });
    for (memref::DimOp d : dims) {
      std::optional<int64_t> i = d.getConstantIndex();
      if (!i)
        continue;
      OpBuilder b(d);
      Value size = sizeOf(b, d.getSource(), *i);
      if (size && size != d.getResult() &&
          (!size.getDefiningOp() || size.getParentRegion()->isAncestor(d->getParentRegion()))) {
        d.replaceAllUsesWith(size);
        d.erase();
      }
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *block : blocks) {
      if (block->empty() || !block->back().hasTrait<OpTrait::IsTerminator>())
        continue;
      Operation *term = &block->back();
      SmallVector<Operation *> allocs, deallocs;
      for (Operation &op : *block) {
        if (isa<memref::AllocOp>(op))
          allocs.push_back(&op);
        else if (&op != term && isDealloc(&op))
          deallocs.push_back(&op);
      }
      for (Operation *op : deallocs) { // keeps their order
        op->moveBefore(term);
        ++numSunk;
      }
      // Last first, so allocations that land at the same place keep their order.
      for (Operation *op : llvm::reverse(allocs)) {
        // After the last operand defined in this block, else at its start.
        Operation *after = nullptr;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && def->getBlock() == block && (!after || after->isBeforeInBlock(def)))
            after = def;
        Operation *first = after ? after->getNextNode() : &block->front();
        if (first == op)
          continue;
        if (after)
          op->moveAfter(after);
        else
          op->moveBefore(&block->front());
        ++numHoisted;
      }
    }
  }
};

} // namespace
