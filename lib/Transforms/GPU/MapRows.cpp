//===- MapRows.cpp - unroll-gpu-map-rows ------------------------------------===//
//
// A row kernel of unroll-gpu-fuse-rows (a layer norm with the residual and
// injection around it, its gradient) is an scf.parallel over rows whose body
// walks the row's columns in serial loops: sum, sum of squares, normalize.
// Mapped one thread per row, neighbouring threads read addresses a row
// apart and the paper config's 5,248 rows fill 21 blocks of an H200's 132
// multiprocessors: 300 us per layer norm, measured (docs/gpu.md). Here each
// row gets a warp: lane l takes the columns l, l + 32, ... of every column
// loop (a warp reads 32 neighbouring floats at a time), a sum or max over
// the columns into a row value becomes 32 partial results combined by xor
// shuffles, and the code between the loops (the row's scalars: mean,
// variance, 1/sigma) runs in every lane alike, each lane writing the same
// value; a loop's reduced results are written by lane 0. A __syncwarp after
// each column loop (and before one that follows stores) orders one part's
// writes before the next part's reads and writes by other lanes.
//
// What must hold (else the kernel is left to unroll-gpu-map-loops):
//   - each top-level op of the body is a column loop, a load, a store, or
//     pure and without regions;
//   - a column loop has no results and only loads, stores and pure ops; each
//     store either writes an element indexed by the loop's index (each
//     iteration its own element), or accumulates into a loop-invariant
//     element, `A[i] = A[i] + e` (addf, maximumf or maxnumf; A read nowhere
//     else in the loop); a load from a buffer the loop writes elementwise
//     reads the element that iteration writes;
//   - a store between the loops writes a buffer none of the earlier code
//     read, so running it 32 times stores the same value 32 times.
// Buffers are told apart by their roots: two allocations never alias, nor
// does an allocation alias another root if it never escapes (into a yield,
// a call, a store) or was made after that root was defined; the rest may.
//
// See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "IterationSpace.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUMAPROWS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

constexpr int64_t kLanes = 32;
/// Column loops with a static trip count below this keep one thread per row.
constexpr int64_t kMinColumns = 16;

/// Whether the buffer `v` (or a view of it) may appear under a name that
/// unroll::viewRoot does not trace back to it: yielded by a loop, passed
/// to a call, stored as a value. Loads, stores, deallocation, views and
/// pointer extraction for a library call keep it where it is.
bool escapes(Value v) {
  for (Operation *user : v.getUsers()) {
    if (isa<memref::LoadOp, memref::DeallocOp, memref::DimOp,
            memref::ExtractAlignedPointerAsIndexOp, memref::ExtractStridedMetadataOp,
            memref::CopyOp>(user))
      continue;
    if (auto st = dyn_cast<memref::StoreOp>(user)) {
      if (st.getValueToStore() == v)
        return true;
      continue;
    }
    if (isa<ViewLikeOpInterface, memref::CastOp>(user) && user->getNumResults() == 1) {
      if (escapes(user->getResult(0)))
        return true;
      continue;
    }
    return true;
  }
  return false;
}

/// Buffers are told apart by their roots. Two allocations never alias; an
/// allocation aliases no other root if it does not escape, or if that root
/// (a function argument, a loop's value) was defined before it was made.
bool mayAlias(Value a, Value b, DominanceInfo &dom) {
  Value ra = unroll::viewRoot(a), rb = unroll::viewRoot(b);
  if (ra == rb)
    return true;
  auto fresh = [](Value r) { return r.getDefiningOp<memref::AllocOp>() != nullptr; };
  if (fresh(ra) && fresh(rb))
    return false;
  if (!fresh(ra))
    std::swap(ra, rb);
  if (!fresh(ra))
    return true;
  return escapes(ra) && !dom.properlyDominates(rb, ra.getDefiningOp());
}

bool sameIndices(ValueRange a, ValueRange b) { return llvm::equal(a, b); }

/// `A[i] = A[i] op e` inside a column loop.
struct Accumulator {
  memref::LoadOp load;
  memref::StoreOp store;
  Operation *combine;
};

/// How a column loop's iterations are spread over the lanes.
struct ColumnLoop {
  scf::ForOp loop;
  SmallVector<Accumulator> accumulators;
};

bool isCombiner(Operation *op) {
  return isa<arith::AddFOp, arith::MaximumFOp, arith::MaxNumFOp>(op);
}

/// The combiner's identity: 0 for sums, -inf for maxima.
Value neutral(OpBuilder &b, Location loc, Operation *combine, Type type) {
  auto ft = cast<FloatType>(type);
  if (isa<arith::AddFOp>(combine))
    return b.create<arith::ConstantOp>(loc, b.getFloatAttr(ft, 0.0));
  return b.create<arith::ConstantOp>(
      loc, b.getFloatAttr(ft, APFloat::getInf(ft.getFloatSemantics(), /*Negative=*/true)));
}

