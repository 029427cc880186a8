//===- UnrollKernelOps.td - calls of the runtime's kernels -*- tablegen -*-===//
//
// The lowest level of the dialect: a call of one of the CPU kernels of
// runtime/cpu/ (declared in runtime/include/unroll/runtime/CpuKernels.h),
// written by --convert-unroll-to-linalg with cpu-kernels and turned into a
// func.call after bufferization by --unroll-cpu-kernel-calls.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_KERNEL_OPS_TD
#define UNROLL_KERNEL_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollBase.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Unroll_KernelCallOp : Unroll_Op<"kernel_call", [
    AttrSizedOperandSegments, DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "a call of a CPU kernel that writes its outputs in place";
  let description = [{
    A kernel of runtime/cpu/ takes only `index` arguments: sizes, strides in
    elements and addresses. `args` are the sizes and constants, `ins` the
    tensors it reads and `outs` those it writes, in destination style: on
    tensors each result is its `outs` operand overwritten, so bufferization
    writes into whatever buffer the destination is (a slot of the training
    step's tape, for instance) instead of a fresh one that would then be
    copied there. `abi` lays the call's arguments out: each entry takes 0:
    the next of `args`; 1: the next of `ins`, its address and then the
    strides of its outer dimensions (none for a vector); 2: the next of
    `outs` likewise. Every operand's last dimension is contiguous.
    After bufferization --unroll-cpu-kernel-calls turns the op on buffers
    (no results) into the `func.call` of `callee`.

    ```mlir
    %y = unroll.kernel_call @unroll_layer_norm_f32(%b, %n, %c256, %eps)
             ins(%x, %g, %bias : tensor<?x?x256xf32>, tensor<256xf32>, tensor<256xf32>)
             outs(%init : tensor<?x?x256xf32>) abi [0, 0, 0, 1, 1, 1, 2, 0]
             : tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$callee, Variadic<Index>:$args,
                       Variadic<AnyTypeOf<[AnyRankedTensor, AnyMemRef]>>:$ins,
                       Variadic<AnyTypeOf<[AnyRankedTensor, AnyMemRef]>>:$outs,
                       DenseI64ArrayAttr:$abi);
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let assemblyFormat = [{
    $callee `(` $args `)` (`ins` `(` $ins^ `:` type($ins) `)`)?
    `outs` `(` $outs `:` type($outs) `)` `abi` $abi attr-dict (`:` type($results)^)?
  }];
  let extraClassDeclaration = [{
    MutableOperandRange getDpsInitsMutable() { return getOutsMutable(); }
    /// The number of index arguments of the call (the declaration's arity).
    unsigned getCallArity();
  }];
  let hasVerifier = 1;
}

#endif // UNROLL_KERNEL_OPS_TD
