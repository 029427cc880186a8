//===- GPUKernels.cpp - from bufferized linalg to gpu.launch --------------===//
//
// The three unroll passes of the GPU path (docs/gpu.md):
//
//   unroll-gpu-stage-arguments  entry-point memrefs -> GPU-visible buffers
//   unroll-gpu-prepare-linalg   parallel iterators outermost, reductions
//                               wrapped so they run on the device
//   unroll-gpu-map-loops        each outermost scf.parallel -> one gpu.launch
//                               (or, with emulate-on-host, the same thread
//                               arithmetic as host loops: the CPU oracle)
//
//===----------------------------------------------------------------------===//
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUCHECKTOOLKIT
#define GEN_PASS_DEF_UNROLLGPUSTAGEARGUMENTS
#define GEN_PASS_DEF_UNROLLGPUGROUPALLOCS
#define GEN_PASS_DEF_UNROLLGPUFUSEROWS
#define GEN_PASS_DEF_UNROLLGPUPREPARELINALG
#define GEN_PASS_DEF_UNROLLGPUMAPLOOPS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

//===----------------------------------------------------------------------===//
// unroll-gpu-check-toolkit
//===----------------------------------------------------------------------===//

struct CheckToolkit : public unroll::impl::UnrollGPUCheckToolkitBase<CheckToolkit> {
  using Base::Base;
  void runOnOperation() override {
    if (format != "bin" && format != "isa" && format != "fatbin") {
      getOperation().emitError() << "unknown GPU format '" << format
                                 << "' (expected bin, isa or fatbin)";
      return signalPassFailure();
    }
    llvm::SmallString<256> libdevice(cudaPath), ptxas(cudaPath);
    llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    llvm::sys::path::append(ptxas, "bin", "ptxas");
    auto missing = [&](llvm::StringRef what, llvm::StringRef path) {
      getOperation().emitError()
          << "the GPU lowering needs " << what << " from the CUDA toolkit, but '" << path
          << "' does not exist; point --cuda-path (or $CUDA_HOME) at the toolkit";
      signalPassFailure();
    };
    if (!llvm::sys::fs::exists(libdevice))
      return missing("libdevice (exp, tanh, sqrt in kernels)", libdevice);
    if (format != "isa" && !llvm::sys::fs::exists(ptxas))
      return missing("ptxas (to assemble cubins; --gpu-format=isa embeds PTX instead)", ptxas);
  }
};

//===----------------------------------------------------------------------===//
// unroll-gpu-stage-arguments
//===----------------------------------------------------------------------===//

/// Whether anything may write through `v` or a view of it. Unknown users
/// count as writers.
bool mayBeWritten(Value v) {
  SmallVector<Value> work{v};
  while (!work.empty()) {
    Value cur = work.pop_back_val();
    for (OpOperand &use : cur.getUses()) {
      Operation *user = use.getOwner();
      if (isa<memref::LoadOp, memref::DimOp, memref::ExtractStridedMetadataOp,
              memref::ExtractAlignedPointerAsIndexOp>(user))
        continue;
      if (isa<ViewLikeOpInterface, memref::CastOp, memref::ExpandShapeOp,
              memref::CollapseShapeOp, memref::ReinterpretCastOp>(user)) {
        for (Value r : user->getResults())
          work.push_back(r);
        continue;
      }
      if (auto copy = dyn_cast<memref::CopyOp>(user)) {
        if (use.get() == copy.getTarget())
          return true;
        continue;
      }
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(user)) {
        if (dps.isDpsInit(&use))
          return true;
        continue;
      }
      return true;
    }
  }
  return false;
}

