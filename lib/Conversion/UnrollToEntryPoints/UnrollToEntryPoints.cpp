//===- UnrollToEntryPoints.cpp - the convert-unroll-to-entry-points pass --===//
//
// Turns every energy and model of the module into C-interface entry points
// (EnergyEntryPoints.cpp, ModelEntryPoints.cpp) and adds the ABI functions
// unroll_abi_version and unroll_model_info (docs/abi.md). The ops inside the
// entry points stay unroll ops until convert-unroll-to-linalg.
//
//===----------------------------------------------------------------------===//
#include "EntryPoints.h"
#include "unroll/runtime/ModelInfo.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_CONVERTUNROLLTOENTRYPOINTS
#include "unroll/Conversion/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;
using namespace mlir::unroll;
namespace key = ::unroll::info;
using namespace mlir::unroll::lowering;

namespace {

//===----------------------------------------------------------------------===//
// ABI functions
//===----------------------------------------------------------------------===//

void emitAbi(OpBuilder &b, Location loc, const std::string &json) {
  MLIRContext *ctx = b.getContext();
  auto i8 = IntegerType::get(ctx, 8), i32 = IntegerType::get(ctx, 32);
  auto ptr = LLVM::LLVMPointerType::get(ctx);
  std::string data = json;
  data.push_back('\0');
  auto arr = LLVM::LLVMArrayType::get(i8, data.size());
  b.create<LLVM::GlobalOp>(loc, arr, /*isConstant=*/true, LLVM::Linkage::Internal,
                           "__unroll_model_info", b.getStringAttr(data));

  auto info =
      b.create<LLVM::LLVMFuncOp>(loc, "unroll_model_info", LLVM::LLVMFunctionType::get(ptr, {}));
  {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(info.addEntryBlock(b));
    Value addr = b.create<LLVM::AddressOfOp>(loc, ptr, "__unroll_model_info");
    b.create<LLVM::ReturnOp>(loc, addr);
  }
  auto ver =
      b.create<LLVM::LLVMFuncOp>(loc, "unroll_abi_version", LLVM::LLVMFunctionType::get(i32, {}));
  OpBuilder::InsertionGuard g(b);
  b.setInsertionPointToStart(ver.addEntryBlock(b));
  Value v = b.create<LLVM::ConstantOp>(loc, i32, b.getI32IntegerAttr(key::kAbiVersion));
  b.create<LLVM::ReturnOp>(loc, v);
}

std::string typeName(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

struct ConvertUnrollToEntryPointsPass
    : public mlir::unroll::impl::ConvertUnrollToEntryPointsBase<ConvertUnrollToEntryPointsPass> {
  using Base::Base;
  void runOnOperation() override {
    if (target != "cpu" && target != "gpu") {
      getOperation().emitError() << "convert-unroll-to-entry-points: unknown target '" << target
                                 << "' (expected cpu or gpu)";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    SmallVector<EnergyOp> energies(module.getOps<EnergyOp>());
    SmallVector<ModelOp> models(module.getOps<ModelOp>());
    if (energies.empty() && models.empty())
      return; // nothing to lower: other modules pass through unchanged
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    llvm::json::Array energyInfo, modelInfo;
    std::string elem;
    // One element type per library: the runtime converts once.
    auto checkElem = [&](Operation *op, Type t) {
      std::string s = typeName(t);
      if (!elem.empty() && elem != s) {
        op->emitOpError() << "uses element type " << s << " but an earlier energy or model uses "
                          << elem;
        return false;
      }
      elem = s;
      return true;
    };
    for (EnergyOp energy : energies) {
      if (energy.getSteps().empty()) {
        energy.emitOpError("has no derived steps; run --unroll-derive-steps "
                           "first (or use --lower-to-cpu)");
        return signalPassFailure();
      }
      if (!checkElem(energy, energy.getTokenType().getElementType()))
        return signalPassFailure();
      b.setInsertionPoint(energy);
      energyInfo.push_back(lowerEnergy(b, energy));
      ++numEnergies;
    }
    for (ModelOp model : models) {
      if (!model.isDifferentiated()) {
        model.emitOpError("has no reverse regions; run --unroll-differentiate "
                          "first (or use --lower-to-cpu)");
        return signalPassFailure();
      }
      if (!checkElem(model, cast<RankedTensorType>(model.getPrompt().getType()).getElementType()))
        return signalPassFailure();
      b.setInsertionPoint(model);
      FailureOr<llvm::json::Object> info = lowerModel(b, model, recomputeWindow, modelVjp);
      if (failed(info))
        return signalPassFailure();
      modelInfo.push_back(std::move(*info));
      ++numModels;
    }
    llvm::json::Object root{{key::kAbi, key::kAbiVersion},
                            {key::kKind, models.empty() ? "energy" : "model"},
                            {key::kTarget, target},
                            {key::kElementType, elem}};
    if (target == "gpu")
      root[key::kChip] = chip;
    if (!energies.empty())
      root[key::kEnergies] = std::move(energyInfo);
    if (!models.empty())
      root[key::kModels] = std::move(modelInfo);
    std::string json;
    llvm::raw_string_ostream os(json);
    os << llvm::json::Value(std::move(root));
    b.setInsertionPointToEnd(module.getBody());
    emitAbi(b, module.getLoc(), json);
    for (EnergyOp energy : energies)
      energy.erase();
    for (ModelOp model : models)
      model.erase();
  }
};

} // namespace
