//===- Passes.td - unroll conversion passes ----------------*- tablegen -*-===//
#ifndef UNROLL_CONVERSION_PASSES_TD
#define UNROLL_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertUnrollToEntryPoints : Pass<"convert-unroll-to-entry-points", "ModuleOp"> {
  let summary = "Turn energies and models into C-interface entry points";
  let description = [{
    The structural half of the lowering. Every derived `unroll.energy @E`
    becomes functions on memrefs:

    * `@E_trace(X, theta, Y_out, energies)`: Y_0 = X, then
      `dim(energies) - 1` iterations of the steps, writing E(Y_t) for every
      t and the final Y;
    * `@E_weights(Y, theta, A)`: the normalized attention weights of the
      first MM step at Y;
    * `@E_vjp(X, theta, iterations, dY_T, dX, grad)` for differentiated
      energies;

    and every differentiated `unroll.model @M` becomes `@M_forward`,
    `@M_loss_grad` (truncated back-propagation through the loop, with the
    window's activations stored on a tape) and `@M_adam`. Parameters become
    views of one flat vector theta; the energy's or model's ops are copied
    into these functions unchanged, for `convert-unroll-to-linalg` to lower.
    Adds the ABI functions `unroll_abi_version` and `unroll_model_info` (JSON;
    see docs/abi.md) and erases the energies and models.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::bufferization::BufferizationDialect",
    "::mlir::LLVM::LLVMDialect"
  ];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "Where the entry points will run (cpu|gpu); recorded in the model "
           "info so the runtime can check it before calling them">,
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "The GPU the library is built for (e.g. sm_90); recorded with "
           "target=gpu">,
    Option<"recomputeWindow", "recompute-window", "bool", /*default=*/"false",
           "Recompute each window iteration's block in the backward pass from "
           "its stored input instead of storing the activations its VJPs read "
           "(less memory: one state per iteration instead of about 17 of "
           "them for a GPT-2 block; about a quarter more block evaluations "
           "per training step)">,
    Option<"modelVjp", "model-vjp", "bool", /*default=*/"true",
           "Give models @M_forward_tape and @M_vjp_tape, the vector-Jacobian "
           "product of their predictions with any cotangent in two halves "
           "that meet at the window's tape (python/unroll's autograd op; "
           "the GPU pipelines leave them out: their callers run on the CPU)">
  ];
  let statistics = [
    Statistic<"numEnergies", "energies", "Number of energies lowered">,
    Statistic<"numModels", "models", "Number of models lowered">
  ];
}

def ConvertUnrollToLinalg : Pass<"convert-unroll-to-linalg", "ModuleOp"> {
  let summary = "Lower the unroll ops inside functions to linalg on tensors";
  let description = [{
    Applies the conversion patterns of every op family
    (lib/Conversion/UnrollToLinalg/: Linear, LayerNorm, Attention,
    Elementwise, EnergyTerms, Steps) to the ops that
    `convert-unroll-to-entry-points` left in the entry points, or to any
    function that holds unroll ops on tensors. An energy term becomes its
    scalar value, a step or GPT-2 piece the linalg ops that compute it. Then
    the tape slots that the entry points marked are written in place.
    Energies and models must have been turned into entry points first.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::func::FuncDialect", "::mlir::linalg::LinalgDialect",
    "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::bufferization::BufferizationDialect"
  ];
  let options = [
    Option<"cpuKernels", "cpu-kernels", "bool", /*default=*/"false",
           "unroll.attention and unroll.attention_vjp call unroll's CPU "
           "kernels (runtime/cpu/Attention.cpp, linked by unroll-translate) "
           "instead of becoming linalg ops (--lower-to-cpu sets it)">
  ];
}

def ConvertUnrollAttentionToGPU : Pass<"convert-unroll-attention-to-gpu", "ModuleOp"> {
  let summary = "unroll.attention and its VJP as CTA kernels with shared tiles (GPU)";
  let description = [{
    The GPU pipeline's attention (lib/Conversion/UnrollToGPU/
    FusedAttention.cpp): `unroll.attention` becomes one kernel and
    `unroll.attention_vjp` three, in the phase form of
    include/unroll/Utils/CtaKernel.h (CTAs with shared tiles and barriers,
    an online softmax), instead of the [B, H, n, n] generics that
    `convert-unroll-to-linalg` writes. Runs before it, on the ops that
    `convert-unroll-to-entry-points` left; an op whose tile does not fit in
    shared memory is left for it.
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::tensor::TensorDialect", "::mlir::scf::SCFDialect",
    "::mlir::memref::MemRefDialect", "::mlir::bufferization::BufferizationDialect"
  ];
  let options = [
    Option<"attentionTile", "attention-tile", "int64_t", /*default=*/"0",
           "Rows per query and key tile (0: the largest of 32, 16, 8, ... "
           "that fits in 48 KB of shared memory)">
  ];
}

#endif // UNROLL_CONVERSION_PASSES_TD