struct StageArguments
    : public unroll::impl::UnrollGPUStageArgumentsBase<StageArguments> {
  static constexpr const char *kResident = "unroll_state_resident";

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto f : module.getOps<func::FuncOp>())
      if (!f.isExternal() && f->hasAttr("llvm.emit_c_interface"))
        entries.push_back(f);
    for (func::FuncOp f : entries)
      if (failed(stage(f)))
        return signalPassFailure();
  }

  /// `int32_t unroll_state_resident(uintptr_t)`, declared once per module.
  func::FuncOp residentFn(Location loc) {
    ModuleOp module = getOperation();
    if (auto f = module.lookupSymbol<func::FuncOp>(kResident))
      return f;
    OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
    auto f = b.create<func::FuncOp>(
        loc, kResident, b.getFunctionType({b.getIndexType()}, {b.getI32Type()}));
    f.setPrivate();
    return f;
  }

  LogicalResult stage(func::FuncOp f) {
    Block &entry = f.getBody().front();
    Location loc = f.getLoc();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    struct Staged {
      Value arg, buf, copied; // copied: i1, true when not resident
      bool written;
    };
    SmallVector<Staged> staged;
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type)
        continue;
      if (!type.getLayout().isIdentity())
        return f.emitOpError() << "argument " << arg.getArgNumber()
                               << " has a strided layout; entry points take dense memrefs";
      bool written = mayBeWritten(arg);
      // %resident = unroll_state_resident(address of %arg)
      // %buf = scf.if %resident { %arg } else { alloc, copy %arg in }
      llvm::SmallPtrSet<Operation *, 8> created;
      auto addr = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, arg);
      auto call = b.create<func::CallOp>(loc, residentFn(loc), ValueRange{addr});
      Value zero = b.create<arith::ConstantIntOp>(loc, 0, 32);
      Value copied = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, call.getResult(0), zero);
      auto choose = b.create<scf::IfOp>(
          loc, copied,
          [&](OpBuilder &tb, Location tl) {
            SmallVector<Value> dynSizes;
            for (int64_t i = 0; i < type.getRank(); ++i)
              if (type.isDynamicDim(i)) {
                auto dim = tb.create<memref::DimOp>(tl, arg, i);
                created.insert(dim);
                dynSizes.push_back(dim);
              }
            auto buf = tb.create<memref::AllocOp>(tl, type, dynSizes, tb.getI64IntegerAttr(64));
            created.insert(tb.create<memref::CopyOp>(tl, arg, buf));
            tb.create<scf::YieldOp>(tl, ValueRange{buf});
          },
          [&](OpBuilder &eb, Location el) {
            created.insert(eb.create<scf::YieldOp>(el, ValueRange{arg}));
          });
      created.insert(addr);
      Value buf = choose.getResult(0);
      arg.replaceUsesWithIf(buf, [&](OpOperand &u) { return !created.contains(u.getOwner()); });
      staged.push_back({arg, buf, copied, written});
      ++numStaged;
    }
    if (staged.empty())
      return success();
    f.walk([&](func::ReturnOp ret) {
      OpBuilder rb(ret);
      for (const Staged &s : staged)
        rb.create<scf::IfOp>(loc, s.copied, [&](OpBuilder &tb, Location tl) {
          if (s.written)
            tb.create<memref::CopyOp>(tl, s.buf, s.arg);
          tb.create<memref::DeallocOp>(tl, s.buf);
          tb.create<scf::YieldOp>(tl);
        });
    });
    for (const Staged &s : staged)
      numWrittenBack += s.written;
    return success();
  }
};

//===----------------------------------------------------------------------===//
// unroll-gpu-prepare-linalg
//===----------------------------------------------------------------------===//