/// `combine`'s kind applied to (a, b).
Value combineLike(OpBuilder &b, Location loc, Operation *combine, Value x, Value y) {
  OperationState st(loc, combine->getName(), ValueRange{x, y}, TypeRange{x.getType()},
                    combine->getAttrs());
  return b.create(st)->getResult(0);
}

/// Classifies `loop` as a column loop; false if its iterations cannot be
/// spread over lanes.
bool classify(scf::ForOp loop, ColumnLoop &out, DominanceInfo &dom) {
  if (loop.getNumResults() != 0)
    return false;
  if (auto trip = constantTripCount(loop.getLowerBound(), loop.getUpperBound(), loop.getStep()))
    if (*trip < kMinColumns)
      return false;
  Value iv = loop.getInductionVar();
  SmallVector<memref::LoadOp> loads;
  SmallVector<memref::StoreOp> elementwise;
  out.loop = loop;
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (op.getNumRegions() != 0)
      return false;
    if (auto ld = dyn_cast<memref::LoadOp>(op)) {
      loads.push_back(ld);
    } else if (auto st = dyn_cast<memref::StoreOp>(op)) {
      if (llvm::all_of(st.getIndices(), [&](Value i) { return loop.isDefinedOutsideOfLoop(i); })) {
        Operation *c = st.getValueToStore().getDefiningOp();
        if (!c || c->getBlock() != loop.getBody() || !isCombiner(c) || !c->hasOneUse())
          return false;
        // Shuffles move 32-bit words: f32 in one, f64 in two.
        if (!c->getResult(0).getType().isF32() && !c->getResult(0).getType().isF64())
          return false;
        memref::LoadOp acc;
        for (Value operand : c->getOperands())
          if (auto ld = operand.getDefiningOp<memref::LoadOp>())
            if (ld->getBlock() == loop.getBody() && ld.getMemRef() == st.getMemRef() &&
                sameIndices(ld.getIndices(), st.getIndices()) && ld->hasOneUse())
              acc = ld;
        if (!acc || c->getOperand(0) == c->getOperand(1))
          return false;
        out.accumulators.push_back({acc, st, c});
      } else if (llvm::is_contained(st.getIndices(), iv)) {
        elementwise.push_back(st);
      } else {
        return false;
      }
    } else if (!isMemoryEffectFree(&op)) {
      return false;
    }
  }
  auto isAccLoad = [&](memref::LoadOp ld) {
    return llvm::any_of(out.accumulators, [&](Accumulator a) { return a.load == ld; });
  };
  for (memref::LoadOp ld : loads) {
    if (isAccLoad(ld))
      continue;
    for (Accumulator a : out.accumulators)
      if (mayAlias(ld.getMemRef(), a.store.getMemRef(), dom))
        return false;
    for (memref::StoreOp st : elementwise)
      if (mayAlias(ld.getMemRef(), st.getMemRef(), dom) &&
          !(ld.getMemRef() == st.getMemRef() && sameIndices(ld.getIndices(), st.getIndices())))
        return false;
  }
  for (auto [i, a] : llvm::enumerate(out.accumulators)) {
    for (Accumulator b : ArrayRef(out.accumulators).drop_front(i + 1))
      if (mayAlias(a.store.getMemRef(), b.store.getMemRef(), dom))
        return false;
    for (memref::StoreOp st : elementwise)
      if (mayAlias(a.store.getMemRef(), st.getMemRef(), dom))
        return false;
  }
  for (auto [i, a] : llvm::enumerate(elementwise))
    for (memref::StoreOp b : ArrayRef(elementwise).drop_front(i + 1))
      if (mayAlias(a.getMemRef(), b.getMemRef(), dom) &&
          !(a.getMemRef() == b.getMemRef() && sameIndices(a.getIndices(), b.getIndices())))
        return false;
  return true;
}

/// The column loops of `par`'s body, or nothing if the kernel does not fit.
std::optional<SmallVector<ColumnLoop>> analyze(scf::ParallelOp par, DominanceInfo &dom) {
  if (!par.getInitVals().empty())
    return std::nullopt;
  SmallVector<ColumnLoop> loops;
  SmallVector<Value> read; // buffers read so far, in program order
  for (Operation &op : par.getBody()->without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      ColumnLoop c;
      if (!classify(loop, c, dom))
        return std::nullopt;
      loop.getBody()->walk([&](memref::LoadOp ld) { read.push_back(ld.getMemRef()); });
      loops.push_back(std::move(c));
    } else if (auto ld = dyn_cast<memref::LoadOp>(op)) {
      read.push_back(ld.getMemRef());
    } else if (auto st = dyn_cast<memref::StoreOp>(op)) {
      if (llvm::any_of(read, [&](Value r) { return mayAlias(r, st.getMemRef(), dom); }))
        return std::nullopt;
    } else if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op)) {
      return std::nullopt;
    }
  }
  if (loops.empty())
    return std::nullopt;
  return loops;
}

