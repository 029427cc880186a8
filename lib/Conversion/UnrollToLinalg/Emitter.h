//===- Emitter.h - linalg-on-tensors building blocks -----------*- C++ -*-===//
//
// Shared by the energy and model lowerings: small constructors for linalg
// generics, matmuls, fills and reductions on tensors, and the helpers that
// turn the C-interface memref arguments (tokens, the flat parameter vector
// theta) into tensors.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_LIB_CONVERSION_UNROLLTOLINALG_EMITTER_H
#define UNROLL_LIB_CONVERSION_UNROLLTOLINALG_EMITTER_H

#include "unroll/Conversion/Passes.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

namespace mlir::unroll::lowering {

//===----------------------------------------------------------------------===//
// Emitter: small linalg-on-tensors building blocks
//===----------------------------------------------------------------------===//

class Emitter {
public:
  Emitter(OpBuilder &b, Location loc, Type elem) : b(b), loc(loc), t(elem) {}

  Value cst(double v) {
    return b.create<arith::ConstantOp>(loc, t, b.getFloatAttr(t, v));
  }
  Value idx(int64_t v) { return b.create<arith::ConstantIndexOp>(loc, v); }
  Value dim(Value v, int64_t i) { return b.create<tensor::DimOp>(loc, v, i); }

  /// A dynamically shaped tensor filled with `v`.
  Value filled(ArrayRef<Value> sizes, double v) {
    SmallVector<int64_t> shape(sizes.size(), ShapedType::kDynamic);
    Value e = b.create<tensor::EmptyOp>(loc, shape, t, sizes);
    return b.create<linalg::FillOp>(loc, cst(v), e).getResult(0);
  }
  /// Casts to the fully dynamic shape of the same rank.
  Value dynamic(Value v) {
    auto rt = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(rt.getRank(), ShapedType::kDynamic);
    auto to = RankedTensorType::get(shape, t);
    return rt == to ? v : b.create<tensor::CastOp>(loc, to, v).getResult();
  }
  Value castTo(Value v, Type to) {
    return v.getType() == to ? v : b.create<tensor::CastOp>(loc, to, v).getResult();
  }

  /// A [m, k] · B [k, n].
  Value matmul(Value a, Value bm) {
    Value out = filled({dim(a, 0), dim(bm, 1)}, 0.0);
    return b.create<linalg::MatmulOp>(loc, ValueRange{dynamic(a), dynamic(bm)},
                                      ValueRange{out})
        .getResult(0);
  }
  /// A [m, k] · B[n, k]^T.
  Value matmulTransposeB(Value a, Value bm) {
    Value out = filled({dim(a, 0), dim(bm, 0)}, 0.0);
    return b.create<linalg::MatmulTransposeBOp>(
                loc, ValueRange{dynamic(a), dynamic(bm)}, ValueRange{out})
        .getResult(0);
  }

  using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

  /// A linalg.generic over `rank` loops producing one tensor of `outSizes`
  /// (indexed by `outMap`) from `ins` (indexed by `inMaps`). The body gets
  /// the input scalars followed by the output (accumulator) scalar.
  Value generic(unsigned rank, ArrayRef<Value> ins, ArrayRef<AffineMap> inMaps,
                Value init, AffineMap outMap,
                ArrayRef<utils::IteratorType> iters, BodyFn body) {
    SmallVector<AffineMap> maps(inMaps.begin(), inMaps.end());
    maps.push_back(outMap);
    SmallVector<Value> dins;
    for (Value v : ins)
      dins.push_back(dynamic(v));
    return b
        .create<linalg::GenericOp>(
            loc, init.getType(), dins, ValueRange{init}, maps, iters,
            [&](OpBuilder &nb, Location nl, ValueRange args) {
              nb.create<linalg::YieldOp>(nl, body(nb, nl, args));
            })
        .getResult(0);
  }

  AffineMap map(unsigned rank, ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> e;
    for (unsigned d : dims)
      e.push_back(b.getAffineDimExpr(d));
    return AffineMap::get(rank, 0, e, b.getContext());
  }
  AffineMap id2() { return map(2, {0, 1}); }
  AffineMap tr2() { return map(2, {1, 0}); }
  AffineMap row2() { return map(2, {0}); }
  AffineMap col2() { return map(2, {1}); }
  AffineMap scalar(unsigned rank) { return AffineMap::get(rank, 0, {}, b.getContext()); }

