//===- InitAll.cpp - register what unroll's tools use --------------------===//
#include "unroll/InitAll.h"
#include "unroll/Conversion/Passes.h"
#include "unroll/Dialect/Unroll/IR/UnrollDialect.h"
#include "unroll/Dialect/Unroll/IR/UnrollOps.h"
#include "unroll/Pipelines/Pipelines.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void mlir::unroll::registerUnrollDialects(DialectRegistry &registry) {
  registry
      .insert<UnrollDialect, arith::ArithDialect, math::MathDialect, func::FuncDialect,
              linalg::LinalgDialect, tensor::TensorDialect, scf::SCFDialect, memref::MemRefDialect,
              bufferization::BufferizationDialect, cf::ControlFlowDialect, LLVM::LLVMDialect,
              affine::AffineDialect, index::IndexDialect, gpu::GPUDialect, NVVM::NVVMDialect>();
  // The GPU path serializes kernels (NVVM -> LLVM IR -> PTX/cubin) and
  // embeds them in host LLVM IR.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  registerKernelCallBufferization(registry);
}

void mlir::unroll::registerAllUnrollPasses() {
  registerUnrollPasses();
  registerUnrollConversionPasses();
  registerUnrollPipelines();
  // Upstream passes used by tests and by people stepping through the pipeline.
  registerCanonicalizerPass();
  registerCSEPass();
  bufferization::registerOneShotBufferize();
}
