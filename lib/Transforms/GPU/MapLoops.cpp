//===- MapLoops.cpp - unroll-gpu-map-loops ----------------------------------===//
//
// Each outermost scf.parallel becomes one gpu.launch (or, with
// emulate-on-host, the same thread arithmetic as host loops).
// See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "IterationSpace.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUMAPLOOPS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

/// Replaces `par` by a serial loop nest with the same body.
void serialize(scf::ParallelOp par) {
  OpBuilder b(par);
  Block *body = par.getBody();
  scf::buildLoopNest(b, par.getLoc(), par.getLowerBound(), par.getUpperBound(), par.getStep(),
                     [&](OpBuilder &nb, Location, ValueRange ivs) {
                       IRMapping map;
                       map.map(par.getInductionVars(), ivs);
                       for (Operation &op : body->without_terminator())
                         nb.clone(op, map);
                     });
  par.erase();
}

struct MapLoops : public unroll::impl::UnrollGPUMapLoopsBase<MapLoops> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      getOperation().emitError() << "unroll-gpu-map-loops: block-size must be "
                                    "in 1..1024, got "
                                 << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>())
        outermost.push_back(p);
    });
    for (scf::ParallelOp p : outermost) {
      if (!p.getInitVals().empty()) {
        p.emitOpError("with reductions is not supported by the GPU lowering");
        return signalPassFailure();
      }
      mapLoop(p);
      ++numKernels;
    }
  }

  void mapLoop(scf::ParallelOp p) {
    Location loc = p.getLoc();
    OpBuilder b(p);
    SmallVector<Value> counts;
    Value total = unroll::iterspace::iterationCount(b, p, counts);
    Value bs = b.create<arith::ConstantIndexOp>(loc, blockSize);

    // The thread's linear index, from a launch or (emulated) from two loops.
    unroll::iterspace::Grid grid =
        unroll::iterspace::openGridOver(b, loc, total, bs, bs, bs, emulateOnHost);
    Value linear =
        b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, grid.block, bs), grid.inner);
    Operation *threadScope = grid.scope;
    Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, linear, total);
    auto guard = b.create<scf::IfOp>(loc, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());

    IRMapping map;
    unroll::iterspace::delinearize(b, p, linear, counts, map);
    for (Operation &op : p.getBody()->without_terminator())
      b.clone(op, map);
    p.erase();

    // Anything still parallel inside runs serially in its thread.
    while (true) {
      scf::ParallelOp nested;
      threadScope->walk([&](scf::ParallelOp q) {
        nested = q;
        return WalkResult::interrupt();
      });
      if (!nested)
        break;
      serialize(nested);
    }
  }
};

} // namespace
