//===- Pipelines.cpp - --lower-to-cpu and --lower-to-gpu ----------------===//
//
// The named pipelines, built from the option structs of Pipelines.h.
//
//===----------------------------------------------------------------------===//
#include "unroll/Pipelines/Pipelines.h"
#include "unroll/Conversion/Passes.h"
#include "unroll/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/OneShotAnalysis.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::unroll;

//===----------------------------------------------------------------------===//
// Shared stages
//===----------------------------------------------------------------------===//

/// Energy level -> step level -> linalg on tensors -> buffers.
/// `gpu` (null on the CPU path): the GPU pipeline's options (attention).
/// `gradient`, `until`: overrides of the loops' fixed-point clauses.
static void buildFrontEnd(OpPassManager &pm, const std::string &target, const std::string &chip,
                          bool recomputeWindow, const std::string &gradient,
                          const std::string &until, bool fuseElementwise = false,
                          bool cpuKernels = true, const LowerToGPUOptions *gpu = nullptr) {
  if (!gradient.empty() || !until.empty()) {
    UnrollFixedPointOptions fo;
    fo.gradient = gradient;
    fo.until = until;
    pm.addPass(createUnrollFixedPoint(fo));
  }
  pm.addPass(createUnrollDeriveSteps());
  pm.addPass(createUnrollInlineDescent());
  pm.addPass(createUnrollDifferentiate());
  ConvertUnrollToEntryPointsOptions eo;
  eo.target = target;
  eo.chip = chip;
  eo.recomputeWindow = recomputeWindow;
  eo.modelVjp = gpu == nullptr; // python/unroll calls CPU libraries
  pm.addPass(createConvertUnrollToEntryPoints(eo));
  if (gpu && gpu->attention == AttentionLowering::Fused) {
    ConvertUnrollAttentionToGPUOptions ao;
    ao.attentionTile = gpu->attentionTile;
    pm.addPass(createConvertUnrollAttentionToGPU(ao));
  }
  ConvertUnrollToLinalgOptions lo;
  lo.cpuKernels = target == "cpu" && cpuKernels;
  pm.addPass(createConvertUnrollToLinalg(lo));
  // No CSE before bufferization: it would merge the identical zero-filled
  // inits of different linalg ops, which bufferization must then copy.
  pm.addPass(createCanonicalizerPass());
  // Elementwise producers fold into their consumers (fewer kernels), but
  // not into contractions, which become library GEMMs.
  if (fuseElementwise)
    pm.addPass(createUnrollGPUFuseElementwise());
  // Tensors -> buffers, with deallocation of every temporary.
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
}

/// Host code (loops, memrefs, arith, math) -> the LLVM dialect.
/// `genericAlloc` routes memref.alloc/dealloc through
/// _mlir_memref_to_llvm_alloc/free, which the GPU runtime implements with a
/// pool of CUDA managed memory.
static void buildHostToLLVM(OpPassManager &pm, bool genericAlloc) {
  pm.addPass(arith::createArithExpandOpsPass()); // ceildivsi of the launch grid
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  FinalizeMemRefToLLVMConversionPassOptions mo;
  mo.useGenericFunctions = genericAlloc;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(mo));
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
}

//===----------------------------------------------------------------------===//
// --lower-to-cpu
//===----------------------------------------------------------------------===//

