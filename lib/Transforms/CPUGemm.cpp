//===- CPUGemm.cpp - contractions to the packed GEMM micro-kernel ---------===//
//
// unroll-cpu-gemm: on bufferized IR, every linalg contraction
//
//   C[m..., n...] += Σ_k... A[.. m.., .. k..] · B[.. k.., .. n..]
//
// (a generic whose body is acc + a·b, or a named matmul) whose m, n and k
// index groups are each contiguous in every dense operand becomes one call
//
//   unroll_gemm_ex_<f32|f64>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc,
//                            flags, bias, D)
//
// (declared in runtime/include/unroll/runtime/CpuKernels.h)
// (acc = 0 when the contraction's output was zero-filled just before: the
// fill is dropped and the kernel overwrites),
// of the packed, register-tiled kernel in runtime/cpu/Gemm.cpp, which
// unroll-translate links into the library. This covers the linear layers
// of the looped transformer and their three gradients (x Wᵀ, dy W, dyᵀ x with
// the batch and token dimensions collapsed into one), and the matmuls of the
// energies. Contractions with batch dimensions (attention's per-(b, h)
// products and their gradients) become a loop of calls. Everything else keeps
// its loop nest.
//
// Epilogues (flags, GemmFlags.h) fold what surrounds a linear layer into
// its call: the broadcast of its bias into C before the product, a GELU of
// C after it (into D; C keeps the pre-activation the backward reads) and
// the GELU gradient applied to the product that forms it. The kernel applies
// them to each block of C as it completes.
//
// Where nothing reads the pre-activation after the GELU (the forward, and a
// training step's iterations before its loss window), the GELU first
// becomes in place: its output buffer takes the place of its input's, and
// the call's C and D are the same buffer (the kernel then stores GELU(C)
// over C; measured 0.97-0.985x of the product on an Intel Xeon, from one
// buffer written instead of two).
//
// The pass also drops zero fills whose buffer the next op overwrites without
// reading (elementwise ops' outputs).
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Utils/Markers.h"
#include "unroll/Transforms/Passes.h"
#include "unroll/runtime/CpuKernels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"

