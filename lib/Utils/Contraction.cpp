//===- Contraction.cpp - linalg contractions as calls of a GEMM ABI -------===//
//
// The matcher and call emission shared by unroll-cpu-gemm (the packed CPU
// kernel) and unroll-gpu-gemm (cuBLASLt): every linalg contraction
//
//   C[m..., n...] += Σ_k... A[.. m.., .. k..] · B[.. k.., .. n..]
//
// (a generic whose body is acc + a·b, or a named matmul) whose m, n and k
// index groups are each contiguous in every dense operand becomes one call
//
//   <name>(M, N, K, A, sAm, sAk, B, sBk, sBn, C, sCm, sCn, acc, extra...)
//
// (acc = 0 when the contraction's output was zero-filled just before: the
// fill is dropped and the callee overwrites). Groups of several dims collapse
// to one stride where the operand is dense over them (checked when the call
// runs, with the loop nest as the fallback). Contractions with batch
// dimensions become a loop of calls, or stay loop nests.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/Contraction.h"
#include "unroll/Utils/Markers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;

void mlir::unroll::generalizeMatmuls(Operation *root) {
  IRRewriter rewriter(root->getContext());
  SmallVector<linalg::LinalgOp> named;
  root->walk([&](linalg::LinalgOp op) {
    if (isa<linalg::MatmulOp, linalg::MatmulTransposeAOp, linalg::MatmulTransposeBOp>(op))
      named.push_back(op);
  });
  for (linalg::LinalgOp op : named) {
    rewriter.setInsertionPoint(op);
    (void)linalg::generalizeNamedOp(rewriter, op);
  }
}

bool mlir::unroll::isMulAdd(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getNumArguments() != 3 || body.getOperations().size() != 3)
    return false;
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value acc = body.getArgument(2);
  Value other = add.getLhs() == acc ? add.getRhs() : add.getRhs() == acc ? add.getLhs() : Value();
  auto mul = other ? other.getDefiningOp<arith::MulFOp>() : nullptr;
  if (!mul)
    return false;
  Value a = body.getArgument(0), b = body.getArgument(1);
  return (mul.getLhs() == a && mul.getRhs() == b) || (mul.getLhs() == b && mul.getRhs() == a);
}

namespace {

/// Positions (in an operand's indexing map) of the loop dims of `group`, in
/// the operand's order; empty if they are not consecutive there.
SmallVector<unsigned> groupPositions(AffineMap map, ArrayRef<unsigned> group) {
  SmallVector<unsigned> pos;
  for (unsigned r = 0; r < map.getNumResults(); ++r) {
    auto d = dyn_cast<AffineDimExpr>(map.getResult(r));
    if (d && llvm::is_contained(group, d.getPosition()))
      pos.push_back(r);
  }
  for (unsigned i = 1; i < pos.size(); ++i)
    if (pos[i] != pos[i - 1] + 1)
      return {};
  return pos;
}

/// The loop dims at `pos` of an operand's map, in that order.
SmallVector<unsigned> dimsAt(AffineMap map, ArrayRef<unsigned> pos) {
  SmallVector<unsigned> dims;
  for (unsigned p : pos)
    dims.push_back(cast<AffineDimExpr>(map.getResult(p)).getPosition());
  return dims;
}

} // namespace

Value mlir::unroll::viewRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      v = view.getViewSource();
    else if (auto cast = dyn_cast<memref::CastOp>(def))
      v = cast.getSource();
    else
      break;
  }
  return v;
}

/// Whether `op` may read or write a buffer whose root is one of `roots`
/// (anything with regions, calls and unknown ops count as touching).
static bool touches(Operation *op, ArrayRef<Value> roots) {
  using mlir::unroll::viewRoot;
  if (op->getNumRegions() > 0 && !isa<linalg::LinalgOp>(op))
    return true;
  if (isa<func::CallOp>(op))
    return true;
  if (isMemoryEffectFree(op))
    return false;
  for (Value v : op->getOperands())
    if (isa<MemRefType>(v.getType()) && llvm::is_contained(roots, viewRoot(v)))
      return true;
  return !isa<linalg::LinalgOp, memref::AllocOp, memref::DeallocOp>(op);
}

/// The broadcast `target[..., j] = bias[j]` of a rank-1, unit-stride bias
/// into all of `target` (a view of `root`), found walking back from `op`
/// past operations that touch neither buffer; null if there is none.
static linalg::GenericOp findBiasBroadcast(Operation *op, Value target, Value root) {
  for (Operation *p = op->getPrevNode(); p; p = p->getPrevNode()) {
    auto g = dyn_cast<linalg::GenericOp>(p);
    if (g && g.hasPureBufferSemantics() && g.getNumDpsInputs() == 1 && g.getNumDpsInits() == 1 &&
        g.getDpsInits()[0] == target && g.getNumReductionLoops() == 0) {
      Block &body = g.getRegion().front();
      auto yield = cast<linalg::YieldOp>(body.getTerminator());
      AffineMap in = g.getIndexingMapsArray()[0], out = g.getIndexingMapsArray()[1];
      auto bias = dyn_cast<MemRefType>(g.getDpsInputs()[0].getType());
      SmallVector<int64_t> st;
      int64_t off;
      bool ok = body.getOperations().size() == 1 && yield.getOperand(0) == body.getArgument(0) &&
                out.isIdentity() && in.getNumResults() == 1 &&
                in.getResult(0) == getAffineDimExpr(out.getNumDims() - 1, op->getContext()) &&
                bias && bias.getRank() == 1 && succeeded(getStridesAndOffset(bias, st, off)) &&
                st[0] == 1;
      if (ok && !llvm::any_of(llvm::make_range(std::next(p->getIterator()), op->getIterator()),
                              [&](Operation &between) {
                                return touches(&between, {unroll::viewRoot(g.getDpsInputs()[0])});
                              }))
        return g;
      return {};
    }
    if (touches(p, {root}))
      return {};
  }
  return {};
}