void mlir::unroll::buildLowerToCPUPipeline(OpPassManager &pm, const LowerToCPUOptions &options) {
  // (No elementwise fusion here: it folds the bias into the linear layers'
  // contractions, which then no longer match the GEMM kernel, and it
  // recomputes producers inside reductions; measured 2x slower.)
  buildFrontEnd(pm, "cpu", "", options.recomputeWindow, options.gradient, options.until,
                options.fuseElementwise);
  // The layer norm and attention kernels' calls, on the buffers
  // bufferization chose for their outputs (the tape's slots among them).
  pm.addPass(createUnrollCPUKernelCalls());
  // Dense contractions (the linear layers and their gradients) call the
  // packed GEMM micro-kernel; the rest become loops.
  pm.addPass(createUnrollCPUGemm());
  // Models with many distinct layers: one function per op, so that LLVM's
  // optimization time stays linear (a 12-layer GPT-2 took > 10 min).
  pm.addPass(createUnrollOutlineOps());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // exp, tanh, … of f32 as polynomials the loop vectorizer can vectorize
  // (libm's are scalar calls).
  pm.addPass(createUnrollCPUMath());
  // Allocations from the pool in runtime/cpu/Alloc.cpp.
  buildHostToLLVM(pm, /*genericAlloc=*/true);
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

//===----------------------------------------------------------------------===//
// --lower-to-gpu
//===----------------------------------------------------------------------===//

std::string LowerToGPUOptions::toolkit() const {
  if (!cudaPath.empty())
    return cudaPath;
  if (const char *env = getenv("CUDA_HOME"); env && *env)
    return env;
  return "/usr/local/cuda";
}

/// Bufferized linalg -> one gpu.launch per fused parallel loop nest.
static void buildKernelMapping(OpPassManager &pm, const LowerToGPUOptions &options, bool emulate) {
  pm.addPass(createUnrollGPUStageArguments());
  // Contractions call the GEMM ABI: cuBLASLt on the GPU, a host loop when
  // emulated (so the calls' strides and transposes are checked here).
  UnrollGPUGemmOptions go;
  go.precision = options.precision;
  go.geluEpilogue = options.geluEpilogue;
  pm.addPass(createUnrollGPUGemm(go));
  // Sums over many rows into few outputs (bias gradients): CTAs that split
  // the rows, instead of one thread per output.
  pm.addNestedPass<func::FuncOp>(createUnrollGPUColumnReductions());
  pm.addNestedPass<func::FuncOp>(createUnrollGPUPrepareLinalg());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToParallelLoopsPass());
  // Adjacent nests over the same space (a fill and the reduction into it,
  // chains of elementwise ops, a reduction and the row-wise op that reads
  // it) become one kernel: allocations and frees are moved out of the way
  // and loop bounds unified first.
  pm.addNestedPass<func::FuncOp>(createUnrollGPUGroupAllocs());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addNestedPass<func::FuncOp>(createParallelLoopFusionPass());
  // A row reduction (layer norm, softmax) and the elementwise nests beside
  // it over the same rows become one kernel, one thread per row; then nests
  // over the same rows fuse again.
  pm.addNestedPass<func::FuncOp>(createUnrollGPUFuseRows());
  pm.addNestedPass<func::FuncOp>(createParallelLoopFusionPass());
  // Kernels that cooperate through shared memory (fused attention).
  UnrollGPUMapCTAsOptions co;
  co.emulateOnHost = emulate;
  co.reverseThreads = emulate && options.emulateReverseThreads;
  pm.addNestedPass<func::FuncOp>(createUnrollGPUMapCTAs(co));
  // Row kernels (layer norms and their gradients): a warp per row.
  UnrollGPUMapRowsOptions ro;
  ro.blockSize = options.blockSize;
  ro.emulateOnHost = emulate;
  pm.addNestedPass<func::FuncOp>(createUnrollGPUMapRows(ro));
  UnrollGPUMapLoopsOptions mo;
  mo.blockSize = options.blockSize;
  mo.emulateOnHost = emulate;
  pm.addNestedPass<func::FuncOp>(createUnrollGPUMapLoops(mo));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (!emulate) {
    // What host code still does to buffers runs on the device too.
    pm.addPass(createUnrollGPUSerialKernels());
  }
  // Reductions accumulate in registers, not through memory.
  pm.addNestedPass<func::FuncOp>(createUnrollGPUPromoteAccumulators());
  if (!emulate) {
    // Full reductions in one-thread kernels get a block of threads.
    pm.addNestedPass<func::FuncOp>(createUnrollGPUParallelReductions());
    // Buffers move to device memory and launches onto one stream per call.
    pm.addPass(createUnrollGPUAsync());
  }
}

void mlir::unroll::buildLowerToGPUPipeline(OpPassManager &pm, const LowerToGPUOptions &options) {
  std::string chip = options.chip, format = options.format, cudaPath = options.toolkit();
  UnrollGPUCheckToolkitOptions tk;
  tk.cudaPath = cudaPath;
  tk.format = format;
  pm.addPass(createUnrollGPUCheckToolkit(tk));
  buildFrontEnd(pm, "gpu", chip, options.recomputeWindow, options.gradient, options.until,
                /*fuseElementwise=*/true,
                /*cpuKernels=*/false, &options);
  buildKernelMapping(pm, options, /*emulate=*/false);
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createUnrollGPUNameKernels());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createConvertSCFToCFPass());
  GpuNVVMAttachTargetOptions target;
  target.chip = chip;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));
  // Kernels: GPU ops, math (libdevice), memrefs -> NVVM.
  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  kernels.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createReconcileUnrealizedCastsPass());
  // Host: loops and launches -> LLVM; allocations from the managed pool.
  buildHostToLLVM(pm, /*genericAlloc=*/true);
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  GpuModuleToBinaryPassOptions bin;
  bin.toolkitPath = cudaPath;
  bin.compilationTarget = format;
  pm.addPass(createGpuModuleToBinaryPass(bin));
}

void mlir::unroll::buildLowerToGPUEmulatedPipeline(OpPassManager &pm,
                                                   const LowerToGPUOptions &options) {
  // The emulation keeps every op a loop nest, as the GPU lowering has it.
  buildFrontEnd(pm, "cpu", "", options.recomputeWindow, options.gradient, options.until,
                /*fuseElementwise=*/true,
                /*cpuKernels=*/false, &options);
  buildKernelMapping(pm, options, /*emulate=*/true);
  buildHostToLLVM(pm, /*genericAlloc=*/false);
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
}

void mlir::unroll::registerUnrollPipelines() {
  PassPipelineRegistration<LowerToCPUOptions>(
      "lower-to-cpu",
      "Derive the descent steps and gradients and lower energies and models to the LLVM "
      "dialect for the host CPU (then: unroll-translate -o compiled.so)",
      buildLowerToCPUPipeline);
  PassPipelineRegistration<LowerToGPUOptions>(
      "lower-to-gpu",
      "Derive the descent steps and gradients and lower energies and models to NVIDIA GPU "
      "kernels (NVVM -> cubin for the chip, default sm_90) with host code that launches "
      "them (then: unroll-translate -o compiled.so)",
      buildLowerToGPUPipeline);
  PassPipelineRegistration<LowerToGPUOptions>(
      "lower-to-gpu-emulated",
      "The GPU lowering with every kernel run as serial host loops over the same "
      "block/thread indices: a CPU oracle for --lower-to-gpu (tests)",
      buildLowerToGPUEmulatedPipeline);
}
