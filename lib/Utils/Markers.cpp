//===- Markers.cpp - compute marked slices in their destination -----------===//
//
// The training step's tape: each recorded iteration inserts the activations
// the backward reads into [T, B, n, F] tensors. convert-unroll-to-entry-points
// marks those insert_slices; after the ops are linalg, this makes each
// producer chain write straight into its slot, so bufferization writes in
// place instead of copying. The marks stay until the GPU pipeline's
// elementwise fusion, which gives the ops it rebuilds fresh inits, has
// applied them once more.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Markers.h"

#include "mlir/IR/Operation.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

using namespace mlir;
using namespace mlir::unroll;

/// Follows destination operands from `v` back to a tensor.empty that only
/// this chain uses (null if there is none).
static tensor::EmptyOp chainRoot(Value v) {
  Value root = v;
  while (auto r = dyn_cast<OpResult>(root)) {
    if (auto cast = dyn_cast<tensor::CastOp>(r.getOwner()))
      root = cast.getSource();
    else if (auto dps = dyn_cast<DestinationStyleOpInterface>(r.getOwner()))
      root = dps.getDpsInitOperand(r.getResultNumber())->get();
    else
      break;
    if (!root.hasOneUse())
      return {};
  }
  return root.getDefiningOp<tensor::EmptyOp>();
}

void mlir::unroll::writeMarkedSlicesInPlace(Operation *root, bool keepMarks) {
  SmallVector<tensor::InsertSliceOp> marked;
  root->walk([&](tensor::InsertSliceOp ins) {
    if (ins->hasAttr(kInPlaceAttr))
      marked.push_back(ins);
  });
  for (tensor::InsertSliceOp ins : marked) {
    if (!keepMarks)
      ins->removeAttr(kInPlaceAttr);
    // The slot: the same slice of the destination, at the top of the block
    // (before the chain that computes the source).
    OpBuilder b(ins->getBlock(), ins->getBlock()->begin());
    auto slot = b.create<tensor::ExtractSliceOp>(ins.getLoc(), ins.getSourceType(), ins.getDest(),
                                                 ins.getMixedOffsets(), ins.getMixedSizes(),
                                                 ins.getMixedStrides());
    tensor::EmptyOp empty = chainRoot(ins.getSource());
    if (!empty || empty.getType() != slot.getType())
      continue;
    empty.replaceAllUsesWith(slot.getResult());
    empty.erase();
  }
}
