//===- EntryPoints.h - energies and models to C-interface functions -*- C++ -*-===//
//
// The structural half of the lowering (convert-unroll-to-entry-points): an
// `unroll.energy` or `unroll.model` becomes C-interface functions on memrefs
// whose bodies hold its ops (still unroll ops, lowered afterwards by the
// patterns of convert-unroll-to-linalg) inside the loops, slices and
// gradient bookkeeping of each entry point. Parameters become views into
// one flat vector theta.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_ENTRYPOINTS_H
#define UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_ENTRYPOINTS_H

#include "unroll/Conversion/Passes.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/JSON.h"

namespace mlir::unroll::lowering {

//===----------------------------------------------------------------------===//
// Parameters in the flat vector theta
//===----------------------------------------------------------------------===//

struct ParamInfo {
  std::string name;
  RankedTensorType type;
  double std;
  InitKind init;
  double value;   // for init(constant)
  int64_t offset; // into the flat parameter vector theta
  bool fixed;     // supplied by the task, never trained
};

/// The parameters of an energy or model, by first appearance, with offsets.
class ParamTable {
public:
  void collect(Operation *root) {
    root->walk([&](ParamOp p) {
      if (index.count(p.getName()))
        return;
      index[p.getName()] = params.size();
      params.push_back({p.getName().str(), p.getType(), p.getStd().convertToDouble(), p.getInit(),
                        p.getValue() ? p.getValue()->convertToDouble() : 0.0, numParams,
                        p.getFixed()});
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
SmallVector<Value> paramTensors(OpBuilder &b, Location loc, Value theta, const ParamTable &table,
                                Type elem);
/// A C-interface entry function with the builder at its start.
func::FuncOp makeEntry(OpBuilder &b, Location loc, StringRef name, ArrayRef<Type> args);
MemRefType dynMemref(unsigned rank, Type elem);
/// grad[offset(p) : +numel(p)] += g (flattened), as tensors; returns the new
/// gradient vector.
Value accumulateInto(OpBuilder &b, Location loc, Value grad, const ParamInfo &p, Value g);
/// The terms of an energy's minimize, for the library's info: each term's
/// op and the parameters, rho, mask, coefficient and center an independent
/// evaluator needs (a center is "zero", "X" for the energy's input, or a
/// parameter's name).
llvm::json::Array energyTermsJson(EnergyOp energy);
/// The pairwise term's rho (or a kernel term's kernel) and mask, as the
/// model info names them ("" when the energy has neither).
std::pair<std::string, std::string> kernelAndMask(EnergyOp energy);
/// The schedule's step sizes where given: alpha, momentum, eps,
/// per_iteration.
void addStepSizeInfo(MinimizeOp min, llvm::json::Object &o);

//===----------------------------------------------------------------------===//
// The window's tape (Tape.cpp)
//===----------------------------------------------------------------------===//

/// The activations of one loop iteration that the reverse region's VJPs
/// read. The reverse region (u, dY) -> du begins with a copy of the body's
/// ops (its primal part); `rev` are the primal values that its VJP part
/// reads, `body` the same values in the loop body.
struct Tape {
  SmallVector<Value> rev, body;
  DenseSet<Operation *> primal; // the reverse region's copy of the body
  bool empty() const { return rev.empty(); }
};

/// Matches the reverse region's primal ops to the body's ops: the same op,
/// attributes and result types on corresponding operands. Returns an empty
/// tape when an op has no counterpart or a tape value is not a token tensor
/// [B, n, F] (then the lowering recomputes).
Tape planTape(LoopOp loop);

//===----------------------------------------------------------------------===//
// Entry points, one kind of top-level op each
//===----------------------------------------------------------------------===//

/// Emits the entry points of an energy at the builder; returns its info.
llvm::json::Object lowerEnergy(OpBuilder &b, EnergyOp energy);
/// Emits the entry points of a differentiated model; returns its info.
/// `recomputeWindow`: the backward recomputes each window iteration's block
/// instead of reading its stored activations.
FailureOr<llvm::json::Object> lowerModel(OpBuilder &b, ModelOp model, bool recomputeWindow,
                                          bool vjp);
/// @M_adam: one Adam step in place on the flat vectors (Adam.cpp).
void emitAdam(OpBuilder &b, Location loc, StringRef name, Type elem);

} // namespace mlir::unroll::lowering

#endif // UNROLL_LIB_CONVERSION_UNROLLTOENTRYPOINTS_ENTRYPOINTS_H
