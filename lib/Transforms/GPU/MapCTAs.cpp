//===- MapCTAs.cpp - unroll-gpu-map-ctas ------------------------------------===//
//
// Kernels written as phases between barriers (include/unroll/Transforms/
// CtaKernel.h) become gpu.launch ops with workgroup memory and gpu.barrier,
// or, emulated, plain host loops. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/CtaKernel.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUMAPCTAS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

struct MapCTAs : public unroll::impl::UnrollGPUMapCTAsBase<MapCTAs> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<scf::ForOp> grids;
    getOperation().walk([&](scf::ForOp f) {
      if (f->hasAttr(cta::kGrid))
        grids.push_back(f);
    });
    for (scf::ForOp grid : grids) {
      if (failed(check(grid)) || failed(emulateOnHost ? emulate(grid) : launch(grid)))
        return signalPassFailure();
      ++numKernels;
    }
  }

  /// The shared buffers `grid` uses.
  static llvm::SetVector<memref::AllocOp> sharedBuffers(scf::ForOp grid) {
    llvm::SetVector<memref::AllocOp> shared;
    grid.walk([&](Operation *op) {
      for (Value v : op->getOperands())
        if (auto a = v.getDefiningOp<memref::AllocOp>(); a && a->hasAttr(cta::kShared))
          shared.insert(a);
    });
    return shared;
  }

  LogicalResult check(scf::ForOp grid) {
    auto threads = dyn_cast<IntegerAttr>(grid->getAttr(cta::kGrid));
    if (!threads || threads.getInt() < 1 || threads.getInt() > 1024)
      return grid.emitOpError("unroll-gpu-map-ctas: the grid's thread count must be in 1..1024");
    if (!isConstantIntValue(grid.getLowerBound(), 0) || !isConstantIntValue(grid.getStep(), 1) ||
        grid.getNumRegionIterArgs() != 0)
      return grid.emitOpError("unroll-gpu-map-ctas: a grid loop runs from 0 by 1 without "
                              "iteration arguments");
    WalkResult phases = grid.walk([&](scf::ForOp phase) {
      if (!phase->hasAttr(cta::kPhase))
        return WalkResult::advance();
      if (!isConstantIntValue(phase.getLowerBound(), 0) ||
          !isConstantIntValue(phase.getUpperBound(), threads.getInt()) ||
          !isConstantIntValue(phase.getStep(), 1) || phase.getNumRegionIterArgs() != 0) {
        phase.emitOpError("unroll-gpu-map-ctas: a phase runs over the ")
            << threads.getInt() << " threads of its grid";
        return WalkResult::interrupt();
      }
      if (phase->getParentOfType<scf::ForOp>() != grid &&
          phase->getParentOfType<scf::ForOp>()->hasAttr(cta::kPhase)) {
        phase.emitOpError("unroll-gpu-map-ctas: phases do not nest");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (phases.wasInterrupted())
      return failure();
    for (memref::AllocOp a : sharedBuffers(grid)) {
      if (!a.getType().hasStaticShape())
        return a.emitOpError("unroll-gpu-map-ctas: shared buffers have a static shape");
      for (Operation *user : a->getUsers()) {
        bool inside = grid->isAncestor(user);
        if (inside ? !isa<memref::LoadOp, memref::StoreOp>(user) : !isa<memref::DeallocOp>(user))
          return user->emitOpError("unroll-gpu-map-ctas: a shared buffer is only loaded and "
                                   "stored in its grid (and deallocated after)");
      }
    }
    return success();
  }

  /// Emulated: the loops as they are; threads in reverse order on request
  /// (a phase whose threads depend on each other gives another result).
  LogicalResult emulate(scf::ForOp grid) {
    grid.walk([&](scf::ForOp phase) {
      if (!phase->removeAttr(cta::kPhase) || !reverseThreads)
        return;
      OpBuilder b = OpBuilder::atBlockBegin(phase.getBody());
      Value t = phase.getInductionVar();
      Value last = b.create<arith::ConstantIndexOp>(phase.getLoc(), threads(grid) - 1);
      Value rev = b.create<arith::SubIOp>(phase.getLoc(), last, t);
      t.replaceAllUsesExcept(rev, rev.getDefiningOp());
    });
    grid->removeAttr(cta::kGrid);
    grid->removeAttr(cta::kName);
    for (memref::AllocOp a : sharedBuffers(grid))
      a->removeAttr(cta::kShared);
    return success();
  }

  static int64_t threads(scf::ForOp grid) {
    return cast<IntegerAttr>(grid->getAttr(cta::kGrid)).getInt();
  }

  /// One gpu.launch of `count` blocks (none when empty).
  LogicalResult launch(scf::ForOp grid) {
    Location loc = grid.getLoc();
    OpBuilder b(grid);
    llvm::SetVector<memref::AllocOp> shared = sharedBuffers(grid);
    SmallVector<Type> workgroup;
    auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    for (memref::AllocOp a : shared) {
      MemRefType t = a.getType();
      workgroup.push_back(MemRefType::get(t.getShape(), t.getElementType(), t.getLayout(), space));
    }
    Value count = grid.getUpperBound();
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value nt = b.create<arith::ConstantIndexOp>(loc, threads(grid));
    auto nonEmpty = b.create<scf::IfOp>(
        loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, count, c0), false);
    b.setInsertionPointToStart(nonEmpty.thenBlock());
    auto launch = b.create<gpu::LaunchOp>(loc, count, c1, c1, nt, c1, c1, Value(), Type(),
                                          ValueRange{}, workgroup);
    auto name = grid->getAttrOfType<StringAttr>(cta::kName);
    Block &body = launch.getBody().front();
    b.setInsertionPointToEnd(&body);
    auto term = b.create<gpu::TerminatorOp>(loc);
    IRMapping map;
    map.map(grid.getInductionVar(), launch.getBlockIds().x);
    for (auto [i, arg] : llvm::enumerate(launch.getWorkgroupAttributions()))
      map.map(shared[i]->getResult(0), arg);
    b.setInsertionPoint(term);
    for (Operation &op : grid.getBody()->without_terminator())
      b.clone(op, map);
    grid.erase();

    // Each phase: its body once per thread, then a barrier.
    SmallVector<scf::ForOp> phases;
    launch.walk([&](scf::ForOp f) {
      if (f->hasAttr(cta::kPhase))
        phases.push_back(f);
    });
    Value tid = launch.getThreadIds().x;
    for (auto [n, phase] : llvm::enumerate(phases)) {
      OpBuilder pb(phase);
      IRMapping pm;
      pm.map(phase.getInductionVar(), tid);
      for (Operation &op : phase.getBody()->without_terminator())
        pb.clone(op, pm);
      auto barrier = pb.create<gpu::BarrierOp>(phase.getLoc());
      // The kernel's name rides on its first barrier through outlining
      // (unroll-gpu-name-kernels reads it).
      if (n == 0 && name)
        barrier->setAttr(cta::kName, name);
      phase.erase();
    }
    for (memref::AllocOp a : shared.takeVector()) {
      for (Operation *user : llvm::make_early_inc_range(a->getUsers()))
        user->erase();
      a.erase();
    }
    return success();
  }
};

} // namespace
