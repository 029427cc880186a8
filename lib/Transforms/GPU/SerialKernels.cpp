//===- SerialKernels.cpp - unroll-gpu-serial-kernels ------------------------===//
//
// Host code left between kernels that reads or writes device buffers (a
// full reduction into a rank-0 buffer and the scalar arithmetic on it) runs
// as a one-thread kernel. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "Buffers.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUSERIALKERNELS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace mlir::unroll {
bool isHostBuffer(Value memref) {
  Type elem = cast<MemRefType>(memref.getType()).getElementType();
  return elem.isIndex() || elem.isInteger(1);
}
} // namespace mlir::unroll

namespace {

enum class Kind { Device, Pure, Other };

/// Device: reads or writes a device buffer, and nothing in it must stay on
/// the host (no launch, call, allocation or deallocation). Pure: no memory
/// effect at all. Other: anything else.
Kind classify(Operation *op) {
  bool device = false, hostOnly = false;
  op->walk([&](Operation *inner) {
    if (isa<gpu::LaunchOp, func::CallOp, memref::AllocOp, memref::DeallocOp, memref::CopyOp>(
            inner)) {
      hostOnly = true;
      return WalkResult::interrupt();
    }
    Value buf;
    if (auto load = dyn_cast<memref::LoadOp>(inner))
      buf = load.getMemRef();
    else if (auto store = dyn_cast<memref::StoreOp>(inner))
      buf = store.getMemRef();
    if (buf && !unroll::isHostBuffer(buf))
      device = true;
    return WalkResult::advance();
  });
  if (hostOnly)
    return Kind::Other;
  if (device)
    return Kind::Device;
  return isMemoryEffectFree(op) ? Kind::Pure : Kind::Other;
}

struct SerialKernels : public unroll::impl::UnrollGPUSerialKernelsBase<SerialKernels> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>())
      if (failed(runOnFunction(f)))
        return signalPassFailure();
  }

  LogicalResult runOnFunction(func::FuncOp func) {
    // Wrapping a run can expose another (a value it computes, now read from
    // a device buffer by later host code): repeat until nothing changes.
    for (bool changed = true; changed;) {
      changed = false;
      SmallVector<Block *> blocks;
      // Outer blocks first: a host loop over device buffers becomes one
      // kernel, not a launch per iteration.
      func.walk<WalkOrder::PreOrder>([&](Block *b) {
        if (!isa<gpu::LaunchOp>(b->getParentOp()) &&
            !b->getParentOp()->getParentOfType<gpu::LaunchOp>())
          blocks.push_back(b);
      });
      for (Block *b : blocks) {
        FailureOr<bool> c = processBlock(*b);
        if (failed(c))
          return failure();
        if ((changed = *c))
          break;
      }
    }
    return success();
  }

  /// Wraps the first run of device operations in `block`; true if it did.
  FailureOr<bool> processBlock(Block &block) {
    SmallVector<Operation *> run;
    SmallVector<SmallVector<Operation *>> runs;
    auto close = [&] {
      if (!run.empty())
        runs.push_back(run);
      run.clear();
    };
    for (Operation &op : block.without_terminator()) {
      Kind k = classify(&op);
      if (k == Kind::Device || (k == Kind::Pure && !run.empty()))
        run.push_back(&op);
      else
        close();
    }
    close();
    if (runs.empty())
      return false;
    if (failed(wrap(runs.front())))
      return failure();
    return true;
  }

  /// How a scalar of `type` is kept in device memory: floats and integers
  /// as they are, i1 as i8 and index as i64 (buffers of i1 and index are
  /// host buffers); null if it cannot be.
  static Type slotType(Type type) {
    MLIRContext *ctx = type.getContext();
    if (type.isIndex())
      return IntegerType::get(ctx, 64);
    if (type.isInteger(1))
      return IntegerType::get(ctx, 8);
    if (type.isF32() || type.isF64() || type.isInteger(8) || type.isInteger(32) ||
        type.isInteger(64))
      return type;
    return {};
  }

  static Value toSlot(OpBuilder &b, Location loc, Value v, Type stored) {
    if (v.getType().isIndex())
      return b.create<arith::IndexCastOp>(loc, stored, v);
    if (v.getType().isInteger(1))
      return b.create<arith::ExtUIOp>(loc, stored, v);
    return v;
  }

  static Value fromSlot(OpBuilder &b, Location loc, Value v, Type type) {
    if (type.isIndex())
      return b.create<arith::IndexCastOp>(loc, type, v);
    if (type.isInteger(1))
      return b.create<arith::TruncIOp>(loc, type, v);
    return v;
  }

  /// `T unroll_gpu_read_<T>(index)` for T = f32, f64, i8, i32, i64, declared
  /// once per module: waits for the calling thread's stream, then copies the
  /// scalar at the device address to the host (runtime/gpu/CudaRuntime.cpp).
  func::FuncOp hostRead(Location loc, Type type) {
    ModuleOp module = getOperation();
    std::string name;
    llvm::raw_string_ostream(name) << "unroll_gpu_read_" << type;
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto f = b.create<func::FuncOp>(loc, name, b.getFunctionType({b.getIndexType()}, {type}));
    f.setPrivate();
    return f;
  }

  /// Moves the device operations of `run`, and the pure ones that depend on
  /// them, into a one-thread launch placed after the run.
  LogicalResult wrap(ArrayRef<Operation *> run) {
    llvm::SetVector<Operation *> moved;
    for (Operation *op : run) {
      bool dependent = llvm::any_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && moved.contains(def);
      });
      // Operands used inside nested regions count too.
      op->walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          if (Operation *def = v.getDefiningOp(); def && moved.contains(def))
            dependent = true;
      });
      if (classify(op) == Kind::Device || dependent)
        moved.insert(op);
    }
    // Values the host needs after the run travel through a device scalar:
    // stored by the kernel, loaded where they are used (which makes that
    // code device code in its turn).
    SmallVector<std::pair<Value, SmallVector<OpOperand *>>> escaping;
    for (Operation *op : moved)
      for (Value r : op->getResults()) {
        SmallVector<OpOperand *> outside;
        for (OpOperand &use : r.getUses()) {
          Operation *top = op->getBlock()->findAncestorOpInBlock(*use.getOwner());
          if (!top || !moved.contains(top))
            outside.push_back(&use);
        }
        if (outside.empty())
          continue;
        if (!slotType(r.getType()))
          return op->emitOpError("computes a value of type ")
                 << r.getType()
                 << " on the device that host code needs after it (unroll-gpu-serial-kernels)";
        escaping.push_back({r, outside});
      }
    Location loc = moved.front()->getLoc();
    OpBuilder b(run.back()->getBlock(), std::next(run.back()->getIterator()));
    Value one = b.create<arith::ConstantIndexOp>(loc, 1);
    auto launch = b.create<gpu::LaunchOp>(loc, one, one, one, one, one, one);
    Block &body = launch.getBody().front();
    b.setInsertionPointToEnd(&body);
    auto term = b.create<gpu::TerminatorOp>(loc);
    for (Operation *op : moved)
      op->moveBefore(term);
    Block *block = launch->getBlock();
    for (auto &[value, uses] : escaping) {
      Type type = value.getType(), stored = slotType(type);
      OpBuilder ab(launch);
      Value slot = ab.create<memref::AllocOp>(loc, MemRefType::get({}, stored));
      OpBuilder sb(term);
      sb.create<memref::StoreOp>(loc, toSlot(sb, loc, value, stored), slot);
      OpBuilder db(block->getTerminator());
      db.create<memref::DeallocOp>(loc, slot);
      for (OpOperand *use : uses) {
        Operation *owner = use->getOwner();
        OpBuilder lb(owner);
        Value v;
        if (owner->getParentOfType<gpu::LaunchOp>() ||
            (classify(owner) == Kind::Pure && !owner->hasTrait<OpTrait::IsTerminator>())) {
          // A kernel reads it, or host code that becomes a kernel next.
          v = lb.create<memref::LoadOp>(loc, slot);
        } else {
          // Host control flow (a branch, a loop bound) needs the value: the
          // runtime waits for the stream and copies the scalar back.
          Value addr = lb.create<memref::ExtractAlignedPointerAsIndexOp>(loc, slot);
          v = lb.create<func::CallOp>(loc, hostRead(loc, stored), ValueRange{addr}).getResult(0);
          ++numHostReads;
        }
        use->set(fromSlot(lb, loc, v, type));
      }
    }
    ++numKernels;
    return success();
  }
};

} // namespace
