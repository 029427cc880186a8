//===- ColumnReductions.cpp - unroll-gpu-column-reductions ------------------===//
//
// A reduction over many rows into few outputs (a bias or layer-norm gain
// gradient: Σ over batch and tokens of dY[b, i, j], for j < 64) mapped one
// thread per output is 64 threads that each read thousands of rows in
// turn. This pass writes such reductions as CTA kernels
// (include/unroll/Utils/CtaKernel.h) of 512 threads: 32 outputs per
// CTA, down to 8 where that leaves under 64 CTAs (8 for 256 outputs; one
// CTA for fewer than 8), 512 / outputs-per-CTA groups of threads splitting
// the rows, the partial sums combined in shared memory. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Utils/CtaKernel.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUCOLUMNREDUCTIONS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;

namespace {

constexpr int64_t kThreads = 512;   // per CTA
constexpr int64_t kMaxColumns = 32; // outputs per CTA (one warp's worth)
constexpr int64_t kMinColumns = 8;  // 32 bytes of a row: one memory sector
constexpr int64_t kMinCTAs = 64;    // fewer outputs per CTA until this many CTAs
constexpr int64_t kMaxOutputs = 8192;
constexpr int64_t kMinRows = 256; // static row counts below this stay as they are
constexpr int64_t kUnroll = 4;    // partial sums per thread, for loads in flight

struct ColumnReductions : public unroll::impl::UnrollGPUColumnReductionsBase<ColumnReductions> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> candidates;
    getOperation().walk([&](linalg::GenericOp op) {
      if (matches(op))
        candidates.push_back(op);
    });
    // Reductions next to each other over the same rows (a layer norm's gain
    // and bias gradients) share one kernel.
    SmallVector<SmallVector<linalg::GenericOp>> groups;
    for (linalg::GenericOp op : candidates) {
      if (!groups.empty() && joins(groups.back(), op))
        groups.back().push_back(op);
      else
        groups.push_back({op});
    }
    for (ArrayRef<linalg::GenericOp> group : groups) {
      rewrite(group);
      numRewritten += group.size();
      ++numKernels;
    }
  }

  /// Whether `op` may run in one kernel with `group`: right after its last
  /// op (nothing with memory effects between), the same iteration space
  /// (an input read with the same map over all loops), and outputs that
  /// neither overlap each other nor feed any of the inputs.
  static bool joins(ArrayRef<linalg::GenericOp> group, linalg::GenericOp op) {
    linalg::GenericOp prev = group.back();
    if (prev->getBlock() != op->getBlock())
      return false;
    for (Operation *p = prev->getNextNode(); p != op.getOperation(); p = p->getNextNode())
      if (!p || !isMemoryEffectFree(p))
        return false;
    linalg::GenericOp first = group.front();
    if (first.getIteratorTypesArray() != op.getIteratorTypesArray() ||
        first.getStaticLoopRanges() != op.getStaticLoopRanges())
      return false;
    bool shared = false;
    for (OpOperand *a : first.getDpsInputOperands())
      for (OpOperand *b : op.getDpsInputOperands())
        shared |= a->get() == b->get() && first.getMatchingIndexingMap(a).isPermutation() &&
                  first.getMatchingIndexingMap(a) == op.getMatchingIndexingMap(b);
    if (!shared)
      return false;
    SmallVector<linalg::GenericOp> all(group.begin(), group.end());
    all.push_back(op);
    for (linalg::GenericOp x : all) {
      Value out = x.getDpsInits()[0], root = unroll::viewRoot(out);
      for (linalg::GenericOp y : all) {
        for (Value in : y.getDpsInputs())
          if (unroll::viewRoot(in) == root)
            return false;
        if (x == y)
          continue;
        Value other = y.getDpsInits()[0];
        if (unroll::viewRoot(other) != root)
          continue;
        auto ex = mlir::unroll::staticExtent(out.getType()),
             ey = mlir::unroll::staticExtent(other.getType());
        if (!ex || !ey || !(ex->second < ey->first || ey->second < ex->first))
          return false;
      }
    }
    return true;
  }

  static bool matches(linalg::GenericOp op) {
    if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 ||
        op.getNumReductionLoops() == 0 || op.getNumParallelLoops() == 0 || !unroll::addsToInit(op))
      return false;
    if (!op.getRegion().front().getOps<linalg::IndexOp>().empty())
      return false;
    for (AffineMap m : op.getIndexingMapsArray())
      for (AffineExpr e : m.getResults())
        if (!isa<AffineDimExpr, AffineConstantExpr>(e))
          return false;
    // Few outputs (static), many rows (dynamic or at least kMinRows).
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    auto iters = op.getIteratorTypesArray();
    int64_t outputs = 1, rows = 1;
    bool dynamicRows = false;
    for (auto [size, it] : llvm::zip(ranges, iters)) {
      if (it == utils::IteratorType::parallel) {
        if (ShapedType::isDynamic(size))
          return false;
        outputs *= size;
      } else if (ShapedType::isDynamic(size)) {
        dynamicRows = true;
      } else {
        rows *= size;
      }
    }
    return outputs <= kMaxOutputs && (dynamicRows || rows >= kMinRows);
  }

  /// `linear` split into indices of `sizes`, the last fastest.
  static SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                                        ArrayRef<Value> sizes) {
    SmallVector<Value> ivs(sizes.size());
    for (int k = sizes.size() - 1; k >= 0; --k) {
      ivs[k] = k == 0 ? linear : b.create<arith::RemUIOp>(loc, linear, sizes[k]).getResult();
      if (k > 0)
        linear = b.create<arith::DivUIOp>(loc, linear, sizes[k]);
    }
    return ivs;
  }

  /// The indices `map` gives for the loop indices `ivs`.
  static SmallVector<Value> indices(OpBuilder &b, Location loc, AffineMap map, ValueRange ivs) {
    SmallVector<Value> idx;
    for (AffineExpr e : map.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e))
        idx.push_back(ivs[d.getPosition()]);
      else
        idx.push_back(
            b.create<arith::ConstantIndexOp>(loc, cast<AffineConstantExpr>(e).getValue()));
    }
    return idx;
  }

  /// Outputs per CTA for `outputs` outputs: 32 (a warp reads 32 neighbouring
  /// outputs of a row), halved down to 8 (one 32-byte sector) while that
  /// leaves fewer than kMinCTAs CTAs, since CTAs are what spreads over the
  /// multiprocessors (the paper config's 256 bias-gradient outputs were 8
  /// CTAs, 131 us each on an H200, now 32); fewer than 8 outputs share one CTA
  /// (its read-out bias, one output, was 16 threads, 880 us; now 512).
  static int64_t columnsFor(int64_t outputs) {
    int64_t columns = kMaxColumns;
    while (columns > kMinColumns && (outputs + columns - 1) / columns < kMinCTAs)
      columns /= 2;
    while (columns > 1 && columns / 2 >= outputs)
      columns /= 2;
    return columns;
  }

  void rewrite(ArrayRef<linalg::GenericOp> group) {
    linalg::GenericOp op = group.front();
    Location loc = op.getLoc();
    OpBuilder b(group.back());
    int64_t staticOutputs = 1;
    for (auto [size, it] : llvm::zip(op.getStaticLoopRanges(), op.getIteratorTypesArray()))
      if (it == utils::IteratorType::parallel)
        staticOutputs *= size;
    const int64_t kColumns = columnsFor(staticOutputs), kGroups = kThreads / kColumns;
    cta::KernelBuilder k(b, loc, kThreads);
    int64_t n = group.size();
    Type elem = cast<MemRefType>(op.getDpsInits()[0].getType()).getElementType();
    SmallVector<Range, 4> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(b, loc);
    auto iters = op.getIteratorTypesArray();
    SmallVector<unsigned> parDims, redDims;
    SmallVector<Value> parSizes, redSizes;
    Value outputs = k.idx(1), rows = k.idx(1);
    for (unsigned d = 0; d < iters.size(); ++d) {
      Value size = getValueOrCreateConstantIndexOp(b, loc, ranges[d].size);
      if (iters[d] == utils::IteratorType::parallel) {
        parDims.push_back(d);
        parSizes.push_back(size);
        outputs = b.create<arith::MulIOp>(loc, outputs, size);
      } else {
        redDims.push_back(d);
        redSizes.push_back(size);
        rows = b.create<arith::MulIOp>(loc, rows, size);
      }
    }
    // The loop indices of output `p` and row `r`.
    auto loopIvs = [&](Value p, Value r) {
      SmallVector<Value> ivs(iters.size());
      for (auto [d, v] : llvm::zip(parDims, delinearize(b, loc, p, parSizes)))
        ivs[d] = v;
      if (r)
        for (auto [d, v] : llvm::zip(redDims, delinearize(b, loc, r, redSizes)))
          ivs[d] = v;
      return ivs;
    };
    Value partial = k.shared({n, kGroups, kColumns}, elem);
    Value zero = b.create<arith::ConstantOp>(loc, b.getZeroAttr(elem));
    Value cols = k.idx(kColumns);
    // At least two CTAs: a grid loop of one iteration would be folded into
    // its body by the canonicalizer before unroll-gpu-map-ctas sees it, and
    // the phases would run in one thread (the paper config's read-out bias
    // gradient did: 842 us per call on an H200). A CTA past the outputs
    // reads no rows and writes nothing (both phases check p < outputs).
    Value ctas =
        b.create<arith::MaxUIOp>(loc, b.create<arith::CeilDivUIOp>(loc, outputs, cols), k.idx(2));
    k.grid(ctas, "column_reduction", [&](Value cta) {
      Value first = b.create<arith::MulIOp>(loc, cta, cols);
      // Each thread: its output's rows g, g + groups, ... summed in
      // kUnroll registers taking turns (so that many loads are in flight:
      // one chain of dependent adds over ~80 rows was latency-bound), the
      // rows past a multiple of kUnroll into the first, then added up.
      k.phase([&](Value t) {
        Value c = b.create<arith::RemUIOp>(loc, t, cols);
        Value g = b.create<arith::DivUIOp>(loc, t, cols);
        Value p = b.create<arith::AddIOp>(loc, first, c);
        Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, p, outputs);
        Value last = b.create<arith::SelectOp>(loc, inRange, rows, k.idx(0));
        Value groups = k.idx(kGroups);
        // This thread's row count: ceil((last - g) / groups) where g < last.
        Value any = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, g, last);
        Value mine = b.create<arith::SelectOp>(
            loc, any,
            b.create<arith::CeilDivUIOp>(loc, b.create<arith::SubIOp>(loc, last, g), groups),
            k.idx(0));
        Value full =
            b.create<arith::SubIOp>(loc, mine, b.create<arith::RemUIOp>(loc, mine, k.idx(kUnroll)));
        // acc_j + the row's term, for each reduction j of the group.
        auto addRow = [&](Value m, ValueRange acc) {
          Value r = b.create<arith::AddIOp>(loc, g, b.create<arith::MulIOp>(loc, m, groups));
          SmallVector<Value> ivs = loopIvs(p, r), next;
          for (int64_t j = 0; j < n; ++j) {
            linalg::GenericOp red = group[j];
            SmallVector<AffineMap> maps = red.getIndexingMapsArray();
            Block &body = red.getRegion().front();
            IRMapping map;
            for (auto [i, in] : llvm::enumerate(red.getDpsInputs()))
              map.map(body.getArgument(i),
                      b.create<memref::LoadOp>(loc, in, indices(b, loc, maps[i], ivs)));
            map.map(body.getArguments().back(), acc[j]);
            for (Operation &o : body.without_terminator())
              b.clone(o, map);
            auto yield = cast<linalg::YieldOp>(body.getTerminator());
            next.push_back(map.lookup(yield.getOperand(0)));
          }
          return next;
        };
        auto unrolled = b.create<scf::ForOp>(
            loc, k.idx(0), full, k.idx(kUnroll), SmallVector<Value>(n * kUnroll, zero),
            [&](OpBuilder &, Location, Value m, ValueRange acc) {
              SmallVector<Value> next;
              for (int64_t u = 0; u < kUnroll; ++u)
                llvm::append_range(
                    next, addRow(b.create<arith::AddIOp>(loc, m, k.idx(u)), acc.slice(u * n, n)));
              b.create<scf::YieldOp>(loc, next);
            });
        auto tail =
            b.create<scf::ForOp>(loc, full, mine, k.idx(1), unrolled.getResults().take_front(n),
                                 [&](OpBuilder &, Location, Value m, ValueRange acc) {
                                   b.create<scf::YieldOp>(loc, addRow(m, acc));
                                 });
        for (int64_t j = 0; j < n; ++j) {
          Value sum = tail.getResult(j);
          for (int64_t u = 1; u < kUnroll; ++u)
            sum = b.create<arith::AddFOp>(loc, sum, unrolled.getResult(u * n + j));
          b.create<memref::StoreOp>(loc, sum, partial, ValueRange{k.idx(j), g, c});
        }
      });
      // The first `columns` threads: the output's value plus its partial sums.
      k.phase([&](Value t) {
        Value p = b.create<arith::AddIOp>(loc, first, t);
        Value inRange = b.create<arith::AndIOp>(
            loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, t, cols),
            b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::ult, p, outputs));
        k.when(inRange, [&] {
          SmallVector<Value> ivs = loopIvs(p, Value());
          for (int64_t j = 0; j < n; ++j) {
            linalg::GenericOp red = group[j];
            Value out = red.getDpsInits()[0];
            SmallVector<Value> at = indices(b, loc, red.getIndexingMapsArray().back(), ivs);
            Value init = b.create<memref::LoadOp>(loc, out, at);
            Value sum = k.fold(k.idx(0), k.idx(kGroups), init, [&](Value g, Value acc) {
              Value v = b.create<memref::LoadOp>(loc, partial, ValueRange{k.idx(j), g, t});
              return b.create<arith::AddFOp>(loc, acc, v);
            });
            b.create<memref::StoreOp>(loc, sum, out, at);
          }
        });
      });
    });
    b.create<memref::DeallocOp>(loc, partial);
    for (linalg::GenericOp red : llvm::to_vector(group))
      red.erase();
  }
};

} // namespace
