//===- UnrollOps.td - the unroll dialect's ops ---------------*- tablegen -*-===//
//
// One TableGen unit for the dialect; the ops are defined by level:
//   UnrollBase.td        the dialect, its type, enums and tensor constraints
//   UnrollInterfaces.td  VJPOpInterface (gradient rules on the ops)
//   UnrollEnergyOps.td   energies: what is minimized
//   UnrollStepOps.td     descent steps: how it is minimized
//   UnrollModelOps.td    looped transformers: model, loop, GPT-2 pieces
//   UnrollVJPOps.td      vector-Jacobian products and gradient accumulation
//   UnrollKernelOps.td   calls of the runtime's CPU kernels (after linalg)
// See docs/Rationale.md for why the dialect looks as it does.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_OPS_TD
#define UNROLL_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollEnergyOps.td"
include "unroll/Dialect/Unroll/IR/UnrollStepOps.td"
include "unroll/Dialect/Unroll/IR/UnrollModelOps.td"
include "unroll/Dialect/Unroll/IR/UnrollVJPOps.td"
include "unroll/Dialect/Unroll/IR/UnrollKernelOps.td"

#endif // UNROLL_OPS_TD
