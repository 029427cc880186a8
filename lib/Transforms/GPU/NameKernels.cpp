//===- NameKernels.cpp - unroll-gpu-name-kernels ----------------------------===//
//
// gpu-kernel-outlining names every kernel of a function `<function>_kernel`,
// each in its own module `<function>_kernel_<n>`. This pass gives each
// kernel its module's (unique) name, so that profiles, cuobjdump and ncu
// tell the kernels apart; a kernel of unroll-gpu-map-ctas gets its name
// appended (`..._kernel_3_attention_fwd`). See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
#include "unroll/Utils/CtaKernel.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::unroll {
#define GEN_PASS_DEF_UNROLLGPUNAMEKERNELS
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct NameKernels : public mlir::unroll::impl::UnrollGPUNameKernelsBase<NameKernels> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::DenseMap<Attribute, SymbolRefAttr> renamed; // old @m::@f -> new
    for (auto gm : module.getOps<gpu::GPUModuleOp>()) {
      auto funcs = llvm::to_vector(gm.getOps<gpu::GPUFuncOp>());
      if (funcs.size() != 1 || funcs[0].getName() == gm.getName())
        continue;
      gpu::GPUFuncOp f = funcs[0];
      auto old = SymbolRefAttr::get(gm.getNameAttr(), {FlatSymbolRefAttr::get(f.getNameAttr())});
      // A kernel built by unroll-gpu-map-ctas carries its name on an op.
      StringAttr given;
      f.walk([&](Operation *op) {
        if (auto n = op->getAttrOfType<StringAttr>(unroll::cta::kName)) {
          given = n;
          op->removeAttr(unroll::cta::kName);
        }
      });
      StringAttr name = gm.getNameAttr();
      if (given)
        name = StringAttr::get(&getContext(), name.getValue() + "_" + given.getValue());
      gm.setName(name.getValue());
      f.setName(name.getValue());
      renamed[old] = SymbolRefAttr::get(name, {FlatSymbolRefAttr::get(name)});
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it = renamed.find(launch.getKernel());
      if (it != renamed.end())
        launch.setKernelAttr(it->second);
    });
  }
};

} // namespace