  static SmallVector<utils::IteratorType> par(unsigned n) {
    return SmallVector<utils::IteratorType>(n, utils::IteratorType::parallel);
  }
  /// Parallel over the first `p` loops, reduction over the rest.
  static SmallVector<utils::IteratorType> parRed(unsigned p, unsigned n) {
    SmallVector<utils::IteratorType> it(n, utils::IteratorType::reduction);
    for (unsigned i = 0; i < p; ++i)
      it[i] = utils::IteratorType::parallel;
    return it;
  }

  /// Elementwise over a 2-d tensor (same shape out as `like`).
  Value map2(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value like,
             BodyFn body) {
    Value init = filled({dim(like, 0), dim(like, 1)}, 0.0);
    return generic(2, ins, maps, init, id2(), par(2), body);
  }
  /// Row reduction of a 2-d tensor: out_i = combine(out_i, f(row values)).
  Value rowReduce(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, Value like,
                  double initV, BodyFn body) {
    Value init = filled({dim(like, 0)}, initV);
    return generic(2, ins, maps, init, row2(), parRed(1, 2), body);
  }
  /// Full reduction of a 2-d iteration space to a scalar (returned as the
  /// element, not a tensor).
  Value fullReduce(ArrayRef<Value> ins, ArrayRef<AffineMap> maps, BodyFn body,
                   unsigned rank = 2) {
    Value init = b.create<linalg::FillOp>(
                      loc, cst(0.0), b.create<tensor::EmptyOp>(
                                         loc, ArrayRef<int64_t>{}, t).getResult())
                     .getResult(0);
    Value r = generic(rank, ins, maps, init, scalar(rank), parRed(0, rank), body);
    return b.create<tensor::ExtractOp>(loc, r, ValueRange{});
  }

  OpBuilder &b;
  Location loc;
  Type t;
};


//===----------------------------------------------------------------------===//
// Parameters in the flat vector theta
//===----------------------------------------------------------------------===//

struct ParamInfo {
  std::string name;
  RankedTensorType type;
  double std;
  InitKind init;
  int64_t offset; // into the flat parameter vector theta
};

/// The parameters of an energy or model, by first appearance, with offsets.
class ParamTable {
public:
  void collect(Operation *root) {
    root->walk([&](ParamOp p) {
      if (index.count(p.getName()))
        return;
      index[p.getName()] = params.size();
      params.push_back({p.getName().str(), p.getType(),
                        p.getStd().convertToDouble(), p.getInit(), numParams});
      numParams += p.getType().getNumElements();
    });
  }
  const ParamInfo &operator[](StringRef name) const { return params[index.lookup(name)]; }
  size_t indexOf(StringRef name) const { return index.lookup(name); }
  llvm::json::Array toJson() const;

  std::vector<ParamInfo> params;
  llvm::StringMap<size_t> index;
  int64_t numParams = 0;
};

/// memref<?x..xT> -> tensor (restrict: the entry point owns the buffer for
/// the call), cast to `to`.
Value memrefToTensor(OpBuilder &b, Location loc, Value m, Type to);
/// Writes a tensor into a memref argument (cast to the memref's shape).
void storeTensor(OpBuilder &b, Location loc, Value t, Value m);
/// Views of every parameter inside theta (zero-copy reinterpret_casts).
SmallVector<Value> paramTensors(OpBuilder &b, Location loc, Value theta,
                                const ParamTable &table, Type elem);
/// A C-interface entry function with the builder at its start.
func::FuncOp makeEntry(OpBuilder &b, Location loc, StringRef name,
                       ArrayRef<Type> args);
MemRefType dynMemref(unsigned rank, Type elem);

//===----------------------------------------------------------------------===//
// Lowerings (one per top-level op kind)
//===----------------------------------------------------------------------===//

/// Emits the entry points of an energy at the builder; returns its info.
llvm::json::Object lowerEnergy(OpBuilder &b, EnergyOp energy);
/// Emits the entry points of a differentiated model; returns its info.
/// `recomputeWindow`: the backward recomputes each window iteration's block
/// instead of reading its stored activations. `cpu`: attention and its VJP
/// call the CPU kernels (runtime/cpu/Attention.cpp) instead of linalg ops.
FailureOr<llvm::json::Object> lowerModel(OpBuilder &b, ModelOp model, bool recomputeWindow,
                                         bool cpu);

} // namespace mlir::unroll::lowering

#endif
