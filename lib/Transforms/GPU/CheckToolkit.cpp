//===- CheckToolkit.cpp - unroll-gpu-check-toolkit --------------------------===//
//
// Fails early, with one clear message, when libdevice or ptxas is missing.
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
#define GEN_PASS_DEF_UNROLLGPUCHECKTOOLKIT
#include "unroll/Transforms/Passes.h.inc"
} // namespace mlir::unroll

using namespace mlir;

namespace {

struct CheckToolkit : public unroll::impl::UnrollGPUCheckToolkitBase<CheckToolkit> {
  using Base::Base;
  void runOnOperation() override {
    if (format != "bin" && format != "isa" && format != "fatbin") {
      getOperation().emitError() << "unknown GPU format '" << format
                                 << "' (expected bin, isa or fatbin)";
      return signalPassFailure();
    }
    llvm::SmallString<256> libdevice(cudaPath), ptxas(cudaPath);
    llvm::sys::path::append(libdevice, "nvvm", "libdevice", "libdevice.10.bc");
    llvm::sys::path::append(ptxas, "bin", "ptxas");
    auto missing = [&](llvm::StringRef what, llvm::StringRef path) {
      getOperation().emitError()
          << "the GPU lowering needs " << what << " from the CUDA toolkit, but '" << path
          << "' does not exist; point --lower-to-gpu=cuda-path=DIR (or $CUDA_HOME) at the toolkit";
      signalPassFailure();
    };
    if (!llvm::sys::fs::exists(libdevice))
      return missing("libdevice (exp, tanh, sqrt in kernels)", libdevice);
    if (format != "isa" && !llvm::sys::fs::exists(ptxas))
      return missing("ptxas (to assemble cubins; format=isa embeds PTX instead)", ptxas);
  }
};

} // namespace
