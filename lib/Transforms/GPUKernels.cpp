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
  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.isExternal() || !f->hasAttr("llvm.emit_c_interface"))
      return;
    Block &entry = f.getBody().front();
    Location loc = f.getLoc();
    OpBuilder b = OpBuilder::atBlockBegin(&entry);
    struct Staged {
      Value arg, buf;
      bool written;
    };
    SmallVector<Staged> staged;
    for (BlockArgument arg : entry.getArguments()) {
      auto type = dyn_cast<MemRefType>(arg.getType());
      if (!type)
        continue;
      if (!type.getLayout().isIdentity()) {
        f.emitOpError() << "argument " << arg.getArgNumber()
                        << " has a strided layout; entry points take dense memrefs";
        return signalPassFailure();
      }
      bool written = mayBeWritten(arg);
      llvm::SmallPtrSet<Operation *, 4> created;
      SmallVector<Value> dynSizes;
      for (int64_t i = 0; i < type.getRank(); ++i)
        if (type.isDynamicDim(i)) {
          auto dim = b.create<memref::DimOp>(loc, arg, i);
          created.insert(dim);
          dynSizes.push_back(dim);
        }
      auto buf = b.create<memref::AllocOp>(loc, type, dynSizes, b.getI64IntegerAttr(64));
      auto copy = b.create<memref::CopyOp>(loc, arg, buf);
      created.insert(copy);
      arg.replaceUsesWithIf(buf, [&](OpOperand &u) { return !created.contains(u.getOwner()); });
      staged.push_back({arg, buf, written});
      ++numStaged;
    }
    if (staged.empty())
      return;
    f.walk([&](func::ReturnOp ret) {
      OpBuilder rb(ret);
      for (const Staged &s : staged) {
        if (s.written)
          rb.create<memref::CopyOp>(loc, s.buf, s.arg);
        rb.create<memref::DeallocOp>(loc, s.buf);
      }
    });
    for (const Staged &s : staged)
      numWrittenBack += s.written;
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
