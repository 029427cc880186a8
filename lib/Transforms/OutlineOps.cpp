//===- OutlineOps.cpp - linalg ops of huge functions into their own --------===//
//
// unroll-outline-ops: see Passes.td. Keeps LLVM's optimization time linear
// in the size of models with many distinct layers.
//
//===----------------------------------------------------------------------===//
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLOUTLINEOPS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct OutlineOps : public unroll::impl::UnrollOutlineOpsBase<OutlineOps> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp f : funcs) {
      if (f.isExternal())
        continue;
      SmallVector<linalg::LinalgOp> ops;
      f.walk([&](linalg::LinalgOp op) {
        if (!op->getParentOfType<linalg::LinalgOp>())
          ops.push_back(op);
      });
      if ((int64_t)ops.size() < minOps)
        continue;
      int64_t i = 0;
      for (linalg::LinalgOp op : ops)
        outline(module, f, op, i++);
    }
  }

  void outline(ModuleOp module, func::FuncOp parent, linalg::LinalgOp op, int64_t index) {
    // Arguments: the op's operands and what its regions use from above;
    // constants are cloned instead.
    llvm::SetVector<Value> captured;
    for (Value v : op->getOperands())
      captured.insert(v);
    getUsedValuesDefinedAbove(op->getRegions(), captured);
    SmallVector<Value> args;
    SmallVector<Operation *> constants;
    for (Value v : captured) {
      Operation *def = v.getDefiningOp();
      if (def && def->hasTrait<OpTrait::ConstantLike>())
        constants.push_back(def);
      else
        args.push_back(v);
    }
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    SmallVector<Type> types;
    for (Value v : args)
      types.push_back(v.getType());
    std::string name = (parent.getSymName() + "__op" + Twine(index)).str();
    auto fn = b.create<func::FuncOp>(op.getLoc(), name, b.getFunctionType(types, {}));
    fn.setPrivate();
    fn->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToStart(body);
    IRMapping map;
    map.map(args, body->getArguments());
    for (Operation *c : constants)
      map.map(c->getResult(0), b.clone(*c)->getResult(0));
    b.clone(*op.getOperation(), map);
    b.create<func::ReturnOp>(op.getLoc());
    OpBuilder at(op);
    at.create<func::CallOp>(op.getLoc(), fn, args);
    op->erase();
    ++numOutlined;
  }
};

} // namespace
