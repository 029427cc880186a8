//===- CpuCall.h - a call of a CPU kernel on tensors ------------*- C++ -*-===//
//
// With cpu-kernels, some ops lower to one call of a kernel of
// runtime/cpu/ (declared in runtime/include/unroll/runtime/CpuKernels.h,
// whose every argument is an index: sizes, strides in elements, addresses).
// CpuCall collects those arguments and emits an unroll.kernel_call on
// tensors (outputs in destination style), which --unroll-cpu-kernel-calls
// makes the func.call after bufferization.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H
#define UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include <cstring>
#include <string>

namespace mlir::unroll::lowering {

class CpuCall {
public:
  CpuCall(OpBuilder &b, Location loc, Type element) : b(b), loc(loc), el(element) {}

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  void push(Value v) {
    args.push_back(v);
    abi.push_back(kCallArg);
  }
  void push(int64_t v) { push(index(v)); }
  /// A double passed as its bits (an index, like every argument).
  void pushDouble(double v) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    push(index(bits));
  }

  /// An input tensor: the call gets its address, then the strides of its
  /// outer dimensions (its last is contiguous; a slice of the window's tape
  /// has outer strides of its own).
  void input(Value t) {
    ins.push_back(t);
    abi.push_back(kCallIn);
  }

  /// An output of `shape` (dynamic sizes from `dynSizes`), its address and
  /// outer strides likewise: a destination of its own (tensor.empty), which
  /// bufferization gives a fresh buffer or, where the result goes into a
  /// slot of the tape (writeMarkedSlicesInPlace), that slot.
  void output(ArrayRef<int64_t> shape, ValueRange dynSizes) {
    outs.push_back(b.create<tensor::EmptyOp>(loc, shape, el, dynSizes));
    abi.push_back(kCallOut);
  }

  /// Declares `name` (every argument an index) once in the module and
  /// calls it; `arity` is the declaration's argument count in CpuKernels.h.
  void call(Operation *op, const std::string &name, unsigned arity) {
    auto module = op->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(name)) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      SmallVector<Type> types(arity, b.getIndexType());
      b.create<func::FuncOp>(loc, name, b.getFunctionType(types, {})).setPrivate();
    }
    SmallVector<Type> types;
    for (Value o : outs)
      types.push_back(o.getType());
    kernel = b.create<KernelCallOp>(loc, types, name, args, ins, outs, abi);
    assert(kernel.getCallArity() == arity && "CpuKernels.h declares another signature");
  }

  /// Output `i` (in the order output() made them).
  Value result(unsigned i) { return kernel->getResult(i); }

private:
  OpBuilder &b;
  Location loc;
  Type el;
  SmallVector<Value> args, ins, outs;
  SmallVector<int64_t> abi;
  KernelCallOp kernel;
};

} // namespace mlir::unroll::lowering

#endif // UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H