struct PrepareLinalg
    : public unroll::impl::UnrollGPUPrepareLinalgBase<PrepareLinalg> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    // Named ops whose reductions are not innermost become generics first.
    SmallVector<linalg::LinalgOp> named;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (!isa<linalg::GenericOp>(op) && !reductionsInnermost(op))
        named.push_back(op);
    });
    for (linalg::LinalgOp op : named) {
      rewriter.setInsertionPoint(op);
      if (failed(linalg::generalizeNamedOp(rewriter, op))) {
        op.emitOpError("cannot be generalized for the GPU lowering");
        return signalPassFailure();
      }
    }
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) { generics.push_back(op); });
    for (linalg::GenericOp op : generics) {
      if (reductionsInnermost(op))
        continue;
      SmallVector<unsigned> perm;
      auto iters = op.getIteratorTypesArray();
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] == utils::IteratorType::parallel)
          perm.push_back(i);
      for (unsigned i = 0; i < iters.size(); ++i)
        if (iters[i] != utils::IteratorType::parallel)
          perm.push_back(i);
      rewriter.setInsertionPoint(op);
      if (failed(linalg::interchangeGenericOp(rewriter, op, perm))) {
        op.emitOpError("cannot be interchanged for the GPU lowering");
        return signalPassFailure();
      }
      ++numInterchanged;
    }
    // A linalg op without parallel loops would become host loops over device
    // memory: give it a one-iteration parallel loop (one device thread).
    SmallVector<linalg::LinalgOp> reductions;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.getNumParallelLoops() == 0)
        reductions.push_back(op);
    });
    for (linalg::LinalgOp op : reductions) {
      OpBuilder b(op);
      Location loc = op.getLoc();
      Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
      Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
      auto par = b.create<scf::ParallelOp>(loc, ValueRange{c0}, ValueRange{c1}, ValueRange{c1});
      op->moveBefore(par.getBody()->getTerminator());
      ++numWrapped;
    }
  }

  static bool reductionsInnermost(linalg::LinalgOp op) {
    bool seenReduction = false;
    for (utils::IteratorType t : op.getIteratorTypesArray()) {
      if (t != utils::IteratorType::parallel)
        seenReduction = true;
      else if (seenReduction)
        return false;
    }
    return true;
  }
};

//===----------------------------------------------------------------------===//
// unroll-gpu-group-allocs
//===----------------------------------------------------------------------===//

/// A dealloc, or an `scf.if` that only deallocates (ownership-based
/// deallocation's conditional frees).
bool isDealloc(Operation *op) {
  if (isa<memref::DeallocOp>(op))
    return true;
  auto ifOp = dyn_cast<scf::IfOp>(op);
  if (!ifOp || ifOp.getNumResults() != 0)
    return false;
  bool only = true;
  ifOp->walk([&](Operation *inner) {
    if (inner != ifOp && !isa<memref::DeallocOp, scf::YieldOp>(inner))
      only = false;
  });
  return only;
}

/// The size `memref.dim %v, i` stands for, looked up through casts,
/// reshapes and the allocation (null when it cannot be seen). Loop bounds
/// written as dims of different views of one buffer become the same value,
/// which parallel-loop fusion requires.
Value sizeOf(OpBuilder &b, Value v, int64_t i) {
  while (true) {
    auto type = cast<MemRefType>(v.getType());
    if (!type.isDynamicDim(i))
      return b.create<arith::ConstantIndexOp>(v.getLoc(), type.getDimSize(i));
    if (auto alloc = v.getDefiningOp<memref::AllocOp>())
      return alloc.getDynamicSizes()[type.getDynamicDimIndex(i)];
    if (auto ex = v.getDefiningOp<memref::ExpandShapeOp>()) {
      // output_shape lists the dynamic sizes in order
      return ex.getOutputShape()[type.getDynamicDimIndex(i)];
    }
    if (auto co = v.getDefiningOp<memref::CollapseShapeOp>()) {
      ReassociationIndices group = co.getReassociationIndices()[i];
      if (group.size() != 1)
        return nullptr;
      v = co.getSrc();
      i = group[0];
      continue;
    }
    if (auto c = v.getDefiningOp<memref::CastOp>()) {
      v = c.getSource();
      continue;
    }
    return nullptr;
  }
}

