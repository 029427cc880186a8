//===- Passes.td - unroll conversion passes ----------------*- tablegen -*-===//
#ifndef UNROLL_CONVERSION_PASSES_TD
#define UNROLL_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertUnrollToLinalg : Pass<"convert-unroll-to-linalg", "ModuleOp"> {
  let summary = "Lower derived energies to functions over linalg on tensors";
  let description = [{
    For every `unroll.energy @E` whose steps are derived, emits C-interface
    functions on memrefs:

    * `@E_trace(X, params..., Y_out, energies)`: Y_0 = X, then
      `dim(energies) - 1` iterations of the steps, writing E(Y_t) for every
      t and the final Y;
    * `@E_weights(Y, params..., A)`: the normalized attention weights of the
      first MM step at Y;

    and the ABI functions `unroll_abi_version` and `unroll_model_info`
    (JSON; see docs/abi.md). Energy terms and step ops become linalg ops on
    tensors; the energy ops are erased.
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
    Option<"cpuKernels", "cpu-kernels", "bool", /*default=*/"true",
           "With target=cpu, models' attention and attention_vjp call unroll's "
           "CPU kernels (runtime/cpu/Attention.cpp, linked by unroll-translate) "
           "instead of becoming linalg ops">,
    Option<"recomputeWindow", "recompute-window", "bool", /*default=*/"false",
           "Recompute each window iteration's block in the backward pass from "
           "its stored input instead of storing the activations its VJPs read "
           "(less memory: one state per iteration instead of about 17 of "
           "them for a GPT-2 block; about a quarter more block evaluations "
           "per training step)">
  ];
  let statistics = [
    Statistic<"numEnergies", "energies", "Number of energies lowered">,
    Statistic<"numModels", "models", "Number of models lowered">
  ];
}

#endif