/// Whether `v` is defined before `op` (or outside op's block).
static bool definedBefore(Value v, Operation *op) {
  Operation *def = v.getDefiningOp();
  return !def || def->getBlock() != op->getBlock() || def->isBeforeInBlock(op);
}

/// The first operation after `op` that touches memory, past operations
/// without memory effects and allocations of sizes defined before `op`
/// (collected in `allocs`); null if there is none or an allocation's sizes
/// come later.
static Operation *nextMemoryOp(Operation *op, SmallVectorImpl<Operation *> *allocs = nullptr) {
  for (Operation *p = op->getNextNode(); p; p = p->getNextNode()) {
    if (isa<memref::AllocOp>(p)) {
      if (!llvm::all_of(p->getOperands(), [&](Value v) { return definedBefore(v, op); }))
        return nullptr;
      if (allocs)
        allocs->push_back(p);
      continue;
    }
    if (!isMemoryEffectFree(p))
      return p;
  }
  return nullptr;
}

/// The GELU (an op marked unroll.gelu) of all of `c` into a buffer of c's
/// type, the first op after `op` that touches memory, past allocations of
/// sizes defined before `op` (one of them may be its output); null if none.
static linalg::GenericOp findGelu(Operation *op, Value c) {
  SmallVector<Operation *> allocs;
  auto g = dyn_cast_or_null<linalg::GenericOp>(nextMemoryOp(op, &allocs));
  if (!g || !g->hasAttr(unroll::kGeluAttr) || !g.hasPureBufferSemantics() ||
      g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 || g.getDpsInputs()[0] != c ||
      g.getDpsInits()[0].getType() != c.getType() || g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Value d = g.getDpsInits()[0];
  if (!definedBefore(d, op) && !llvm::is_contained(allocs, d.getDefiningOp()))
    return {};
  return g;
}

bool mlir::unroll::addsToInit(linalg::GenericOp op) {
  if (op.getNumDpsInits() != 1)
    return false;
  Block &body = op.getRegion().front();
  BlockArgument out = body.getArguments().back();
  auto add =
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0).getDefiningOp<arith::AddFOp>();
  return add && add->getBlock() == &body && out.hasOneUse() &&
         (add.getLhs() == out || add.getRhs() == out);
}

bool mlir::unroll::isZeroFill(linalg::FillOp fill) {
  auto zero = fill ? fill.getInputs()[0].getDefiningOp<arith::ConstantOp>() : nullptr;
  auto fv = zero ? dyn_cast<FloatAttr>(zero.getValue()) : nullptr;
  return fv && fv.getValue().isZero();
}

/// Whether `fill` fills all of the buffer `c` with zeros.
static bool isZeroFillOf(linalg::FillOp fill, Value c) {
  return unroll::isZeroFill(fill) && fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == c;
}