struct GroupAllocs : public unroll::impl::UnrollGPUGroupAllocsBase<GroupAllocs> {
  void runOnOperation() override {
    SmallVector<memref::DimOp> dims;
    getOperation().walk([&](memref::DimOp d) { dims.push_back(d); });
    for (memref::DimOp d : dims) {
      std::optional<int64_t> i = d.getConstantIndex();
      if (!i)
        continue;
      OpBuilder b(d);
      Value size = sizeOf(b, d.getSource(), *i);
      if (size && size != d.getResult() &&
          (!size.getDefiningOp() || size.getParentRegion()->isAncestor(d->getParentRegion()))) {
        d.replaceAllUsesWith(size);
        d.erase();
      }
    }
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *block : blocks) {
      if (block->empty() || !block->back().hasTrait<OpTrait::IsTerminator>())
        continue;
      Operation *term = &block->back();
      SmallVector<Operation *> allocs, deallocs;
      for (Operation &op : *block) {
        if (isa<memref::AllocOp>(op))
          allocs.push_back(&op);
        else if (&op != term && isDealloc(&op))
          deallocs.push_back(&op);
      }
      for (Operation *op : deallocs) { // keeps their order
        op->moveBefore(term);
        ++numSunk;
      }
      // Last first, so allocations that land at the same place keep their order.
      for (Operation *op : llvm::reverse(allocs)) {
        // After the last operand defined in this block, else at its start.
        Operation *after = nullptr;
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && def->getBlock() == block && (!after || after->isBeforeInBlock(def)))
            after = def;
        Operation *first = after ? after->getNextNode() : &block->front();
        if (first == op)
          continue;
        if (after)
          op->moveAfter(after);
        else
          op->moveBefore(&block->front());
        ++numHoisted;
      }
    }
  }
};

//===----------------------------------------------------------------------===//
// unroll-gpu-fuse-rows
//===----------------------------------------------------------------------===//

/// The buffer a view is taken of.
Value rootBuffer(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      v = view.getViewSource();
    else if (auto c = dyn_cast<memref::CastOp>(def))
      v = c.getSource();
    else
      break;
  }
  return v;
}

struct Access {
  Value memref;
  ValueRange indices;
  bool write;
};

/// Every load and store inside `p`; false if the body touches memory any
/// other way (calls, copies, nested linalg ops).
bool collectAccesses(scf::ParallelOp p, SmallVector<Access> &out) {
  bool ok = true;
  p.getBody()->walk([&](Operation *op) {
    if (auto ld = dyn_cast<memref::LoadOp>(op))
      out.push_back({ld.getMemRef(), ld.getIndices(), false});
    else if (auto st = dyn_cast<memref::StoreOp>(op))
      out.push_back({st.getMemRef(), st.getIndices(), true});
    else if (!isMemoryEffectFree(op) && !isa<scf::ForOp, scf::IfOp, scf::YieldOp, scf::ReduceOp>(op))
      ok = false;
  });
  return ok;
}

