//===- UnrollInterfaces.td - interfaces of unroll ops --------*- tablegen -*-===//
//
// VJPOpInterface: the gradient rule of an op lives next to the op. The one
// reverse-mode driver (ReverseMode.h) walks a region's ops backwards and asks
// each of them for its vector-Jacobian product.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_INTERFACES_TD
#define UNROLL_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Unroll_VJPOpInterface : OpInterface<"VJPOpInterface"> {
  let cppNamespace = "::mlir::unroll";
  let description = [{
    An op that knows its vector-Jacobian product (reverse-mode derivative).
    `--unroll-differentiate` copies the forward ops of a region into its
    reverse region and walks the copies backwards; for each op it calls
    `buildVJP`, which reads the cotangents of the op's results from the
    driver, emits the VJP ops at the builder and hands the cotangents of the
    operands back (`ReverseMode::addCotangent`; for an `unroll.param` that
    becomes an `unroll.accumulate_grad`).
  }];
  let methods = [
    InterfaceMethod<[{
        Emits the vector-Jacobian product of this op at `b`. The op's own
        operands are the primal values; `rm.cotangent(result)` is the
        cotangent of a result (null when the result does not reach the
        differentiated output). Returns failure with a located error.
      }],
      "::mlir::LogicalResult", "buildVJP",
      (ins "::mlir::OpBuilder &":$b, "::mlir::unroll::ReverseMode &":$rm)>
  ];
}

#endif // UNROLL_INTERFACES_TD
