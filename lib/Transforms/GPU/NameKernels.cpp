//===- NameKernels.cpp - unroll-gpu-name-kernels ----------------------------===//
//
// gpu-kernel-outlining names every kernel of a function `<function>_kernel`,
// each in its own module `<function>_kernel_<n>`. This pass gives each
// kernel its module's (unique) name, so that profiles, cuobjdump and ncu
// tell the kernels apart. See docs/gpu.md.
//
//===----------------------------------------------------------------------===//
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
    llvm::DenseMap<Attribute, StringAttr> renamed; // old @m::@f -> new name
    for (auto gm : module.getOps<gpu::GPUModuleOp>()) {
      auto funcs = llvm::to_vector(gm.getOps<gpu::GPUFuncOp>());
      if (funcs.size() != 1 || funcs[0].getName() == gm.getName())
        continue;
      gpu::GPUFuncOp f = funcs[0];
      auto old = SymbolRefAttr::get(gm.getNameAttr(), {FlatSymbolRefAttr::get(f.getNameAttr())});
      renamed[old] = gm.getNameAttr();
      f.setName(gm.getName());
    }
    module.walk([&](gpu::LaunchFuncOp launch) {
      auto it = renamed.find(launch.getKernel());
      if (it == renamed.end())
        return;
      launch.setKernelAttr(
          SymbolRefAttr::get(launch.getKernelModuleName(), {FlatSymbolRefAttr::get(it->second)}));
    });
  }
};

} // namespace