#include "llvm/ADT/SmallBitVector.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLCPUGEMM
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct CPUGemm : public mlir::unroll::impl::UnrollCPUGemmBase<CPUGemm> {
  void runOnOperation() override {
    mlir::unroll::generalizeMatmuls(getOperation());
    SmallVector<linalg::GenericOp> gelus;
    getOperation().walk([&](linalg::GenericOp g) {
      if (g->hasAttr(mlir::unroll::kGeluAttr))
        gelus.push_back(g);
    });
    for (linalg::GenericOp g : gelus)
      if (succeeded(geluInPlace(g)))
        ++numInPlaceGelus;
    // Fills that the next op overwrites without reading are dead. First:
    // the GELU after a product is then next to it, for the epilogue.
    SmallVector<linalg::FillOp> fills;
    getOperation().walk([&](linalg::FillOp f) { fills.push_back(f); });
    for (linalg::FillOp f : fills)
      if (overwrittenNext(f)) {
        f.erase();
        ++numDeadFills;
      }
    // The candidates, collected first: a rewrite may erase the GELU or GELU
    // gradient op after its contraction (never another contraction).
    SmallVector<linalg::GenericOp> generics;
    getOperation().walk([&](linalg::GenericOp op) {
      if (op.getNumDpsInputs() == 2 && mlir::unroll::isMulAdd(op))
        generics.push_back(op);
    });
    for (linalg::GenericOp op : generics) {
      if (mlir::unroll::forwardProductIntoSum(op))
        ++numResidualSums;
      if (succeeded(rewrite(op)))
        ++numCalls;
    }
  }

  /// GELU y = GELU(x) with x and y fresh buffers of one type, x read by
  /// nothing after the GELU (its users before it in its block: what writes
  /// the pre-activation, such as the product and its bias broadcast) and y
  /// by nothing before it: y's allocation moves to x's, and y replaces x,
  /// so that the GELU writes over its input (an elementwise op with
  /// identity maps may) and the product before it writes y.
  static LogicalResult geluInPlace(linalg::GenericOp g) {
    if (!g.hasPureBufferSemantics() || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
        g.getNumReductionLoops() != 0 ||
        !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
      return failure();
    Value x = g.getDpsInputs()[0], y = g.getDpsInits()[0];
    auto xAlloc = x.getDefiningOp<memref::AllocOp>();
    auto yAlloc = y.getDefiningOp<memref::AllocOp>();
    if (!xAlloc || !yAlloc || x == y || x.getType() != y.getType() ||
        xAlloc->getBlock() != g->getBlock() || yAlloc->getBlock() != g->getBlock() ||
        yAlloc->isBeforeInBlock(xAlloc))
      return failure();
    SmallVector<Operation *> xDeallocs;
    for (Operation *user : x.getUsers()) {
      if (isa<memref::DeallocOp>(user)) {
        xDeallocs.push_back(user);
        continue;
      }
      if (user != g.getOperation() &&
          (user->getBlock() != g->getBlock() || !user->isBeforeInBlock(g)))
        return failure();
    }
    for (Operation *user : y.getUsers())
      if (user != g.getOperation() && !isa<memref::DeallocOp>(user) &&
          (user->getBlock() != g->getBlock() || user->isBeforeInBlock(g)))
        return failure();
    // y's sizes are defined before x's allocation (an op before it in the
    // block, a block argument, or a value from an enclosing region).
    for (Value size : yAlloc->getOperands())
      if (Operation *def = size.getDefiningOp();
          def && def->getBlock() == xAlloc->getBlock() && !def->isBeforeInBlock(xAlloc))
        return failure();
    yAlloc->moveBefore(xAlloc);
    for (Operation *d : xDeallocs)
      d->erase();
    x.replaceAllUsesWith(y);
    xAlloc->erase();
    return success();
  }

  /// The op right after `fill` writes every element of the filled buffer and
  /// reads none: an all-parallel generic whose payload ignores its output
  /// argument and whose output map is a permutation (so it covers the
  /// buffer). Bufferization leaves such fills behind for the zero-initialized
  /// outputs of elementwise ops.
  static bool overwrittenNext(linalg::FillOp fill) {
    if (!fill.hasPureBufferSemantics())
      return false;
    // Skip ops without memory effects (index arithmetic, dims, views).
    Operation *op = fill->getNextNode();
    while (op && isMemoryEffectFree(op) && op->getNumRegions() == 0)
      op = op->getNextNode();
    auto next = dyn_cast_or_null<linalg::GenericOp>(op);
    Value buf = fill.getDpsInits()[0];
    if (!next || !next.hasPureBufferSemantics() || next.getNumDpsInits() != 1 ||
        next.getDpsInits()[0] != buf || next.getNumReductionLoops() != 0 ||
        llvm::is_contained(next.getDpsInputs(), buf))
      return false;
    OpOperand *init = next.getDpsInitOperand(0);
    if (next.payloadUsesValueFromOperand(init))
      return false;
    AffineMap outMap = next.getMatchingIndexingMap(init);
    return outMap.isPermutation();
  }

  LogicalResult rewrite(linalg::GenericOp op) {
    mlir::unroll::ContractionCall call;
    call.name = [](bool f32) { return std::string(::unroll::abi::gemmExName(f32)); };
    call.numArgs = ::unroll::abi::kGemmExArgs;
    call.extraArgs = {0}; // the flags (the epilogues below add theirs)
    call.batchLoops = true;
    // The epilogues on the output tile: a bias broadcast into C before the
    // product, the MLP's GELU after it (C keeps the pre-activation for the
    // backward, D gets GELU(C)), and GELU's gradient of a product (C =
    // GELU'(x) ∘ A·B) are not passes of their own.
    call.biasArg = true;
    call.biasFlag = UNROLL_GEMM_BIAS;
    call.epilogueArg = true;
    call.geluFlag = UNROLL_GEMM_GELU_AUX;
    call.dgeluFlag = UNROLL_GEMM_DGELU;
    // A residual sum after the product (r = x + (A·B + b)): the call
    // writes r, adding x to each block of it as it completes.
    call.addFlag = UNROLL_GEMM_ADD_D;
    // The bias gradient after a weight gradient (db += Σ dy after dW +=
    // dyᵀ·x): summed while the call packs dy.
    call.rowSumFlag = UNROLL_GEMM_ROWSUM_A;
    return mlir::unroll::rewriteContraction(op, call);
  }
};

} // namespace
