//===- PromoteAccumulators.cpp - unroll-gpu-promote-accumulators ------------===//
//
// A reduction lowered to loops accumulates through memory:
//
//   memref.store %zero, %acc[%i]
//   scf.for %k { %a = memref.load %acc[%i]; ...; memref.store %s, %acc[%i] }
//
// On a GPU each iteration is then a round trip to global memory that the
// next one waits for. This pass carries such an element in a register (an
// iter_arg of the loop), loading it once before and storing it once after,
// where that cannot change the result: the loop touches the element only
// through loads and stores at the same loop-invariant indices, directly in
// its body, and the buffer is an allocation of its own that nothing else in
// the loop can reach. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUPROMOTEACCUMULATORS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

/// The allocation a buffer is a view of, or null.
Value rootAllocation(Value v) {
  Value root = mlir::unroll::viewRoot(v);
  return isa_and_nonnull<memref::AllocOp, gpu::AllocOp>(root.getDefiningOp()) ? root : Value();
}

/// Whether the loop reaches `root` (an allocation) only through `allowed`:
/// every user of it or of a view of it, anywhere, is a view, a load, a
/// store or a deallocation (inside the loop only the `allowed` ones), or
/// takes its address for use outside the loop. Anything else (a yield, a
/// call, a linalg op) could hand the buffer to the loop under another name.
bool onlyAccessedBy(Value root, scf::ForOp loop,
                    const llvm::SmallPtrSetImpl<Operation *> &allowed) {
  SmallVector<Value> work{root};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      if (isa<ViewLikeOpInterface, memref::CastOp>(user)) {
        for (Value r : user->getResults())
          work.push_back(r);
        continue;
      }
      bool inLoop = loop->isAncestor(user);
      if (isa<memref::LoadOp, memref::StoreOp>(user)) {
        if (inLoop && !allowed.contains(user))
          return false;
        continue;
      }
      if (isa<memref::DeallocOp>(user) && !inLoop)
        continue;
      if (isa<memref::ExtractAlignedPointerAsIndexOp, memref::ExtractStridedMetadataOp>(user) &&
          !inLoop) {
        for (Value r : user->getResults())
          for (Operation *u : r.getUsers())
            if (loop->isAncestor(u))
              return false;
        continue;
      }
      return false;
    }
  }
  return true;
}

struct Promote : public mlir::unroll::impl::UnrollGPUPromoteAccumulatorsBase<Promote> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp f) { loops.push_back(f); }); // inner loops first
    for (scf::ForOp f : loops)
      while (f && (f = promoteOne(f)))
        ++numPromoted;
  }

  /// Promotes one accumulator of `loop`; returns the new loop, or null.
  scf::ForOp promoteOne(scf::ForOp loop) {
    Block *body = loop.getBody();
    for (Operation &op : *body) {
      auto store = dyn_cast<memref::StoreOp>(&op);
      if (!store)
        continue;
      Value mem = store.getMemRef();
      SmallVector<Value> idx(store.getIndices());
      auto outside = [&](Value v) { return !loop.getRegion().isAncestor(v.getParentRegion()); };
      if (!outside(mem) || !llvm::all_of(idx, outside))
        continue;
      Value root = rootAllocation(mem);
      if (!root)
        continue;
      // The loads and stores of this element, directly in the body.
      llvm::SmallPtrSet<Operation *, 8> group;
      for (Operation &o : *body) {
        if (auto l = dyn_cast<memref::LoadOp>(&o);
            l && l.getMemRef() == mem && llvm::equal(l.getIndices(), idx))
          group.insert(l);
        if (auto s = dyn_cast<memref::StoreOp>(&o);
            s && s.getMemRef() == mem && llvm::equal(s.getIndices(), idx))
          group.insert(s);
      }
      if (!onlyAccessedBy(root, loop, group))
        continue;
      return rewrite(loop, mem, idx, group);
    }
    return {};
  }

  scf::ForOp rewrite(scf::ForOp loop, Value mem, ArrayRef<Value> idx,
                     const llvm::SmallPtrSetImpl<Operation *> &group) {
    Location loc = loop.getLoc();
    OpBuilder b(loop);
    Value init = b.create<memref::LoadOp>(loc, mem, idx);
    SmallVector<Value> inits(loop.getInitArgs());
    inits.push_back(init);
    auto next = b.create<scf::ForOp>(loc, loop.getLowerBound(), loop.getUpperBound(),
                                     loop.getStep(), inits);
    Block *nb = next.getBody();
    if (!nb->empty() && nb->back().hasTrait<OpTrait::IsTerminator>())
      nb->back().erase();
    Block *ob = loop.getBody();
    for (auto [o, n] : llvm::zip(ob->getArguments(), nb->getArguments().drop_back()))
      o.replaceAllUsesWith(n);
    nb->getOperations().splice(nb->end(), ob->getOperations());
    Value current = nb->getArguments().back();
    for (Operation &op : llvm::make_early_inc_range(*nb)) {
      if (!group.contains(&op))
        continue;
      if (auto l = dyn_cast<memref::LoadOp>(&op))
        l.getResult().replaceAllUsesWith(current);
      else
        current = cast<memref::StoreOp>(&op).getValueToStore();
      op.erase();
    }
    auto yield = cast<scf::YieldOp>(nb->getTerminator());
    SmallVector<Value> yields(yield.getOperands());
    yields.push_back(current);
    OpBuilder yb(yield);
    yb.create<scf::YieldOp>(yield.getLoc(), yields);
    yield.erase();
    for (auto [o, n] : llvm::zip(loop.getResults(), next.getResults().drop_back()))
      o.replaceAllUsesWith(n);
    loop.erase();
    OpBuilder after(next->getBlock(), std::next(next->getIterator()));
    after.create<memref::StoreOp>(loc, next.getResults().back(), mem, idx);
    return next;
  }
};

} // namespace
