//===- ParallelReductions.cpp - unroll-gpu-parallel-reductions --------------===//
//
// The one-thread kernels of unroll-gpu-serial-kernels hold the full
// reductions (the loss over every prompt and position, bias-gradient
// totals): after unroll-gpu-promote-accumulators, a loop that adds into a
// register. One thread summing thousands of elements serializes the GPU for
// tens of microseconds, several times per step. This pass spreads the
// reduction's outer loop over a block of 256 threads (thread t takes the
// iterations t, t + 256, ...), combines the partial sums with
// gpu.all_reduce (shuffles and workgroup memory after convert-gpu-to-nvvm),
// and leaves what came before and after the loop to thread 0. The sum is
// reassociated, as any parallel reduction is. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUPARALLELREDUCTIONS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

constexpr int64_t kThreads = 256;

bool isOne(Value v) {
  auto c = v.getDefiningOp<arith::ConstantIndexOp>();
  return c && c.value() == 1;
}

/// Whether `loop` (one float iter_arg) only adds into it: the iter_arg's one
/// use is an addf whose result continues the chain (or the init of a nested
/// loop of the same kind), and the chain's end is what the loop yields.
/// Nothing in it writes memory.
bool isSumLoop(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() != 1 || !isa<FloatType>(loop.getResult(0).getType()))
    return false;
  bool writes = false;
  loop.getBody()->walk([&](Operation *op) {
    if (!isMemoryEffectFree(op) && !isa<memref::LoadOp, scf::ForOp, scf::YieldOp>(op))
      writes = true;
  });
  if (writes)
    return false;
  Value v = loop.getRegionIterArgs()[0];
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  while (v != yield.getOperand(0)) {
    if (!v.hasOneUse())
      return false;
    OpOperand &use = *v.use_begin();
    Operation *user = use.getOwner();
    if (auto add = dyn_cast<arith::AddFOp>(user)) {
      v = add.getResult();
      continue;
    }
    if (auto inner = dyn_cast<scf::ForOp>(user); inner && inner.getInitArgs().size() == 1 &&
                                                 use.getOperandNumber() == 3 && isSumLoop(inner)) {
      v = inner.getResult(0);
      continue;
    }
    return false;
  }
  return true;
}

struct ParallelReductions
    : public mlir::unroll::impl::UnrollGPUParallelReductionsBase<ParallelReductions> {
  void runOnOperation() override {
    SmallVector<gpu::LaunchOp> serial;
    getOperation().walk([&](gpu::LaunchOp l) {
      if (isOne(l.getGridSizeX()) && isOne(l.getGridSizeY()) && isOne(l.getGridSizeZ()) &&
          isOne(l.getBlockSizeX()) && isOne(l.getBlockSizeY()) && isOne(l.getBlockSizeZ()))
        serial.push_back(l);
    });
    for (gpu::LaunchOp l : serial)
      if (succeeded(parallelize(l)))
        ++numParallelized;
  }

  LogicalResult parallelize(gpu::LaunchOp launch) {
    Block &body = launch.getBody().front();
    // The first top-level loop is the reduction; it may use only values from
    // outside the kernel (and its own init).
    scf::ForOp loop;
    for (Operation &op : body)
      if ((loop = dyn_cast<scf::ForOp>(&op)))
        break;
    if (!loop || !isSumLoop(loop))
      return failure();
    auto outside = [&](Value v) { return !launch.getBody().isAncestor(v.getParentRegion()); };
    if (!outside(loop.getLowerBound()) || !outside(loop.getUpperBound()) ||
        !outside(loop.getStep()))
      return failure();
    bool usesKernelValues = false;
    loop.getBody()->walk([&](Operation *op) {
      for (Value v : op->getOperands())
        if (!outside(v) && !loop.getRegion().isAncestor(v.getParentRegion()))
          usesKernelValues = true;
    });
    if (usesKernelValues)
      return failure();

    Location loc = loop.getLoc();
    OpBuilder b(launch);
    launch.getBlockSizeXMutable().assign(b.create<arith::ConstantIndexOp>(loc, kThreads));

    // Every thread: its share of the iterations, from zero.
    b.setInsertionPointToStart(&body);
    Value tid = launch.getThreadIds().x;
    Value threads = b.create<arith::ConstantIndexOp>(loc, kThreads);
    Value lb = b.create<arith::AddIOp>(loc, loop.getLowerBound(),
                                       b.create<arith::MulIOp>(loc, tid, loop.getStep()));
    Value step = b.create<arith::MulIOp>(loc, loop.getStep(), threads);
    Type type = loop.getResult(0).getType();
    Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(type));
    auto part =
        b.create<scf::ForOp>(loc, lb, loop.getUpperBound(), step, ValueRange{zero},
                             [&](OpBuilder &pb, Location, Value iv, ValueRange args) {
                               IRMapping map;
                               map.map(loop.getInductionVar(), iv);
                               map.map(loop.getRegionIterArgs()[0], args[0]);
                               for (Operation &op : loop.getBody()->without_terminator())
                                 pb.clone(op, map);
                               auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
                               pb.create<scf::YieldOp>(loc, map.lookup(yield.getOperand(0)));
                             });
    auto total = b.create<gpu::AllReduceOp>(
        loc, type, part.getResult(0),
        gpu::AllReduceOperationAttr::get(b.getContext(), gpu::AllReduceOperation::ADD),
        b.getUnitAttr());

    // Thread 0: the code before the loop, init + total, the code after.
    Value first = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, tid,
                                          b.create<arith::ConstantIndexOp>(loc, 0));
    auto only = b.create<scf::IfOp>(loc, first, /*withElseRegion=*/false);
    Block *thenBlock = &only.getThenRegion().front();
    Operation *thenEnd = thenBlock->getTerminator();
    SmallVector<Operation *> rest;
    for (Operation &op : llvm::make_range(std::next(only->getIterator()), body.end()))
      if (!op.hasTrait<OpTrait::IsTerminator>())
        rest.push_back(&op);
    for (Operation *op : rest) {
      if (op == loop.getOperation()) {
        OpBuilder tb(thenEnd);
        Value sum = tb.create<arith::AddFOp>(loc, loop.getInitArgs()[0], total.getResult());
        loop.getResult(0).replaceAllUsesWith(sum);
        continue;
      }
      op->moveBefore(thenEnd);
    }
    loop.erase();
    return success();
  }
};

} // namespace