/// v combined with its xor-shuffled copies over the 32 lanes: every lane
/// ends with the warp's total. 64-bit values move as two 32-bit halves.
Value warpAllReduce(OpBuilder &b, Location loc, Operation *combine, Value v) {
  Value width = b.create<arith::ConstantIntOp>(loc, kLanes, 32);
  for (int64_t off = kLanes / 2; off >= 1; off /= 2) {
    Value o = b.create<arith::ConstantIntOp>(loc, off, 32);
    Value other;
    if (v.getType().getIntOrFloatBitWidth() == 32) {
      other = b.create<gpu::ShuffleOp>(loc, v, o, width, gpu::ShuffleMode::XOR).getShuffleResult();
    } else {
      Type i32 = b.getI32Type(), i64 = b.getI64Type();
      Value bits = b.create<arith::BitcastOp>(loc, i64, v);
      Value lo = b.create<arith::TruncIOp>(loc, i32, bits);
      Value c32 = b.create<arith::ConstantIntOp>(loc, 32, 64);
      Value hi = b.create<arith::TruncIOp>(loc, i32, b.create<arith::ShRUIOp>(loc, bits, c32));
      lo = b.create<gpu::ShuffleOp>(loc, lo, o, width, gpu::ShuffleMode::XOR).getShuffleResult();
      hi = b.create<gpu::ShuffleOp>(loc, hi, o, width, gpu::ShuffleMode::XOR).getShuffleResult();
      Value joined = b.create<arith::OrIOp>(
          loc, b.create<arith::ExtUIOp>(loc, i64, lo),
          b.create<arith::ShLIOp>(loc, b.create<arith::ExtUIOp>(loc, i64, hi), c32));
      other = b.create<arith::BitcastOp>(loc, v.getType(), joined);
    }
    v = combineLike(b, loc, combine, v, other);
  }
  return v;
}

