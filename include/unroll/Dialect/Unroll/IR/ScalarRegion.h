//===- ScalarRegion.h - scalar rho regions: check, evaluate, differentiate ===//
//
// A scalar region has one block with one float argument z and ends in
// `unroll.yield` of one float. Its body may use the arith/math ops listed in
// isSupportedScalarOp. The same op list is used by the interpreter (for the
// verifier's sampling of rho, rho', rho'') and by the symbolic
// differentiator (which derive-steps uses to build rho' as IR).
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_DIALECT_UNROLL_IR_SCALARREGION_H
#define UNROLL_DIALECT_UNROLL_IR_SCALARREGION_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Region.h"
#include "mlir/Support/LogicalResult.h"

namespace mlir::unroll {

/// Value with its first and second derivative along z (a hyper-dual number).
struct Dual2 {
  double v = 0, d = 0, dd = 0;
};

/// Checks the region's shape (one block, one argument of `elemType`, yields
/// one `elemType`) and that every op is supported. Emits located errors on
/// `owner` (or on the offending op) and fails on the first problem.
LogicalResult verifyScalarRegion(Operation *owner, Region &region, Type elemType, StringRef what);

/// Whether the op is one the interpreter and the differentiator know.
bool isSupportedScalarOp(Operation *op);

/// Evaluates the region at z = `z` (v = z, d = 1, dd = 0), returning the
/// yielded value with its first and second derivative in z.
Dual2 evaluateScalarRegion(Region &region, double z);

/// Builds into the empty region `dst` a region computing d/dz of `src`
/// (forward mode, one tangent per value, zero tangents folded away). With
/// `yieldPrimal`, the region yields (value, derivative).
void differentiateScalarRegion(Region &src, Region &dst, Location loc, bool yieldPrimal = false);

/// Builds into the empty region `dst` a scalar region computing the given
/// built-in rho (`neg_exp`, `log_plus_two`, `log_plus_one`) of element
/// type `elemType`.
void buildBuiltinRho(Region &dst, int rhoKind, Type elemType, Location loc);

} // namespace mlir::unroll

#endif
