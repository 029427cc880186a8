//===- StageArguments.cpp - unroll-gpu-stage-arguments ----------------------===//
//
// Every memref argument of an entry point gets a buffer from memref.alloc
// (the GPU runtime's pool), copied in on entry and out before returns when
// the function may write it; resident state is used in place.
// See docs/gpu.md.
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
#define GEN_PASS_DEF_UNROLLGPUSTAGEARGUMENTS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

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
      if (isa<ViewLikeOpInterface, memref::CastOp, memref::ExpandShapeOp, memref::CollapseShapeOp,
              memref::ReinterpretCastOp>(user)) {
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

struct StageArguments : public unroll::impl::UnrollGPUStageArgumentsBase<StageArguments> {
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
    auto f = b.create<func::FuncOp>(loc, kResident,
                                    b.getFunctionType({b.getIndexType()}, {b.getI32Type()}));
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
      Value copied =
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::eq, call.getResult(0), zero);
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

} // namespace