struct FuseRows : public unroll::impl::UnrollGPUFuseRowsBase<FuseRows> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *b) { blocks.push_back(b); });
    for (Block *block : blocks) {
      bool changed = true;
      while (changed) {
        changed = false;
        for (Operation &op : *block) {
          auto a = dyn_cast<scf::ParallelOp>(op);
          if (!a)
            continue;
          scf::ParallelOp b = nextNest(a);
          if (b && succeeded(fuse(a, b))) {
            ++numFused;
            changed = true;
            break;
          }
        }
      }
    }
  }

  /// The next scf.parallel after `a` if only side-effect-free ops lie between.
  static scf::ParallelOp nextNest(scf::ParallelOp a) {
    for (Operation *op = a->getNextNode(); op; op = op->getNextNode()) {
      if (auto p = dyn_cast<scf::ParallelOp>(op))
        return p;
      if (!isMemoryEffectFree(op))
        return nullptr;
    }
    return nullptr;
  }

  /// Whether `p` is elementwise: no loops inside.
  static bool elementwise(scf::ParallelOp p) {
    bool loops = false;
    p.getBody()->walk([&](Operation *op) {
      if (isa<LoopLikeOpInterface>(op))
        loops = true;
    });
    return !loops;
  }

  LogicalResult fuse(scf::ParallelOp a, scf::ParallelOp b) {
    if (!a.getInitVals().empty() || !b.getInitVals().empty())
      return failure();
    // Equal spaces too: scf-parallel-loop-fusion refuses two row nests whose
    // inner loops touch the same buffer (its index check sees different
    // loop variables), e.g. a softmax's exp and its row sum.
    size_t na = a.getNumLoops(), nb = b.getNumLoops();
    scf::ParallelOp rows = na <= nb ? a : b, wide = na <= nb ? b : a;
    size_t k = rows.getNumLoops();
    if (na != nb && !elementwise(wide))
      return failure();
    for (size_t i = 0; i < k; ++i)
      if (rows.getLowerBound()[i] != wide.getLowerBound()[i] ||
          rows.getUpperBound()[i] != wide.getUpperBound()[i] ||
          rows.getStep()[i] != wide.getStep()[i])
        return failure();
    // Row-local dependences only.
    SmallVector<Access> accA, accB;
    if (!collectAccesses(a, accA) || !collectAccesses(b, accB))
      return failure();
    auto rowsFirst = [&](const Access &x, scf::ParallelOp p) {
      if (x.indices.size() < k)
        return false;
      for (size_t i = 0; i < k; ++i)
        if (x.indices[i] != p.getInductionVars()[i])
          return false;
      return true;
    };
    for (const Access &x : accA)
      for (const Access &y : accB) {
        if (!x.write && !y.write)
          continue;
        if (rootBuffer(x.memref) != rootBuffer(y.memref))
          continue;
        if (x.memref != y.memref || !rowsFirst(x, a) || !rowsFirst(y, b))
          return failure();
      }
    // One nest over the rows: a's part, then b's; the wide body loops over
    // its remaining dimensions.
    OpBuilder builder(b);
    Location loc = b.getLoc();
    builder.create<scf::ParallelOp>(
        loc, rows.getLowerBound(), rows.getUpperBound(), rows.getStep(),
        [&](OpBuilder &pb, Location pl, ValueRange ivs) {
          for (scf::ParallelOp part : {a, b}) {
            IRMapping map;
            map.map(ValueRange(part.getInductionVars()).take_front(k), ivs);
            auto clone = [&](OpBuilder &cb) {
              for (Operation &op : part.getBody()->without_terminator())
                cb.clone(op, map);
            };
            if (part.getNumLoops() == k) {
              clone(pb);
              continue;
            }
            scf::buildLoopNest(pb, pl, part.getLowerBound().drop_front(k),
                               part.getUpperBound().drop_front(k), part.getStep().drop_front(k),
                               [&](OpBuilder &lb, Location, ValueRange inner) {
                                 map.map(ValueRange(part.getInductionVars()).drop_front(k), inner);
                                 clone(lb);
                               });
          }
        });
    a.erase();
    b.erase();
    return success();
  }
};

//===----------------------------------------------------------------------===//
// unroll-gpu-map-loops
//===----------------------------------------------------------------------===//

/// Replaces `par` by a serial loop nest with the same body.
void serialize(scf::ParallelOp par) {
  OpBuilder b(par);
  Block *body = par.getBody();
  scf::buildLoopNest(b, par.getLoc(), par.getLowerBound(), par.getUpperBound(),
                     par.getStep(), [&](OpBuilder &nb, Location, ValueRange ivs) {
                       IRMapping map;
                       map.map(par.getInductionVars(), ivs);
                       for (Operation &op : body->without_terminator())
                         nb.clone(op, map);
                     });
  par.erase();
}

