//===- KernelOps.cpp - unroll.kernel_call and its bufferization -----------===//
//
// unroll.kernel_call is a call of a CPU kernel in destination style: on
// tensors, bufferization gives each output the buffer of its destination
// (an allocation, or the tape slot the result is inserted into), and the
// inputs their buffers with the last dimension contiguous, as the kernels'
// index-only ABI requires.
//
//===----------------------------------------------------------------------===//
#include "Verify.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace mlir::unroll;

namespace {
int64_t rankOf(Value v) { return cast<ShapedType>(v.getType()).getRank(); }
} // namespace

unsigned KernelCallOp::getCallArity() {
  unsigned n = 0, in = 0, out = 0;
  for (int64_t slot : getAbi())
    n += slot == kCallArg ? 1 : rankOf(slot == kCallIn ? getIns()[in++] : getOuts()[out++]);
  return n;
}

LogicalResult KernelCallOp::verify() {
  size_t counts[3] = {0, 0, 0};
  for (int64_t slot : getAbi()) {
    if (slot < kCallArg || slot > kCallOut)
      return emitOpError() << "abi entries are 0 (an index argument), 1 (an input) or 2 (an "
                              "output), got "
                           << slot;
    ++counts[slot];
  }
  if (counts[kCallArg] != getArgs().size() || counts[kCallIn] != getIns().size() ||
      counts[kCallOut] != getOuts().size())
    return emitOpError() << "abi takes " << counts[kCallArg] << " index arguments, "
                         << counts[kCallIn] << " inputs and " << counts[kCallOut]
                         << " outputs, but the op has " << getArgs().size() << ", "
                         << getIns().size() << " and " << getOuts().size();
  bool tensors = false, buffers = false;
  SmallVector<Value> operands(getIns());
  llvm::append_range(operands, getOuts());
  for (Value v : operands) {
    (isa<RankedTensorType>(v.getType()) ? tensors : buffers) = true;
    if (rankOf(v) < 1)
      return emitOpError() << "expected operands of rank >= 1, got " << v.getType();
  }
  if (tensors && buffers)
    return emitOpError("expected its inputs and outputs to be all tensors or all buffers");
  if (buffers && getNumResults() != 0)
    return emitOpError("on buffers has no results");
  return success();
}

void KernelCallOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  for (OpOperand &o : getInsMutable())
    if (isa<MemRefType>(o.get().getType()))
      effects.emplace_back(MemoryEffects::Read::get(), &o, SideEffects::DefaultResource::get());
  for (OpOperand &o : getOutsMutable())
    if (isa<MemRefType>(o.get().getType()))
      effects.emplace_back(MemoryEffects::Write::get(), &o, SideEffects::DefaultResource::get());
}

namespace {

/// `type` with its last stride 1 (the others and the offset dynamic) if it
/// is not known to be 1 already: the kernels read rows contiguously.
MemRefType withContiguousRows(MemRefType type) {
  int64_t offset;
  SmallVector<int64_t> strides;
  if (succeeded(getStridesAndOffset(type, strides, offset)) && strides.back() == 1)
    return type;
  SmallVector<int64_t> want(type.getRank(), ShapedType::kDynamic);
  want.back() = 1;
  return MemRefType::get(type.getShape(), type.getElementType(),
                         StridedLayoutAttr::get(type.getContext(), ShapedType::kDynamic, want),
                         type.getMemorySpace());
}

struct KernelCallBufferization
    : bufferization::DstBufferizableOpInterfaceExternalModel<KernelCallBufferization,
                                                             KernelCallOp> {
  /// Inputs are read; outputs are only written (the kernels overwrite them),
  /// so a destination's old contents need not survive.
  bool bufferizesToMemoryRead(Operation *op, OpOperand &operand,
                              const bufferization::AnalysisState &) const {
    return !cast<KernelCallOp>(op).isDpsInit(&operand);
  }

  LogicalResult bufferize(Operation *op, RewriterBase &rewriter,
                          const bufferization::BufferizationOptions &options) const {
    auto call = cast<KernelCallOp>(op);
    // The buffers (`whole`: the outputs' as bufferization knows them, which
    // replace the results) and what the call gets (`rows`: cast to a layout
    // with contiguous rows where that is not known).
    auto buffersOf = [&](ValueRange tensors, SmallVectorImpl<Value> &whole,
                         SmallVectorImpl<Value> &rows) -> LogicalResult {
      for (Value t : tensors) {
        FailureOr<Value> buffer = bufferization::getBuffer(rewriter, t, options);
        if (failed(buffer))
          return failure();
        auto type = cast<MemRefType>(buffer->getType());
        MemRefType contiguous = withContiguousRows(type);
        whole.push_back(*buffer);
        rows.push_back(
            contiguous == type
                ? *buffer
                : rewriter.create<memref::CastOp>(op->getLoc(), contiguous, *buffer).getResult());
      }
      return success();
    };
    SmallVector<Value> inBuffers, ins, outBuffers, outs;
    if (failed(buffersOf(call.getIns(), inBuffers, ins)) ||
        failed(buffersOf(call.getOuts(), outBuffers, outs)))
      return failure();
    rewriter.create<KernelCallOp>(op->getLoc(), TypeRange{}, call.getCalleeAttr(), call.getArgs(),
                                  ins, outs, call.getAbiAttr());
    bufferization::replaceOpWithBufferizedValues(rewriter, op, outBuffers);
    return success();
  }
};

} // namespace

void mlir::unroll::registerKernelCallBufferization(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, UnrollDialect *) {
    KernelCallOp::attachInterface<KernelCallBufferization>(*ctx);
  });
}