/// The GELU gradient (marked unroll.gelu_vjp) dx = dy·GELU'(x) with dy all
/// of `c`, a fresh buffer nothing else uses, x and dx of c's type: the
/// first such op after `op` in its block. In between, only allocations of
/// sizes defined before `op` (one may be dx's), operations without memory
/// effects, and linalg operations that neither touch c nor write x's or
/// dx's buffers. Null if there is none.
static linalg::GenericOp findGeluGrad(Operation *op, Value c) {
  auto cAlloc = c.getDefiningOp<memref::AllocOp>();
  if (!cAlloc)
    return {};
  linalg::GenericOp g;
  for (Operation *p = op->getNextNode(); p && !g; p = p->getNextNode()) {
    auto cand = dyn_cast<linalg::GenericOp>(p);
    if (cand && cand->hasAttr(unroll::kGeluVJPAttr) && cand.getNumDpsInputs() == 2 &&
        cand.getDpsInputs()[1] == c)
      g = cand;
  }
  // x may be a slice of the tape (a strided layout): its strides are
  // compared with C's when the call runs.
  auto xType = g ? dyn_cast<MemRefType>(g.getDpsInputs()[0].getType()) : MemRefType();
  auto cType = cast<MemRefType>(c.getType());
  if (!g || !g.hasPureBufferSemantics() || g.getNumDpsInits() != 1 || !xType ||
      xType.getShape() != cType.getShape() || xType.getElementType() != cType.getElementType() ||
      g.getDpsInits()[0].getType() != c.getType() ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Value x = g.getDpsInputs()[0], dx = g.getDpsInits()[0];
  if (!definedBefore(x, op))
    return {};
  for (Operation *user : c.getUsers()) // (the zero fill before op goes with it)
    if (user != op && user != g.getOperation() && !isa<memref::DeallocOp>(user) &&
        !(user == op->getPrevNode() && isa<linalg::FillOp>(user)))
      return {};
  SmallVector<Value> written{unroll::viewRoot(x), unroll::viewRoot(dx)};
  for (Operation *p = op->getNextNode(); p != g.getOperation(); p = p->getNextNode()) {
    if (auto alloc = dyn_cast<memref::AllocOp>(p)) {
      if (!llvm::all_of(alloc->getOperands(), [&](Value v) { return definedBefore(v, op); }))
        return {};
      continue;
    }
    if (isMemoryEffectFree(p))
      continue;
    auto lin = dyn_cast<linalg::LinalgOp>(p);
    if (!lin || !lin.hasPureBufferSemantics() || touches(p, {c}))
      return {};
    for (Value init : lin.getDpsInits())
      if (llvm::is_contained(written, unroll::viewRoot(init)))
        return {};
  }
  Operation *dxDef = dx.getDefiningOp();
  if (!definedBefore(dx, op) &&
      !(isa_and_nonnull<memref::AllocOp>(dxDef) && dxDef->getBlock() == op->getBlock()))
    return {};
  return g;
}

/// The elementwise sum `out = a + b` (identity maps, no reductions) that is
/// the first operation after `op` touching memory, past operations without
/// memory effects and allocations of sizes defined before `op`; null if the
/// first is anything else.
static linalg::GenericOp nextSum(Operation *op) {
  auto g = dyn_cast_or_null<linalg::GenericOp>(nextMemoryOp(op));
  if (!g || !g.hasPureBufferSemantics() || g.getNumDpsInputs() != 2 || g.getNumDpsInits() != 1 ||
      g.getNumReductionLoops() != 0 ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return {};
  Block &body = g.getRegion().front();
  auto add =
      cast<linalg::YieldOp>(body.getTerminator()).getOperand(0).getDefiningOp<arith::AddFOp>();
  Value a = body.getArgument(0), b = body.getArgument(1);
  if (body.getOperations().size() != 2 || !add ||
      !((add.getLhs() == a && add.getRhs() == b) || (add.getLhs() == b && add.getRhs() == a)))
    return {};
  return g;
}

/// The summand of `sum` that is not `c`, if exactly one of its two inputs is
/// `c`; null otherwise.
static Value otherSummand(linalg::GenericOp sum, Value c) {
  Value in0 = sum.getDpsInputs()[0], in1 = sum.getDpsInputs()[1];
  if ((in0 == c) == (in1 == c))
    return {};
  return in0 == c ? in1 : in0;
}

std::optional<std::pair<int64_t, int64_t>> mlir::unroll::staticExtent(Type type) {
  auto t = dyn_cast<MemRefType>(type);
  SmallVector<int64_t> st;
  int64_t off;
  if (!t || !t.hasStaticShape() || failed(getStridesAndOffset(t, st, off)) ||
      ShapedType::isDynamic(off) || llvm::any_of(st, ShapedType::isDynamic))
    return std::nullopt;
  int64_t last = off;
  for (auto [size, stride] : llvm::zip(t.getShape(), st))
    last += (size - 1) * stride;
  return std::make_pair(off, last);
}

/// Whether `a` and `b` are views of different buffers, or of one buffer at
/// static places that do not overlap (two slices of a flat gradient).
static bool disjoint(Value a, Value b) {
  if (unroll::viewRoot(a) != unroll::viewRoot(b))
    return true;
  auto ea = unroll::staticExtent(a.getType()), eb = unroll::staticExtent(b.getType());
  return ea && eb && (ea->second < eb->first || eb->second < ea->first);
}

/// The reduction `s[m...] += Σ_k... a[..]` of all of `a` over the positions
/// `aK` of its shape into a rank-1, unit-stride `s` indexed by the single
/// position `aM` (the bias gradient db[o] += Σ_{b,i} dy[b, i, o] after the
/// weight gradient dW += dyᵀ·x that reads dy as its A): the first operation
/// after `op` touching memory, past those without memory effects; null if
/// the first is anything else, or if s may overlap one of `others`.
static linalg::GenericOp findRowSum(Operation *op, Value a, ArrayRef<unsigned> aM,
                                    ArrayRef<unsigned> aK, ArrayRef<Value> others) {
  auto aType = cast<MemRefType>(a.getType());
  if (aM.size() != 1 || aType.getRank() != int64_t(aM.size() + aK.size()))
    return {};
  Operation *p = op->getNextNode();
  while (p && isMemoryEffectFree(p) && p->getNumRegions() == 0)
    p = p->getNextNode();
  auto g = dyn_cast_or_null<linalg::GenericOp>(p);
  if (!g || !g.hasPureBufferSemantics() || g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 ||
      g.getDpsInputs()[0] != a || !unroll::addsToInit(g) ||
      g.getRegion().front().getOperations().size() != 2)
    return {};
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  auto iters = g.getIteratorTypesArray();
  AffineMap out = maps[1];
  if (!maps[0].isIdentity() || out.getNumResults() != 1 ||
      out.getResult(0) != getAffineDimExpr(aM.front(), op->getContext()))
    return {};
  for (unsigned d = 0; d < iters.size(); ++d)
    if ((iters[d] == utils::IteratorType::reduction) != llvm::is_contained(aK, d))
      return {};
  Value s = g.getDpsInits()[0];
  auto sType = cast<MemRefType>(s.getType());
  SmallVector<int64_t> st;
  int64_t off;
  if (sType.getRank() != 1 || failed(getStridesAndOffset(sType, st, off)) || st[0] != 1)
    return {};
  for (Value v : others)
    if (!disjoint(v, s))
      return {};
  // s must exist at the call: defined before `op`, or a view made between
  // the two from values that are (it moves up).
  if (Operation *def = s.getDefiningOp(); def && !definedBefore(s, op))
    if (def->getBlock() != op->getBlock() || !isMemoryEffectFree(def) ||
        def->getNumRegions() != 0 ||
        !llvm::all_of(def->getOperands(), [&](Value v) { return definedBefore(v, op); }))
      return {};
  return g;
}

bool mlir::unroll::forwardProductIntoSum(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !isMulAdd(op))
    return false;
  Value c = op.getDpsInits()[0];
  auto cAlloc = c.getDefiningOp<memref::AllocOp>();
  if (!cAlloc || cAlloc->getBlock() != op->getBlock())
    return false;
  // What c starts from, right before the product: a fill or a broadcast
  // (a generic that writes c without reading it).
  Operation *pre = op->getPrevNode();
  while (pre && isMemoryEffectFree(pre) && pre->getNumRegions() == 0)
    pre = pre->getPrevNode();
  auto fill = dyn_cast_or_null<linalg::FillOp>(pre);
  auto broadcast = dyn_cast_or_null<linalg::GenericOp>(pre);
  bool fills = fill && fill.hasPureBufferSemantics() && fill.getDpsInits()[0] == c;
  bool broadcasts = broadcast && broadcast.hasPureBufferSemantics() &&
                    broadcast.getNumDpsInputs() == 1 && broadcast.getNumDpsInits() == 1 &&
                    broadcast.getDpsInits()[0] == c && broadcast.getNumReductionLoops() == 0 &&
                    !broadcast.payloadUsesValueFromOperand(broadcast.getDpsInitOperand(0));
  if (!fills && !broadcasts)
    return false;
  linalg::GenericOp sum = nextSum(op);
  Value x = sum ? otherSummand(sum, c) : Value();
  if (!x)
    return false;
  Value r = sum.getDpsInits()[0];
  auto cType = cast<MemRefType>(c.getType());
  auto rType = dyn_cast<MemRefType>(r.getType());
  if (!rType || !isStrided(rType) || rType.getShape() != cType.getShape() ||
      rType.getElementType() != cType.getElementType())
    return false;
  // Nothing else reads c; the product's inputs, x and the broadcast's
  // source are other buffers than r.
  for (Operation *user : c.getUsers())
    if (user != pre && user != op.getOperation() && user != sum.getOperation() &&
        !isa<memref::DeallocOp>(user))
      return false;
  Value rRoot = viewRoot(r);
  SmallVector<Value> read{op.getDpsInputs()[0], op.getDpsInputs()[1], x};
  if (broadcasts)
    read.push_back(broadcast.getDpsInputs()[0]);
  if (llvm::any_of(read, [&](Value v) { return viewRoot(v) == rRoot; }))
    return false;
  // r must exist where c is first written (an allocation after the
  // product, of sizes known by then, moves up).
  if (!definedBefore(r, pre)) {
    auto rAlloc = r.getDefiningOp<memref::AllocOp>();
    if (!rAlloc || rAlloc->getBlock() != op->getBlock() ||
        !llvm::all_of(rAlloc->getOperands(), [&](Value v) { return definedBefore(v, pre); }))
      return false;
    rAlloc->moveBefore(pre);
  }
  for (Operation *user : {pre, op.getOperation(), sum.getOperation()})
    user->replaceUsesOfWith(c, r);
  for (Operation *user : llvm::make_early_inc_range(c.getUsers()))
    user->erase(); // its deallocations
  cAlloc.erase();
  return true;
}

static void declare(ModuleOp module, StringRef name, unsigned numArgs) {
  if (module.lookupSymbol(name))
    return;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  SmallVector<Type> types(numArgs, b.getIndexType());
  auto fn = b.create<func::FuncOp>(module.getLoc(), name, b.getFunctionType(types, {}));
  fn.setPrivate();
}

namespace {

/// A linalg.generic that is a strided contraction C += A·B over buffers: its
/// operands, their element type and maps, and the loop dims by role (batch
/// in A, B and C; m in A and C; n in B and C; k in A and B), each group at
/// consecutive positions of every operand that holds it (aM: m's positions
/// in A, and so on), so that it collapses to one dimension with one stride.
struct Contraction {
  Value ops[3];
  Type elem;
  SmallVector<AffineMap> maps;
  SmallVector<unsigned> bDims, mDims, nDims, kDims;
  SmallVector<unsigned> aM, aK, bK, bN, cM, cN;
};

std::optional<Contraction> matchContraction(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !unroll::isMulAdd(op))
    return std::nullopt;
  Contraction c;
  c.ops[0] = op.getDpsInputs()[0];
  c.ops[1] = op.getDpsInputs()[1];
  c.ops[2] = op.getDpsInits()[0];
  for (Value v : c.ops) {
    auto t = dyn_cast<MemRefType>(v.getType());
    if (!t || !isStrided(t))
      return std::nullopt;
    if (c.elem && t.getElementType() != c.elem)
      return std::nullopt;
    c.elem = t.getElementType();
  }
  if (!c.elem.isF32() && !c.elem.isF64())
    return std::nullopt;
  // Each map result is a loop dim or a constant index (e.g. the q/k/v slot
  // of a fused QKV tensor); constants become offsets.
  c.maps = op.getIndexingMapsArray();
  for (AffineMap m : c.maps) {
    if (m.getNumSymbols() != 0)
      return std::nullopt;
    llvm::SmallBitVector seen(op.getNumLoops());
    for (AffineExpr e : m.getResults()) {
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        if (seen.test(d.getPosition()))
          return std::nullopt;
        seen.set(d.getPosition());
      } else if (!isa<AffineConstantExpr>(e)) {
        return std::nullopt;
      }
    }
  }
  auto iters = op.getIteratorTypesArray();
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    bool inA = c.maps[0].isFunctionOfDim(d), inB = c.maps[1].isFunctionOfDim(d),
         inC = c.maps[2].isFunctionOfDim(d);
    bool red = iters[d] == utils::IteratorType::reduction;
    if (inA && inB && inC && !red)
      c.bDims.push_back(d);
    else if (inA && inC && !inB && !red)
      c.mDims.push_back(d);
    else if (inB && inC && !inA && !red)
      c.nDims.push_back(d);
    else if (inA && inB && !inC && red)
      c.kDims.push_back(d);
    else
      return std::nullopt; // broadcast dims: keep the loop nest
  }
  if (c.mDims.empty() || c.nDims.empty() || c.kDims.empty())
    return std::nullopt;
  c.aM = groupPositions(c.maps[0], c.mDims);
  c.aK = groupPositions(c.maps[0], c.kDims);
  c.bK = groupPositions(c.maps[1], c.kDims);
  c.bN = groupPositions(c.maps[1], c.nDims);
  c.cM = groupPositions(c.maps[2], c.mDims);
  c.cN = groupPositions(c.maps[2], c.nDims);
  for (auto *p : {&c.aM, &c.aK, &c.bK, &c.bN, &c.cM, &c.cN})
    if (p->empty())
      return std::nullopt;
  if (dimsAt(c.maps[0], c.aM) != dimsAt(c.maps[2], c.cM) ||
      dimsAt(c.maps[0], c.aK) != dimsAt(c.maps[1], c.bK) ||
      dimsAt(c.maps[1], c.bN) != dimsAt(c.maps[2], c.cN))
    return std::nullopt;
  return c;
}

