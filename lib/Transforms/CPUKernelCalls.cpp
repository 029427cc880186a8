//===- CPUKernelCalls.cpp - unroll.kernel_call on buffers to func.call ----===//
//
// unroll-cpu-kernel-calls: after bufferization, an unroll.kernel_call's
// inputs and outputs are buffers (its outputs those of their destinations,
// the tape's slots among them). The kernels of runtime/cpu/ take indices
// only, so each buffer becomes its address — the aligned pointer plus the
// offset in bytes — and the strides of its outer dimensions, laid out in
// the op's abi order, and the op the func.call of its callee (declared by
// --convert-unroll-to-linalg).
//
//===----------------------------------------------------------------------===//
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLCPUKERNELCALLS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

struct KernelCallLowering : OpConversionPattern<KernelCallOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult matchAndRewrite(KernelCallOp op, OpAdaptor a,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> args;
    // A buffer's address and the strides of its outer dimensions.
    auto pushBuffer = [&](Value m) {
      auto meta = rewriter.create<memref::ExtractStridedMetadataOp>(loc, m);
      auto type = cast<MemRefType>(m.getType());
      Value bytes = rewriter.create<arith::ConstantIndexOp>(loc, type.getElementTypeBitWidth() / 8);
      Value base = rewriter.create<memref::ExtractAlignedPointerAsIndexOp>(loc, m);
      args.push_back(rewriter.create<arith::AddIOp>(
          loc, base, rewriter.create<arith::MulIOp>(loc, meta.getOffset(), bytes)));
      for (int64_t d = 0; d + 1 < type.getRank(); ++d)
        args.push_back(meta.getStrides()[d]);
    };
    unsigned arg = 0, in = 0, out = 0;
    for (int64_t slot : op.getAbi()) {
      if (slot == kCallArg)
        args.push_back(a.getArgs()[arg++]);
      else
        pushBuffer(slot == kCallIn ? a.getIns()[in++] : a.getOuts()[out++]);
    }
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(op, op.getCalleeAttr());
    if (!callee || callee.getNumArguments() != args.size())
      return op.emitOpError() << "expected a declaration of " << op.getCalleeAttr() << " with "
                              << args.size() << " index arguments";
    rewriter.replaceOpWithNewOp<func::CallOp>(op, callee, args);
    return success();
  }
};

struct CPUKernelCalls : public unroll::impl::UnrollCPUKernelCallsBase<CPUKernelCalls> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    WalkResult onTensors = getOperation().walk([](KernelCallOp op) {
      if (op.getNumResults() == 0)
        return WalkResult::advance();
      op.emitOpError("on tensors: run --unroll-cpu-kernel-calls after bufferization");
      return WalkResult::interrupt();
    });
    if (onTensors.wasInterrupted())
      return signalPassFailure();
    ConversionTarget target(*ctx);
    target.addLegalDialect<arith::ArithDialect, func::FuncDialect, memref::MemRefDialect>();
    target.addIllegalOp<KernelCallOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    patterns.add<KernelCallLowering>(ctx);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
