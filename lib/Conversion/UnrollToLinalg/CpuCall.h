//===- CpuCall.h - a call of a CPU kernel on tensors ------------*- C++ -*-===//
//
// With cpu-kernels, some ops lower to one call of a kernel of
// runtime/cpu/ (declared in runtime/include/unroll/runtime/CpuKernels.h,
// whose every argument is an index: sizes, strides in elements, addresses).
// CpuCall collects those arguments from tensors (inputs as read-only
// buffers, outputs as fresh dense ones) and emits the call.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H
#define UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstring>
#include <string>

namespace mlir::unroll::lowering {

class CpuCall {
public:
  CpuCall(OpBuilder &b, Location loc, Type element) : b(b), loc(loc), el(element) {}

  Value index(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  void push(Value v) { args.push_back(v); }
  void push(int64_t v) { args.push_back(index(v)); }
  /// A double passed as its bits (an index, like every argument).
  void pushDouble(double v) {
    int64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    args.push_back(index(bits));
  }

  /// An input tensor as a read-only buffer (so bufferization need not copy
  /// it), its last dimension contiguous and any outer strides (a slice of the
  /// window's tape is one): pushes its address, then the strides of its outer
  /// dimensions.
  void input(Value t) {
    auto tt = cast<RankedTensorType>(t.getType());
    int64_t rank = tt.getRank();
    SmallVector<int64_t> strides(rank, ShapedType::kDynamic);
    strides.back() = 1;
    auto mt = MemRefType::get(
        tt.getShape(), el, StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides));
    Value m = b.create<bufferization::ToMemrefOp>(loc, mt, t, /*read_only=*/true);
    auto meta = b.create<memref::ExtractStridedMetadataOp>(loc, m);
    Value bytes = index(el.getIntOrFloatBitWidth() / 8);
    args.push_back(b.create<arith::AddIOp>(loc,
                                           b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, m),
                                           b.create<arith::MulIOp>(loc, meta.getOffset(), bytes)));
    for (int64_t d = 0; d + 1 < rank; ++d)
      args.push_back(meta.getStrides()[d]);
  }

  /// A new dense output buffer of `shape` (dynamic sizes from `dynSizes`):
  /// pushes its address, then the strides of its outer dimensions if
  /// `strides`; returns it.
  Value output(ArrayRef<int64_t> shape, ValueRange dynSizes, bool strides = true) {
    auto ty = MemRefType::get(shape, el);
    Value o = b.create<memref::AllocOp>(loc, ty, dynSizes, b.getI64IntegerAttr(64));
    args.push_back(b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, o));
    if (strides) {
      // Row-major: stride of dimension d is the product of the later sizes.
      int64_t rank = shape.size();
      SmallVector<Value> st(rank);
      Value acc = index(1);
      for (int64_t d = rank - 1; d >= 0; --d) {
        st[d] = acc;
        Value size = ShapedType::isDynamic(shape[d])
                         ? b.create<memref::DimOp>(loc, o, d).getResult()
                         : index(shape[d]);
        acc = b.create<arith::MulIOp>(loc, acc, size);
      }
      for (int64_t d = 0; d + 1 < rank; ++d)
        args.push_back(st[d]);
    }
    outputs.push_back(o);
    return o;
  }

  /// Declares `name` (every argument an index) once in the module and calls
  /// it; `arity` is the declaration's argument count in CpuKernels.h.
  void call(Operation *op, const std::string &name, unsigned arity) {
    assert(args.size() == arity && "CpuKernels.h declares another signature");
    (void)arity;
    auto module = op->getParentOfType<ModuleOp>();
    if (!module.lookupSymbol(name)) {
      OpBuilder::InsertionGuard g(b);
      b.setInsertionPointToStart(module.getBody());
      SmallVector<Type> types(args.size(), b.getIndexType());
      b.create<func::FuncOp>(loc, name, b.getFunctionType(types, {})).setPrivate();
    }
    b.create<func::CallOp>(loc, name, TypeRange{}, args);
  }

  /// Output `i` (in the order output() made them) as a tensor.
  Value result(unsigned i) {
    auto mt = cast<MemRefType>(outputs[i].getType());
    return b.create<bufferization::ToTensorOp>(loc, RankedTensorType::get(mt.getShape(), el),
                                               outputs[i], /*restrict=*/true,
                                               /*writable=*/true);
  }

private:
  OpBuilder &b;
  Location loc;
  Type el;
  SmallVector<Value> args, outputs;
};

} // namespace mlir::unroll::lowering

#endif // UNROLL_CONVERSION_UNROLLTOLINALG_CPUCALL_H