/// Whether C suits the epilogues: row-major with n its last dim alone, a
/// row stride divisible by 8 (cuBLASLt's aux matrix), all of C written.
bool epilogueLayout(const Contraction &c) {
  auto cType = cast<MemRefType>(c.ops[2].getType());
  SmallVector<int64_t> cStrides;
  int64_t cOffset;
  return c.bDims.empty() && cType.getRank() >= 2 && c.cN.size() == 1 &&
         c.cN.front() == cType.getRank() - 1 &&
         succeeded(getStridesAndOffset(cType, cStrides, cOffset)) && cStrides.back() == 1 &&
         !ShapedType::isDynamic(cStrides[cType.getRank() - 2]) &&
         cStrides[cType.getRank() - 2] % 8 == 0 &&
         llvm::all_of(c.maps[2].getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); });
}

/// A bias broadcast into C before `op` that the call can fold (C = A·B + b):
/// the broadcast writes C itself (n its last dim alone) or all of C's
/// buffer, row-major with n the buffer's last dim (C itself, or its last
/// dim expanded into the n group). Null if there is none.
linalg::GenericOp matchBiasBroadcast(linalg::GenericOp op, const Contraction &c) {
  Value cv = c.ops[2];
  auto cType = cast<MemRefType>(cv.getType());
  Value root = unroll::viewRoot(cv);
  auto rootType = dyn_cast<MemRefType>(root.getType());
  bool trailingN = c.cN.back() == cType.getRank() - 1 &&
                   c.cN.front() + c.cN.size() == static_cast<size_t>(cType.getRank());
  bool whole = cv == root;
  if (auto expand = cv.getDefiningOp<memref::ExpandShapeOp>(); expand && expand.getSrc() == root) {
    auto groups = expand.getReassociationIndices();
    whole = groups.back().size() == c.cN.size() && groups.back().front() == (int64_t)c.cN.front();
  } else if (whole) {
    whole = c.cN.size() == 1;
  }
  bool wholeBuffer = rootType && rootType.getLayout().isIdentity() &&
                     root.getDefiningOp<memref::AllocOp>() && whole;
  bool self = c.cN.size() == 1;
  if (!trailingN || !(wholeBuffer || self) ||
      !llvm::all_of(c.maps[2].getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); }))
    return nullptr;
  linalg::GenericOp bc = wholeBuffer ? findBiasBroadcast(op, root, root) : nullptr;
  if (!bc && self)
    bc = findBiasBroadcast(op, cv, root);
  return bc;
}

} // namespace

