//===- InlineDescent.cpp - unroll.descend -> the energy's steps -----------===//
//
// Implements --unroll-inline-descent: every `unroll.descend @E(Y, X)
// steps(k)` in a model becomes k copies of the derived steps of @E on the
// token batch (Y -> the previous copy's result, X -> X), and its loop
// records @E in `energy`. The steps' parameters are re-declared in the loop
// body by name, so they become the model's parameters.
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/Batching.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

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
    if (steps.getNumArguments() != 2)
      return d.emitOpError() << "@" << d.getEnergy()
                             << "'s steps take a layer index (a learned unrolling); a model's "
                                "loop cannot descend it yet";
    OpBuilder b(d);
    Value cur = d.getY();
    for (int64_t k = 0; k < d.getSteps(); ++k) {
      IRMapping map;
      map.map(steps.getArgument(0), cur);
      map.map(steps.getArgument(1), d.getX());
      cloneForBatch(b, steps, map, energy.getTokenType(), d.getY().getType());
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