struct MapRows : public unroll::impl::UnrollGPUMapRowsBase<MapRows> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < kLanes || blockSize > 1024 || blockSize % kLanes != 0)
      return; // unroll-gpu-map-loops reports a bad block size; rows stay one per thread
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>() && !p->getParentOfType<gpu::LaunchOp>())
        outermost.push_back(p);
    });
    DominanceInfo dom(getOperation());
    for (scf::ParallelOp p : outermost)
      if (std::optional<SmallVector<ColumnLoop>> loops = analyze(p, dom)) {
        mapRows(p, *loops);
        ++numKernels;
      }
  }

  void mapRows(scf::ParallelOp p, MutableArrayRef<ColumnLoop> loops) {
    Location loc = p.getLoc();
    OpBuilder b(p);
    SmallVector<Value> counts;
    Value rows = unroll::iterspace::iterationCount(b, p, counts);
    Value lanes = b.create<arith::ConstantIndexOp>(loc, kLanes);
    Value perBlock = b.create<arith::ConstantIndexOp>(loc, blockSize / kLanes);
    Value threads = b.create<arith::ConstantIndexOp>(loc, blockSize);

    // The row of this warp, and (on the GPU) the lane; emulated, the inner
    // loop runs over the block's rows.
    unroll::iterspace::Grid grid =
        unroll::iterspace::openGridOver(b, loc, rows, perBlock, threads, perBlock, emulateOnHost);
    Value row, lane;
    if (emulateOnHost) {
      row = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, grid.block, perBlock),
                                    grid.inner);
    } else {
      lane = b.create<arith::RemUIOp>(loc, grid.inner, lanes);
      row = b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, grid.block, perBlock),
                                    b.create<arith::DivUIOp>(loc, grid.inner, lanes));
    }
    // A whole warp shares its row, so the guard keeps warps converged.
    auto guard = b.create<scf::IfOp>(
        loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, row, rows), false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());

    IRMapping map;
    unroll::iterspace::delinearize(b, p, row, counts, map);
    // The code between the loops runs in every lane; a store there is
    // followed by a __syncwarp before the next column loop, whose lanes may
    // write the element it stored (every lane's store lands before any
    // lane's loop starts).
    auto next = loops.begin();
    bool stored = false;
    for (Operation &op : p.getBody()->without_terminator()) {
      if (next != loops.end() && &op == next->loop.getOperation()) {
        if (stored && !emulateOnHost)
          syncWarp(b, op.getLoc());
        emitColumnLoop(b, *next++, lane, map);
        stored = false;
      } else {
        b.clone(op, map);
        stored |= isa<memref::StoreOp>(op);
      }
    }
    p.erase();
  }

  /// `c` with its iterations spread over the lanes (lane l: lb + l * step,
  /// stepping 32 * step) and its accumulators combined across the lanes.
  void emitColumnLoop(OpBuilder &b, ColumnLoop c, Value lane, IRMapping &map) {
    scf::ForOp loop = c.loop;
    Location loc = loop.getLoc();
    Value lb = map.lookupOrDefault(loop.getLowerBound());
    Value ub = map.lookupOrDefault(loop.getUpperBound());
    Value step = map.lookupOrDefault(loop.getStep());
    Value lanes = b.create<arith::ConstantIndexOp>(loc, kLanes);
    Value wideStep = b.create<arith::MulIOp>(loc, step, lanes);
    // Every lane reads the accumulators' values before any lane writes.
    SmallVector<Value> inits, neutrals;
    for (Accumulator a : c.accumulators) {
      SmallVector<Value> idx = llvm::map_to_vector(a.store.getIndices(),
                                                   [&](Value v) { return map.lookupOrDefault(v); });
      inits.push_back(b.create<memref::LoadOp>(loc, map.lookupOrDefault(a.store.getMemRef()), idx));
      neutrals.push_back(neutral(b, loc, a.combine, inits.back().getType()));
    }
    // One lane's share of the loop: its partial results.
    auto partials = [&](OpBuilder &b, Value l) -> SmallVector<Value> {
      Value first = b.create<arith::AddIOp>(loc, lb, b.create<arith::MulIOp>(loc, l, step));
      auto share = b.create<scf::ForOp>(
          loc, first, ub, wideStep, neutrals,
          [&](OpBuilder &nb, Location, Value iv, ValueRange acc) {
            IRMapping inner = map;
            inner.map(loop.getInductionVar(), iv);
            for (auto [a, v] : llvm::zip(c.accumulators, acc))
              inner.map(a.load.getResult(), v);
            SmallVector<Value> yields(c.accumulators.size());
            for (Operation &op : loop.getBody()->without_terminator()) {
              auto it = llvm::find_if(c.accumulators, [&](Accumulator a) {
                return a.load.getOperation() == &op || a.store.getOperation() == &op;
              });
              if (it == c.accumulators.end()) {
                nb.clone(op, inner);
              } else if (it->store.getOperation() == &op) {
                yields[it - c.accumulators.begin()] = inner.lookup(it->combine->getResult(0));
              }
            }
            nb.create<scf::YieldOp>(loc, yields);
          });
      return SmallVector<Value>(share.getResults());
    };
    SmallVector<Value> totals;
    if (emulateOnHost) {
      // Lanes in turn; their partial results combined in lane order.
      Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
      Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
      auto laneLoop = b.create<scf::ForOp>(
          loc, c0, lanes, c1, neutrals, [&](OpBuilder &nb, Location, Value l, ValueRange acc) {
            SmallVector<Value> mine = partials(nb, l), next;
            for (auto [a, t, m] : llvm::zip(c.accumulators, acc, mine))
              next.push_back(combineLike(nb, loc, a.combine, t, m));
            nb.create<scf::YieldOp>(loc, next);
          });
      totals = SmallVector<Value>(laneLoop.getResults());
    } else {
      SmallVector<Value> mine = partials(b, lane);
      for (auto [a, m] : llvm::zip(c.accumulators, mine))
        totals.push_back(warpAllReduce(b, loc, a.combine, m));
    }
    auto storeResults = [&] {
      for (auto [a, init, total] : llvm::zip(c.accumulators, inits, totals)) {
        SmallVector<Value> idx = llvm::map_to_vector(
            a.store.getIndices(), [&](Value v) { return map.lookupOrDefault(v); });
        b.create<memref::StoreOp>(loc, combineLike(b, loc, a.combine, init, total),
                                  map.lookupOrDefault(a.store.getMemRef()), idx);
        ++numReductions;
      }
    };
    if (emulateOnHost) {
      storeResults();
      return;
    }
    // Lane 0 alone writes the row's results: a lane that stored init + total
    // before another lane had read init would make that lane add total
    // twice. The __syncwarp after orders the stores before the other lanes'
    // next reads.
    if (!c.accumulators.empty()) {
      Value isFirst = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, lane,
                                              b.create<arith::ConstantIndexOp>(loc, 0));
      auto laneZero = b.create<scf::IfOp>(loc, isFirst, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(laneZero.thenBlock());
      storeResults();
    }
    syncWarp(b, loc);
  }

  static void syncWarp(OpBuilder &b, Location loc) {
    b.create<NVVM::SyncWarpOp>(loc, b.create<arith::ConstantIntOp>(loc, -1, 32));
  }
};

} // namespace