namespace {

/// One contraction's rewrite into calls of the GEMM ABI (`call`): the
/// operands' layouts read at run time, the elementwise neighbours fused into
/// the call's epilogue, the call (one per batch index), the loop nest kept
/// as the fallback where a layout is known only at run time. The steps run
/// in rewriteContraction's order, which is the order of the IR they write.
struct ContractionRewrite {
  ContractionRewrite(linalg::GenericOp op, const unroll::ContractionCall &call, Contraction &c)
      : op(op), call(call), c(c), ops(c.ops), maps(c.maps), b(op), loc(op.getLoc()),
        cRank(cast<MemRefType>(c.ops[2].getType()).getRank()) {}

  linalg::GenericOp op;
  const unroll::ContractionCall &call;
  Contraction &c;
  Value (&ops)[3];
  ArrayRef<AffineMap> maps;
  OpBuilder b;
  Location loc;
  unsigned cRank; // C's (the product's own output, before a fused GELU' takes its place)

  // What the steps find and build.
  linalg::FillOp fill; // C's zero fill right before the product, if any
  bool epilogue = false;
  linalg::GenericOp dgelu, biasBroadcast, gelu, sum, rowSum;
  Value dgeluC, summand;
  SmallVector<memref::ExtractStridedMetadataOp> meta;
  Value collapsible; // the run-time check that grouped dims are dense
  SmallVector<Value> base, strides, ptrs;
  Value M, N, K;
  int64_t bytes = 0;
  std::string name;
  Value accumulate, biasAddr, rowSumAddr, geluAddr;
  int64_t flagsBias = 0, flagsGelu = 0;

