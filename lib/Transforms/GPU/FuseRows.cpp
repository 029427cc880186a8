//===- FuseRows.cpp - unroll-gpu-fuse-rows ----------------------------------===//
//
// Fuses a row-wise nest (layer norm, softmax) with the elementwise nests
// beside it over the same rows: one kernel, one thread per row.
// See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
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
#define GEN_PASS_DEF_UNROLLGPUFUSEROWS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct Access {
  Value memref;
  ValueRange indices;
  bool write;
};

/// Every load and store inside `p`; false if the body touches memory any
/// other way (calls, copies, nested linalg ops).
bool collectAccesses(scf::ParallelOp p, SmallVector<Access> &out) {
  bool ok = true;
  p.getBody()->walk([&](Operation *op) {
    if (auto ld = dyn_cast<memref::LoadOp>(op))
      out.push_back({ld.getMemRef(), ld.getIndices(), false});
    else if (auto st = dyn_cast<memref::StoreOp>(op))
      out.push_back({st.getMemRef(), st.getIndices(), true});
    else if (!isMemoryEffectFree(op) &&
             !isa<scf::ForOp, scf::IfOp, scf::YieldOp, scf::ReduceOp>(op))
      ok = false;
  });
  return ok;
}

struct FuseRows : public unroll::impl::UnrollGPUFuseRowsBase<FuseRows> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *block : blocks) {
      bool changed = true;
      while (changed) {
        changed = false;
        for (Operation &op : *block) {
          auto a = dyn_cast<scf::ParallelOp>(op);
          if (!a)
            continue;
          scf::ParallelOp b = nextNest(a);
          if (b && succeeded(fuse(a, b))) {
            ++numFused;
            changed = true;
            break;
          }
        }
      }
    }
  }

  /// The next scf.parallel after `a` if only side-effect-free ops lie between.
  static scf::ParallelOp nextNest(scf::ParallelOp a) {
    for (Operation *op = a->getNextNode(); op; op = op->getNextNode()) {
      if (auto p = dyn_cast<scf::ParallelOp>(op))
        return p;
      if (!isMemoryEffectFree(op))
        return nullptr;
    }
    return nullptr;
  }

  /// Whether `p` is elementwise: no loops inside.
  static bool elementwise(scf::ParallelOp p) {
    bool loops = false;
    p.getBody()->walk([&](Operation *op) {
      if (isa<LoopLikeOpInterface>(op))
        loops = true;
    });
    return !loops;
  }

  LogicalResult fuse(scf::ParallelOp a, scf::ParallelOp b) {
    if (!a.getInitVals().empty() || !b.getInitVals().empty())
      return failure();
    // Equal spaces too: scf-parallel-loop-fusion refuses two row nests whose
    // inner loops touch the same buffer (its index check sees different
    // loop variables), e.g. a softmax's exp and its row sum.
    size_t na = a.getNumLoops(), nb = b.getNumLoops();
    scf::ParallelOp rows = na <= nb ? a : b, wide = na <= nb ? b : a;
    size_t k = rows.getNumLoops();
    if (na != nb && !elementwise(wide))
      return failure();
    for (size_t i = 0; i < k; ++i)
      if (rows.getLowerBound()[i] != wide.getLowerBound()[i] ||
          rows.getUpperBound()[i] != wide.getUpperBound()[i] ||
          rows.getStep()[i] != wide.getStep()[i])
        return failure();
    // Row-local dependences only.
    SmallVector<Access> accA, accB;
    if (!collectAccesses(a, accA) || !collectAccesses(b, accB))
      return failure();
    auto rowsFirst = [&](const Access &x, scf::ParallelOp p) {
      if (x.indices.size() < k)
        return false;
      for (size_t i = 0; i < k; ++i)
        if (x.indices[i] != p.getInductionVars()[i])
          return false;
      return true;
    };
    for (const Access &x : accA)
      for (const Access &y : accB) {
        if (!x.write && !y.write)
          continue;
        if (unroll::viewRoot(x.memref) != unroll::viewRoot(y.memref))
          continue;
        if (x.memref != y.memref || !rowsFirst(x, a) || !rowsFirst(y, b))
          return failure();
      }
    // One nest over the rows: a's part, then b's; the wide body loops over
    // its remaining dimensions.
    OpBuilder builder(b);
    Location loc = b.getLoc();
    builder.create<scf::ParallelOp>(
        loc, rows.getLowerBound(), rows.getUpperBound(), rows.getStep(),
        [&](OpBuilder &pb, Location pl, ValueRange ivs) {
          for (scf::ParallelOp part : {a, b}) {
            IRMapping map;
            map.map(ValueRange(part.getInductionVars()).take_front(k), ivs);
            auto clone = [&](OpBuilder &cb) {
              for (Operation &op : part.getBody()->without_terminator())
                cb.clone(op, map);
            };
            if (part.getNumLoops() == k) {
              clone(pb);
              continue;
            }
            scf::buildLoopNest(pb, pl, part.getLowerBound().drop_front(k),
                               part.getUpperBound().drop_front(k), part.getStep().drop_front(k),
                               [&](OpBuilder &lb, Location, ValueRange inner) {
                                 map.map(ValueRange(part.getInductionVars()).drop_front(k), inner);
                                 clone(lb);
                               });
          }
        });
    a.erase();
    b.erase();
    return success();
  }
};

} // namespace
