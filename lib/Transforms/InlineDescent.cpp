//===- InlineDescent.cpp - unroll.descend -> the energy's steps -----------===//
//
// Implements --unroll-inline-descent: every `unroll.descend @E(Y, X)
// steps(k)` in a model becomes k copies of the derived steps of @E on the
// token batch (Y -> the previous copy's result, X -> X), and its loop
// records @E in `energy`. The steps' parameters are re-declared in the loop
// body by name, so they become the model's parameters. Steps that take the
// iteration index and the previous iterate get the descend's `iteration`
// and `prev` (within steps(k), each copy the one before it).
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/Batching.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLINLINEDESCENT
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

struct InlineDescentPass : public unroll::impl::UnrollInlineDescentBase<InlineDescentPass> {
  using UnrollInlineDescentBase::UnrollInlineDescentBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<DescendOp> descends;
    module.walk([&](DescendOp d) { descends.push_back(d); });
    for (DescendOp d : descends)
      if (failed(inlineOne(d, symbols)))
        return signalPassFailure();
  }

  LogicalResult inlineOne(DescendOp d, SymbolTable &symbols) {
    auto energy = symbols.lookup<EnergyOp>(d.getEnergy());
    if (!energy)
      return d.emitOpError() << "expected '" << d.getEnergy() << "' to name an 'unroll.energy'";
    if (energy.getSteps().empty())
      return d.emitOpError() << "@" << d.getEnergy()
                             << " has no derived steps; run --unroll-derive-steps first";
    Block &steps = energy.getSteps().front();
    unsigned wants = steps.getNumArguments();
    if (wants >= 3 && !d.getIteration())
      return d.emitOpError() << "@" << d.getEnergy()
                             << "'s steps take the iteration index: pass `iteration %k`";
    if (wants == 4 && !d.getPrev())
      return d.emitOpError() << "@" << d.getEnergy()
                             << "'s steps take the previous iterate: pass `prev %u_prev`";
    OpBuilder b(d);
    Value cur = d.getY(), prev = d.getPrev();
    int64_t s = d.getSteps();
    for (int64_t k = 0; k < s; ++k) {
      IRMapping map;
      map.map(steps.getArgument(0), cur);
      map.map(steps.getArgument(1), d.getX());
      if (wants >= 3) {
        // Step k of `steps(s)` in iteration t has index t s + k.
        Value t = d.getIteration();
        if (s > 1) {
          Value ss = b.create<arith::ConstantIndexOp>(d.getLoc(), s);
          Value kk = b.create<arith::ConstantIndexOp>(d.getLoc(), k);
          t = b.create<arith::AddIOp>(d.getLoc(), b.create<arith::MulIOp>(d.getLoc(), t, ss), kk);
        }
        map.map(steps.getArgument(2), t);
      }
      if (wants == 4)
        map.map(steps.getArgument(3), prev);
      cloneForBatch(b, steps, map, energy.getTokenType(), d.getY().getType());
      prev = cur;
      cur = map.lookup(cast<YieldOp>(steps.back()).getValues()[0]);
      ++numSteps;
    }
    if (auto loop = d->getParentOfType<LoopOp>(); loop && !loop.getEnergyAttr())
      loop.setEnergyAttr(d.getEnergyAttr());
    d.replaceAllUsesWith(cur);
    d.erase();
    ++numInlined;
    return success();
  }
};

} // namespace