  Value cst(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value size(Value v, unsigned p) { return b.create<memref::DimOp>(loc, v, p); }
  bool overwrites() { return accumulate.getDefiningOp<arith::ConstantIndexOp>().value() == 0; }
  /// The address of v's first element (aligned pointer + offset · bytes).
  Value addressOf(Value v) {
    auto m = b.create<memref::ExtractStridedMetadataOp>(loc, v);
    return b.create<arith::AddIOp>(loc, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, v),
                                   b.create<arith::MulIOp>(loc, m.getOffset(), cst(bytes)));
  }

  /// dx = dy·GELU'(x) of C = dy right after, C zero-filled right before and
  /// used by nothing else: the call writes dx itself, GELU'(x) ∘ (A·B), with
  /// x in the GELU argument (cuBLASLt's DGELU epilogue).
  void matchGeluGrad() {
    if (call.dgeluFlag && epilogue && isZeroFillOf(fill, ops[2]))
      dgelu = findGeluGrad(op, ops[2]);
    if (!dgelu)
      return;
    dgeluC = ops[2];
    Value dx = dgelu.getDpsInits()[0];
    if (auto alloc = dx.getDefiningOp<memref::AllocOp>(); alloc && op->isBeforeInBlock(alloc))
      alloc->moveBefore(op); // its sizes are defined before op (findGeluGrad)
    ops[2] = dx;
  }

