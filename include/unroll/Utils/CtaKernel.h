//===- CtaKernel.h - kernels written as phases between barriers -*- C++ -*-===//
//
// Some kernels need what one thread per output element cannot give: tiles in
// shared memory, threads that cooperate, barriers (the fused attention of
// lib/Conversion/UnrollToLinalg/FusedAttention.cpp). They are written at the
// buffer level as plain host loops, in a form that both the GPU and the CPU
// emulator can run:
//
//   scf.for %cta = 0 to %count {                   // unroll.cta.grid = threads
//     ... uniform code: index arithmetic, loops whose bounds every thread
//         agrees on ...
//     scf.for %t = 0 to threads { ... }            // unroll.cta.phase
//     scf.for %t = 0 to threads { ... }            // unroll.cta.phase
//   }
//
// with buffers in shared memory as `memref.alloc` of static shape marked
// unroll.cta.shared, allocated before the grid loop and used only by
// memref.load/store inside it. A phase is the work of every thread between
// two barriers; threads of one phase must not read what another thread of
// the same phase writes (so any order of the threads gives the same result).
// Uniform code outside phases must not write memory.
//
// `unroll-gpu-map-ctas` (lib/Transforms/GPU/MapCTAs.cpp) turns each grid
// loop into a gpu.launch of `count` blocks of `threads` threads, the shared
// buffers into workgroup attributions, and each phase into its body with
// %t = threadIdx.x followed by gpu.barrier. Emulated, the loops stay loops:
// CTAs run one after another, and in a CTA each phase runs its threads in
// order, which is a valid schedule of the barriers.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_UTILS_CTAKERNEL_H
#define UNROLL_UTILS_CTAKERNEL_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::unroll::cta {

/// On the grid's scf.for: the number of threads per CTA (i64).
constexpr llvm::StringLiteral kGrid = "unroll.cta.grid";
/// On the grid's scf.for: the kernel's name (string), kept for profiles.
constexpr llvm::StringLiteral kName = "unroll.cta.name";
/// On a phase's scf.for over the threads (unit).
constexpr llvm::StringLiteral kPhase = "unroll.cta.phase";
/// On a memref.alloc: the buffer lives in shared (workgroup) memory.
constexpr llvm::StringLiteral kShared = "unroll.cta.shared";

/// The largest static shared memory a CTA may declare (without opt-in).
constexpr int64_t kSharedBytes = 48 * 1024;

/// Builds kernels of that form. Everything is created at `b`'s insertion
/// point; the callbacks build their bodies with the same builder.
class KernelBuilder {
public:
  KernelBuilder(OpBuilder &b, Location loc, int64_t threads) : b(b), loc(loc), threads(threads) {}

  OpBuilder &b;
  Location loc;
  int64_t threads;

  Value idx(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }

  /// A buffer in shared memory; create these before grid().
  Value shared(ArrayRef<int64_t> shape, Type element) {
    auto alloc = b.create<memref::AllocOp>(loc, MemRefType::get(shape, element));
    alloc->setAttr(kShared, b.getUnitAttr());
    return alloc;
  }

  /// The grid: body(cta) for cta in [0, count).
  void grid(Value count, StringRef name, llvm::function_ref<void(Value)> body) {
    auto loop = forLoop(idx(0), count, idx(1), body);
    loop->setAttr(kGrid, b.getI64IntegerAttr(threads));
    loop->setAttr(kName, b.getStringAttr(name));
  }

  /// A phase: body(t) for every thread t of the CTA.
  void phase(llvm::function_ref<void(Value)> body) {
    forLoop(idx(0), idx(threads), idx(1), body)->setAttr(kPhase, b.getUnitAttr());
  }

  /// In a phase: body(i) for i = t, t + threads, ... < total.
  void strided(Value t, Value total, llvm::function_ref<void(Value)> body) {
    forLoop(t, total, idx(threads), body);
  }

  /// A uniform loop: body(i) for i in [lb, ub).
  void loop(Value lb, Value ub, llvm::function_ref<void(Value)> body) {
    forLoop(lb, ub, idx(1), body);
  }

  /// acc = init; for i in [lb, ub): acc = step(i, acc); the final acc.
  Value fold(Value lb, Value ub, Value init, llvm::function_ref<Value(Value, Value)> step) {
    auto loop = b.create<scf::ForOp>(loc, lb, ub, idx(1), ValueRange{init},
                                     [&](OpBuilder &, Location, Value iv, ValueRange acc) {
                                       b.create<scf::YieldOp>(loc, step(iv, acc.front()));
                                     });
    return loop.getResult(0);
  }

  /// The same with several accumulators: step returns the next value of each.
  SmallVector<Value> folds(Value lb, Value ub, ValueRange init,
                           llvm::function_ref<SmallVector<Value>(Value, ValueRange)> step) {
    auto loop = b.create<scf::ForOp>(loc, lb, ub, idx(1), init,
                                     [&](OpBuilder &, Location, Value iv, ValueRange acc) {
                                       b.create<scf::YieldOp>(loc, step(iv, acc));
                                     });
    return SmallVector<Value>(loop.getResults());
  }

  /// if (cond) body().
  void when(Value cond, llvm::function_ref<void()> body) {
    auto op = b.create<scf::IfOp>(loc, cond, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(op.thenBlock());
    body();
  }

  /// cond ? read() : zero, without evaluating read() otherwise (a guarded load).
  Value readOr(Value cond, Value zero, llvm::function_ref<Value()> read) {
    auto op = b.create<scf::IfOp>(
        loc, cond, [&](OpBuilder &, Location) { b.create<scf::YieldOp>(loc, read()); },
        [&](OpBuilder &, Location) { b.create<scf::YieldOp>(loc, zero); });
    return op.getResult(0);
  }

private:
  scf::ForOp forLoop(Value lb, Value ub, Value step, llvm::function_ref<void(Value)> body) {
    return b.create<scf::ForOp>(loc, lb, ub, step, ValueRange{},
                                [&](OpBuilder &, Location, Value iv, ValueRange) {
                                  body(iv);
                                  b.create<scf::YieldOp>(loc);
                                });
  }
};

} // namespace mlir::unroll::cta

#endif // UNROLL_UTILS_CTAKERNEL_H
