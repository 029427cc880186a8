//===- Params.cpp - theta, memref arguments and entry functions -----------===//
#include "EntryPoints.h"
#include "unroll/Utils/Builders.h"
#include "unroll/runtime/ModelInfo.h"

using namespace mlir;
using namespace mlir::unroll;
namespace key = ::unroll::info;
using namespace mlir::unroll::lowering;

MemRefType mlir::unroll::lowering::dynMemref(unsigned rank, Type elem) {
  return MemRefType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic), elem);
}

Value mlir::unroll::lowering::memrefToTensor(OpBuilder &b, Location loc, Value m, Type to) {
  auto mt = cast<MemRefType>(m.getType());
  auto tt = RankedTensorType::get(mt.getShape(), mt.getElementType());
  Value t = b.create<bufferization::ToTensorOp>(loc, tt, m, /*restrict=*/true,
                                                /*writable=*/false);
  return t.getType() == to ? t : b.create<tensor::CastOp>(loc, to, t).getResult();
}

void mlir::unroll::lowering::storeTensor(OpBuilder &b, Location loc, Value t, Value m) {
  auto mt = cast<MemRefType>(m.getType());
  auto tt = RankedTensorType::get(mt.getShape(), mt.getElementType());
  if (t.getType() != tt)
    t = b.create<tensor::CastOp>(loc, tt, t);
  auto op = b.create<bufferization::MaterializeInDestinationOp>(loc, t, m);
  op.setRestrict(true);
  op.setWritable(true);
}

SmallVector<Value> mlir::unroll::lowering::paramTensors(OpBuilder &b, Location loc, Value theta,
                                                        const ParamTable &table, Type elem) {
  SmallVector<Value> out;
  for (auto &p : table.params) {
    auto shape = p.type.getShape();
    SmallVector<int64_t> strides(shape.size(), 1);
    for (int i = (int)shape.size() - 2; i >= 0; --i)
      strides[i] = strides[i + 1] * shape[i + 1];
    auto layout = StridedLayoutAttr::get(b.getContext(), p.offset, strides);
    auto mt = MemRefType::get(shape, elem, layout);
    Value view = b.create<memref::ReinterpretCastOp>(loc, mt, theta, p.offset, shape, strides);
    out.push_back(memrefToTensor(b, loc, view, p.type));
  }
  return out;
}

func::FuncOp mlir::unroll::lowering::makeEntry(OpBuilder &b, Location loc, StringRef name,
                                               ArrayRef<Type> args) {
  auto f = b.create<func::FuncOp>(loc, name, b.getFunctionType(args, {}));
  f->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  b.setInsertionPointToStart(f.addEntryBlock());
  return f;
}

llvm::json::Array ParamTable::toJson() const {
  llvm::json::Array ps;
  for (auto &p : params) {
    llvm::json::Array shape;
    for (int64_t s : p.type.getShape())
      shape.push_back(s);
    llvm::json::Object o{{key::kName, p.name},
                         {key::kShape, std::move(shape)},
                         {key::kOffset, p.offset},
                         {key::kInit, stringifyInitKind(p.init).str()}};
    if (p.init == InitKind::normal)
      o[key::kStd] = p.std;
    if (p.init == InitKind::constant)
      o[key::kValue] = p.value;
    if (p.fixed)
      o[key::kFixed] = true;
    ps.push_back(std::move(o));
  }
  return ps;
}

Value mlir::unroll::lowering::accumulateInto(OpBuilder &b, Location loc, Value grad,
                                             const ParamInfo &p, Value g) {
  int64_t numel = p.type.getNumElements();
  if (p.type.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t i = 0; i < p.type.getRank(); ++i)
      all.push_back(i);
    g = b.create<tensor::CollapseShapeOp>(loc, g, ArrayRef<ReassociationIndices>{all});
  }
  SmallVector<OpFoldResult> off{b.getIndexAttr(p.offset)}, sz{b.getIndexAttr(numel)},
      st{b.getIndexAttr(1)};
  Type elem = p.type.getElementType();
  TokenEmitter nn(b, loc, elem);
  Value cur = b.create<tensor::ExtractSliceOp>(loc, nn.tensorTy({numel}), grad, off, sz, st);
  Value sum = nn.ew({cur, g}, cur, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
    return nb.create<arith::AddFOp>(l, a[0], a[1]);
  });
  return b.create<tensor::InsertSliceOp>(loc, sum, grad, off, sz, st);
}