  /// The operands' strides, offsets, sizes and pointers. A group of several
  /// dims collapses to one stride only where the operand is dense row-major
  /// over it. The identity layout says so statically; other layouts (a
  /// slice [w] of the window's tape: strides [?, F, 1], offset ?) are
  /// checked when the call runs, with the loop nest as the fallback.
  void readLayouts() {
    for (Value v : ops)
      meta.push_back(b.create<memref::ExtractStridedMetadataOp>(loc, v));
    auto dense = [&](unsigned i, ArrayRef<unsigned> pos) {
      if (pos.size() < 2 || cast<MemRefType>(ops[i].getType()).getLayout().isIdentity())
        return;
      for (unsigned j = 0; j + 1 < pos.size(); ++j) {
        Value inner = b.create<arith::MulIOp>(loc, meta[i].getStrides()[pos[j + 1]],
                                              meta[i].getSizes()[pos[j + 1]]);
        Value eq = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq,
                                           meta[i].getStrides()[pos[j]], inner);
        collapsible = collapsible ? b.create<arith::AndIOp>(loc, collapsible, eq).getResult() : eq;
      }
    };
    dense(0, c.aM), dense(0, c.aK), dense(1, c.bK), dense(1, c.bN), dense(2, c.cM), dense(2, c.cN);
    auto product = [&](Value v, ArrayRef<unsigned> pos) {
      Value r;
      for (unsigned p : pos)
        r = r ? b.create<arith::MulIOp>(loc, r, size(v, p)).getResult() : size(v, p);
      return r;
    };
    // A group's stride is its innermost dim's (denseness checked above).
    auto stride = [&](unsigned i, ArrayRef<unsigned> pos) -> Value {
      return meta[i].getStrides()[pos.back()];
    };
    // Element offset of each operand without the batch dims: the layout's
    // offset plus the constant indices.
    base.resize(3);
    for (unsigned i = 0; i < 3; ++i) {
      Value off = meta[i].getOffset();
      for (auto [r, e] : llvm::enumerate(maps[i].getResults()))
        if (auto k = dyn_cast<AffineConstantExpr>(e); k && k.getValue() != 0)
          off = b.create<arith::AddIOp>(
              loc, off, b.create<arith::MulIOp>(loc, cst(k.getValue()), meta[i].getStrides()[r]));
      base[i] = off;
    }
    M = product(ops[2], c.cM), N = product(ops[2], c.cN), K = product(ops[0], c.aK);
    strides = {stride(0, c.aM), stride(0, c.aK), stride(1, c.bK),
               stride(1, c.bN), stride(2, c.cM), stride(2, c.cN)};
    for (Value v : ops)
      ptrs.push_back(b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, v));
  }

  /// Whether `call` takes this product: batch dims need its batch loops; a
  /// unit-stride ABI needs each operand row- or column-major, statically.
  bool callTakesIt() {
    if (!c.bDims.empty() && !call.batchLoops)
      return false;
    if (!call.unitStride)
      return true;
    auto unit = [&](unsigned i, ArrayRef<unsigned> p, ArrayRef<unsigned> q) {
      SmallVector<int64_t> st;
      int64_t off;
      if (failed(getStridesAndOffset(cast<MemRefType>(ops[i].getType()), st, off)))
        return false;
      return st[p.back()] == 1 || st[q.back()] == 1;
    };
    return unit(0, c.aM, c.aK) && unit(1, c.bK, c.bN) && unit(2, c.cM, c.cN);
  }

  /// A zero fill of C right before, covering exactly what the calls write
  /// (C indexed by loop dims only), is replaced by overwriting.
  void dropZeroFill() {
    accumulate = cst(1);
    if (dgelu ||
        (isZeroFillOf(fill, ops[2]) &&
         llvm::all_of(maps[2].getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); }))) {
      fill.erase();
      accumulate = cst(0);
    }
  }

  /// A bias broadcast into C before it: C = A·B + b in one call.
  void fuseBias() {
    if (call.biasArg && c.bDims.empty() && !dgelu && !overwrites())
      biasBroadcast = matchBiasBroadcast(op, c);
    if (!biasBroadcast)
      return;
    Value bias = biasBroadcast.getDpsInputs()[0];
    auto bm = b.create<memref::ExtractStridedMetadataOp>(loc, bias);
    Value bp = b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, bias);
    biasAddr =
        b.create<arith::AddIOp>(loc, bp, b.create<arith::MulIOp>(loc, bm.getOffset(), cst(bytes)));
    accumulate = cst(0);
    flagsBias = call.biasFlag;
  }

  /// GELU of C right after, into D of C's type (C overwritten): D = GELU(C)
  /// in the call, C keeps the pre-activation (cuBLASLt's GELU_AUX
  /// epilogue). Else C = C + x right after an overwritten C (a residual
  /// sum): C = A·B (+ b) + x in the call, x in the epilogue argument.
  void fuseGeluOrSum() {
    if (call.geluFlag && !dgelu && epilogue && overwrites())
      gelu = findGelu(op, ops[2]);
    if (gelu)
      if (auto alloc = gelu.getDpsInits()[0].getDefiningOp<memref::AllocOp>();
          alloc && op->isBeforeInBlock(alloc))
        alloc->moveBefore(op); // its sizes are defined before op (findGelu)
    if (call.addFlag && !gelu && !dgelu && epilogue && overwrites())
      if (linalg::GenericOp s = nextSum(op); s && s.getDpsInits()[0] == ops[2])
        if (Value x = otherSummand(s, ops[2]);
            x && definedBefore(x, op) && unroll::viewRoot(x) != unroll::viewRoot(ops[2]))
          sum = s, summand = x;
  }

  /// A's sums over k right after (a weight gradient's bias gradient): the
  /// call adds them while it packs A, into the vector in the epilogue
  /// argument.
  void fuseRowSum() {
    if (call.rowSumFlag && !gelu && !dgelu && !sum && c.bDims.empty() &&
        llvm::all_of(maps[0].getResults(), [](AffineExpr e) { return isa<AffineDimExpr>(e); }))
      rowSum = findRowSum(op, ops[0], c.aM, c.aK, {ops[0], ops[1], ops[2]});
    if (!rowSum)
      return;
    Value v = rowSum.getDpsInits()[0];
    if (!definedBefore(v, op))
      v.getDefiningOp()->moveBefore(op); // a view of values defined before op (findRowSum)
    rowSumAddr = addressOf(v);
  }

  /// The epilogue argument: GELU's output D, GELU's input x for its
  /// gradient, or the summand. Where C's strides or its are known only when
  /// the call runs, they must be equal then (else the loop nests).
  void epilogueArgument() {
    Value d = gelu ? gelu.getDpsInits()[0] : dgelu ? dgelu.getDpsInputs()[0] : summand;
    if (!d)
      return;
    auto dm = b.create<memref::ExtractStridedMetadataOp>(loc, d);
    geluAddr =
        b.create<arith::AddIOp>(loc, b.create<memref::ExtractAlignedPointerAsIndexOp>(loc, d),
                                b.create<arith::MulIOp>(loc, dm.getOffset(), cst(bytes)));
    flagsGelu = gelu ? call.geluFlag : dgelu ? call.dgeluFlag : call.addFlag;
    if (collapsible || d.getType() != ops[2].getType())
      for (unsigned i = 0; i < cRank; ++i) {
        Value eq = b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, dm.getStrides()[i],
                                           meta[2].getStrides()[i]);
        collapsible = collapsible ? b.create<arith::AndIOp>(loc, collapsible, eq).getResult() : eq;
      }
  }

  /// The call at batch index `ivs` (empty without batch dims).
  void emitCall(OpBuilder &nb, ValueRange ivs) {
    SmallVector<Value> addr(3);
    for (unsigned i = 0; i < 3; ++i) {
      Value off = base[i];
      for (auto [j, d] : llvm::enumerate(c.bDims)) {
        unsigned pos = *maps[i].getResultPosition(nb.getAffineDimExpr(d));
        off = nb.create<arith::AddIOp>(
            loc, off, nb.create<arith::MulIOp>(loc, ivs[j], meta[i].getStrides()[pos]));
      }
      addr[i] = nb.create<arith::AddIOp>(
          loc, ptrs[i],
          nb.create<arith::MulIOp>(loc, off, nb.create<arith::ConstantIndexOp>(loc, bytes)));
    }
    SmallVector<Value> args{M,          N,          K,          addr[0],    strides[0],
                            strides[1], addr[1],    strides[2], strides[3], addr[2],
                            strides[4], strides[5], accumulate};
    int64_t flagsRowSum = rowSum ? call.rowSumFlag : 0;
    for (auto [i, extra] : llvm::enumerate(call.extraArgs))
      args.push_back(nb.create<arith::ConstantIndexOp>(
          loc, i == 0 ? extra | flagsBias | flagsGelu | flagsRowSum : extra));
    if (call.biasArg)
      args.push_back(biasAddr ? biasAddr : nb.create<arith::ConstantIndexOp>(loc, 0).getResult());
    if (call.epilogueArg) {
      Value d = geluAddr ? geluAddr : rowSumAddr;
      args.push_back(d ? d : nb.create<arith::ConstantIndexOp>(loc, 0).getResult());
    }
    assert(args.size() == call.numArgs && "the ABI header declares another signature");
    nb.create<func::CallOp>(loc, name, TypeRange{}, args);
  }

  /// One call, or one per batch index (loops over the batch dims, sizes
  /// from C).
  void emitCalls(OpBuilder &nb) {
    if (c.bDims.empty()) {
      emitCall(nb, {});
      return;
    }
    SmallVector<Value> lbs, ubs, steps;
    for (unsigned d : c.bDims) {
      lbs.push_back(cst(0));
      ubs.push_back(size(ops[2], *maps[2].getResultPosition(nb.getAffineDimExpr(d))));
      steps.push_back(cst(1));
    }
    scf::buildLoopNest(nb, loc, lbs, ubs, steps,
                       [&](OpBuilder &lb, Location, ValueRange ivs) { emitCall(lb, ivs); });
  }

  /// The calls; where the layouts are checked at run time, under an scf.if
  /// whose else branch is the original loop nest with everything fused
  /// into the call (after the zero fill, if the calls were to overwrite).
  void emit() {
    if (!collapsible) {
      emitCalls(b);
      return;
    }
    b.create<scf::IfOp>(
        loc, collapsible,
        [&](OpBuilder &tb, Location tl) {
          emitCalls(tb);
          tb.create<scf::YieldOp>(tl);
        },
        [&](OpBuilder &eb, Location el) {
          if (biasBroadcast) {
            eb.clone(*biasBroadcast.getOperation());
          } else if (overwrites()) {
            Value zero = eb.create<arith::ConstantOp>(el, eb.getZeroAttr(c.elem));
            eb.create<linalg::FillOp>(el, zero, dgelu ? dgeluC : ops[2]);
          }
          eb.clone(*op.getOperation());
          for (linalg::GenericOp fused : {gelu, dgelu, sum, rowSum})
            if (fused)
              eb.clone(*fused.getOperation());
          eb.create<scf::YieldOp>(el);
        });
  }

  /// The product and what was fused into its call.
  void eraseFused() {
    for (linalg::GenericOp fused : {biasBroadcast, gelu, dgelu, sum, rowSum})
      if (fused)
        fused.erase();
    op.erase();
  }
};

} // namespace

LogicalResult mlir::unroll::rewriteContraction(linalg::GenericOp op, const ContractionCall &call) {
  std::optional<Contraction> match = matchContraction(op);
  if (!match)
    return failure();
  ContractionRewrite r(op, call, *match);
  // Taken before this rewrite inserts its index arithmetic in between.
  r.fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode());
  r.epilogue = epilogueLayout(*match);
  r.matchGeluGrad();
  r.readLayouts();
  if (!r.callTakesIt())
    return failure();
  r.bytes = match->elem.getIntOrFloatBitWidth() / 8;
  r.name = call.name(match->elem.isF32());
  declare(op->getParentOfType<ModuleOp>(), r.name, call.numArgs);
  r.dropZeroFill();
  r.fuseBias();
  r.fuseGeluOrSum();
  r.fuseRowSum();
  r.epilogueArgument();
  r.emit();
  r.eraseFused();
  return success();
}
