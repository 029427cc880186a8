//===- Async.cpp - unroll-gpu-async -----------------------------------------===//
//
// One stream per call: launches, copies and device allocations are issued
// on it and the host waits once, before returning. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "Buffers.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUASYNC
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct Async : public unroll::impl::UnrollGPUAsyncBase<Async> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (!f.isExternal() && failed(run(f)))
        return signalPassFailure();
  }

  static bool onHost(Operation *op) { return !op->getParentOfType<gpu::LaunchOp>(); }

  LogicalResult run(func::FuncOp f) {
    SmallVector<gpu::LaunchOp> launches;
    SmallVector<memref::AllocOp> allocs;
    SmallVector<memref::CopyOp> copies;
    WalkResult touched = f.walk([&](Operation *op) {
      if (auto l = dyn_cast<gpu::LaunchOp>(op))
        launches.push_back(l);
      if (!onHost(op))
        return WalkResult::advance();
      if (auto a = dyn_cast<memref::AllocOp>(op); a && !unroll::isHostBuffer(a))
        allocs.push_back(a);
      if (auto c = dyn_cast<memref::CopyOp>(op))
        copies.push_back(c);
      Value buf;
      if (auto load = dyn_cast<memref::LoadOp>(op))
        buf = load.getMemRef();
      if (auto store = dyn_cast<memref::StoreOp>(op))
        buf = store.getMemRef();
      if (buf && !unroll::isHostBuffer(buf)) {
        op->emitOpError("host code reads or writes a device buffer (unroll-gpu-async)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (touched.wasInterrupted())
      return failure();
    if (launches.empty() && allocs.empty() && copies.empty())
      return success();

    Location loc = f.getLoc();
    OpBuilder b = OpBuilder::atBlockBegin(&f.getBody().front());
    Type tokenType = b.getType<gpu::AsyncTokenType>();
    Value stream = b.create<gpu::WaitOp>(loc, tokenType, ValueRange{}).getAsyncToken();

    for (gpu::LaunchOp old : launches) {
      b.setInsertionPoint(old);
      auto launch = b.create<gpu::LaunchOp>(
          old.getLoc(), old.getGridSizeX(), old.getGridSizeY(), old.getGridSizeZ(),
          old.getBlockSizeX(), old.getBlockSizeY(), old.getBlockSizeZ(),
          old.getDynamicSharedMemorySize(), tokenType, ValueRange{stream},
          TypeRange(ValueRange(old.getWorkgroupAttributions())));
      launch.getBody().takeBody(old.getBody());
      old.erase();
      ++numLaunches;
    }
    for (memref::AllocOp old : allocs) {
      b.setInsertionPoint(old);
      auto alloc = b.create<gpu::AllocOp>(old.getLoc(), old.getType(), tokenType,
                                          ValueRange{stream}, old.getDynamicSizes(),
                                          old.getSymbolOperands(), /*hostShared=*/false);
      old.replaceAllUsesWith(alloc.getMemref());
      old.erase();
      ++numAllocs;
    }
    for (memref::CopyOp old : copies) {
      b.setInsertionPoint(old);
      b.create<gpu::MemcpyOp>(old.getLoc(), tokenType, ValueRange{stream}, old.getTarget(),
                              old.getSource());
      old.erase();
      ++numCopies;
    }
    f.walk([&](func::ReturnOp ret) {
      b.setInsertionPoint(ret);
      b.create<gpu::WaitOp>(ret.getLoc(), Type(), ValueRange{stream});
    });
    return success();
  }
};

} // namespace
