//===- Pipelines.cpp - --lower-to-cpu ----------------------------------===//
#include "unroll/Pipelines/Pipelines.h"
#include "unroll/Conversion/Passes.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::unroll::buildLowerToCPUPipeline(OpPassManager &pm) {
  // Energy level → step level → linalg on tensors.
  pm.addPass(createUnrollDeriveSteps());
  pm.addPass(createUnrollDifferentiate());
  pm.addPass(createConvertUnrollToLinalg());
  // No CSE before bufferization: it would merge the identical zero-filled
  // inits of different linalg ops, which bufferization must then copy.
  pm.addPass(createCanonicalizerPass());
  // Tensors → buffers, with deallocation of every temporary.
  bufferization::OneShotBufferizationOptions bo;
  bo.allowReturnAllocsFromLoops = true; // Y_{t+1} is a new buffer each step
  // Copies become loops (memref.copy would need MLIR's runtime library).
  bo.memCpyFn = [](OpBuilder &b, Location loc, Value from, Value to) {
    b.create<linalg::CopyOp>(loc, from, to);
    return success();
  };
  pm.addPass(bufferization::createOneShotBufferizePass(bo));
  bufferization::BufferDeallocationPipelineOptions dealloc;
  bufferization::buildBufferDeallocationPipeline(pm, dealloc);
  pm.addPass(createCSEPass());
  // Loops, then the LLVM dialect.
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::unroll::registerUnrollPipelines() {
  PassPipelineRegistration<>(
      "lower-to-cpu",
      "Derive the descent steps and lower energies to the LLVM dialect for "
      "the host CPU (then: unroll-translate -o compiled.so)",
      buildLowerToCPUPipeline);
}