std::pair<std::string, std::string> mlir::unroll::lowering::kernelAndMask(EnergyOp energy) {
  for (Value t : energy.getMinimize().getTerms()) {
    if (auto p = t.getDefiningOp<PairwiseOp>())
      return {stringifyRhoKind(p.getRho()).str(), stringifyMaskKind(p.getMask()).str()};
    if (auto k = t.getDefiningOp<KernelPairwiseOp>())
      return {stringifyKernelKind(k.getKernel()).str(), stringifyMaskKind(k.getMask()).str()};
  }
  return {"", ""};
}

void mlir::unroll::lowering::addStepSizeInfo(MinimizeOp min, llvm::json::Object &o) {
  if (min.getAlpha())
    o["alpha"] = min.getAlpha()->convertToDouble();
  if (min.getMomentum())
    o["momentum"] = min.getMomentum()->convertToDouble();
  if (min.getEps())
    o["eps"] = min.getEps()->convertToDouble();
  if (min.getPerIteration())
    o["per_iteration"] = true;
}

llvm::json::Array mlir::unroll::lowering::energyTermsJson(EnergyOp energy) {
  auto paramName = [](Value v) -> llvm::json::Value {
    if (auto p = v ? v.getDefiningOp<ParamOp>() : ParamOp())
      return p.getName().str();
    return nullptr;
  };
  llvm::json::Array terms;
  for (Value term : energy.getMinimize().getTerms()) {
    Operation *d = term.getDefiningOp();
    llvm::json::Object j{{"op", d->getName().stripDialect().str()}};
    if (auto pw = dyn_cast<PairwiseOp>(d)) {
      j["proj"] = paramName(pw.getProj());
      j["rho"] = stringifyRhoKind(pw.getRho()).str();
      j["mask"] = stringifyMaskKind(pw.getMask()).str();
    } else if (auto k = dyn_cast<KernelPairwiseOp>(d)) {
      j["kernel"] = stringifyKernelKind(k.getKernel()).str();
      j["source"] = k.getSource() == energy.getInput() ? "X" : "Y";
      j["query"] = paramName(k.getQuery());
      j["key"] = paramName(k.getKey());
      j["value"] = paramName(k.getValue());
      j["heads"] = k.getHeads();
      j["mean"] = k.getMean();
      if (auto f = k.getFeatures())
        j["features"] = llvm::json::Array{(*f)[0], (*f)[1]};
      j["mask"] = stringifyMaskKind(k.getMask()).str();
    } else if (auto q = dyn_cast<QuadraticOp>(d)) {
      j["weight"] = paramName(q.getWeight());
    } else if (auto l = dyn_cast<LsqOp>(d)) {
      j["dict"] = paramName(l.getDict());
    } else if (auto l = dyn_cast<L1Op>(d)) {
      j["lambda"] = l.getLambda().convertToDouble();
      j["nonneg"] = l.getNonneg();
    } else if (auto l = dyn_cast<LseOp>(d)) {
      j["beta"] = l.getBeta().convertToDouble();
    } else if (auto r = dyn_cast<SqNormOp>(d)) {
      j["coeff"] = r.getCoeff().convertToDouble();
      j["center"] = !r.getCenter()                       ? llvm::json::Value("zero")
                    : r.getCenter() == energy.getInput() ? llvm::json::Value("X")
                                                         : paramName(r.getCenter());
    }
    terms.push_back(std::move(j));
  }
  return terms;
}