struct MapLoops : public unroll::impl::UnrollGPUMapLoopsBase<MapLoops> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1 || blockSize > 1024) {
      getOperation().emitError() << "unroll-gpu-map-loops: block-size must be "
                                    "in 1..1024, got " << blockSize;
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp p) {
      if (!p->getParentOfType<scf::ParallelOp>())
        outermost.push_back(p);
    });
    for (scf::ParallelOp p : outermost) {
      if (!p.getInitVals().empty()) {
        p.emitOpError("with reductions is not supported by the GPU lowering");
        return signalPassFailure();
      }
      mapLoop(p);
      ++numKernels;
    }
  }

  static bool isConstant(Value v, int64_t c) {
    auto k = v.getDefiningOp<arith::ConstantIndexOp>();
    return k && k.value() == c;
  }

  /// n = ceil((ub - lb) / step), folded for the common lb = 0, step = 1.
  static Value tripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
    Value span = isConstant(lb, 0) ? ub : b.create<arith::SubIOp>(loc, ub, lb).getResult();
    if (isConstant(step, 1))
      return span;
    return b.create<arith::CeilDivSIOp>(loc, span, step);
  }

  void mapLoop(scf::ParallelOp p) {
    Location loc = p.getLoc();
    OpBuilder b(p);
    SmallVector<Value> counts;
    Value total;
    for (auto [lb, ub, step] :
         llvm::zip(p.getLowerBound(), p.getUpperBound(), p.getStep())) {
      counts.push_back(tripCount(b, loc, lb, ub, step));
      total = total ? b.create<arith::MulIOp>(loc, total, counts.back()).getResult()
                    : counts.back();
    }
    Value c0 = b.create<arith::ConstantIndexOp>(loc, 0);
    Value c1 = b.create<arith::ConstantIndexOp>(loc, 1);
    Value bs = b.create<arith::ConstantIndexOp>(loc, blockSize);
    Value blocks = b.create<arith::CeilDivSIOp>(loc, total, bs);
    Value nonEmpty = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sgt, total, c0);
    auto ifNonEmpty = b.create<scf::IfOp>(loc, nonEmpty, /*withElse=*/false);
    b.setInsertionPointToStart(&ifNonEmpty.getThenRegion().front());

    // The thread's linear index, from a launch or (emulated) from two loops.
    Value linear;
    Operation *threadScope;
    if (emulateOnHost) {
      auto blockLoop = b.create<scf::ForOp>(loc, c0, blocks, c1);
      b.setInsertionPointToStart(blockLoop.getBody());
      auto threadLoop = b.create<scf::ForOp>(loc, c0, bs, c1);
      b.setInsertionPointToStart(threadLoop.getBody());
      linear = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, blockLoop.getInductionVar(), bs),
          threadLoop.getInductionVar());
      threadScope = blockLoop;
    } else {
      auto launch = b.create<gpu::LaunchOp>(loc, blocks, c1, c1, bs, c1, c1);
      Block &body = launch.getBody().front();
      b.setInsertionPointToEnd(&body);
      auto term = b.create<gpu::TerminatorOp>(loc);
      b.setInsertionPoint(term);
      linear = b.create<arith::AddIOp>(
          loc, b.create<arith::MulIOp>(loc, launch.getBlockIds().x, bs),
          launch.getThreadIds().x);
      threadScope = launch;
    }
    Value inRange = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, linear, total);
    auto guard = b.create<scf::IfOp>(loc, inRange, /*withElse=*/false);
    b.setInsertionPointToStart(&guard.getThenRegion().front());

    // Delinearize, last dimension fastest: neighbouring threads touch
    // neighbouring elements of row-major buffers.
    unsigned rank = counts.size();
    SmallVector<Value> ivs(rank);
    Value rest = linear;
    for (int k = rank - 1; k >= 0; --k) {
      Value idx = k == 0 ? rest : b.create<arith::RemSIOp>(loc, rest, counts[k]).getResult();
      if (k > 0)
        rest = b.create<arith::DivSIOp>(loc, rest, counts[k]);
      Value lb = p.getLowerBound()[k], step = p.getStep()[k];
      Value iv = isConstant(step, 1) ? idx : b.create<arith::MulIOp>(loc, idx, step).getResult();
      if (!isConstant(lb, 0))
        iv = b.create<arith::AddIOp>(loc, lb, iv);
      ivs[k] = iv;
    }
    IRMapping map;
    map.map(p.getInductionVars(), ivs);
    for (Operation &op : p.getBody()->without_terminator())
      b.clone(op, map);
    p.erase();

    // Anything still parallel inside runs serially in its thread.
    while (true) {
      scf::ParallelOp nested;
      threadScope->walk([&](scf::ParallelOp q) {
        nested = q;
        return WalkResult::interrupt();
      });
      if (!nested)
        break;
      serialize(nested);
    }
  }
};

} // namespace
