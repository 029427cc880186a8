//===- Passes.td - unroll transformation passes ------------*- tablegen -*-===//
#ifndef UNROLL_TRANSFORMS_PASSES_TD
#define UNROLL_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def UnrollDeriveSteps : Pass<"unroll-derive-steps", "ModuleOp"> {
  let summary = "Derive the descent steps of each energy from its schedule";
  let description = [{
    Fills the empty `steps` region of every `unroll.energy` with one iteration
    of its schedule: an `unroll.mm_step` for the pairwise term (majorize-
    minimize, P1 Thm 3.1), an `unroll.grad_step` for the quadratic term
    (P1 eq. 16) and an `unroll.prox_nonneg` for the indicator (P1 eq. 17),
    in the schedule's order. The attention weights are rho'(z): for
    rho = -exp(-z) (paper variant) the reweighted softmax of Thm 3.1; for
    every other rho, and for user-written rho, a region computing rho'(z)
    built by differentiating the rho region (forward mode). With
    `learnable`, the gradient step reads its size from the parameter
    `alpha`. With `attention(certified)` and a quadratic term, one certified
    step on the majorizer of the whole smooth part replaces the attention
    and gradient steps. Energies whose steps are already present are left
    alone.
  }];
  let options = [
    Option<"assumeUnitNorm", "assume-unit-norm", "bool", /*default=*/"false",
           "Tokens have rows of constant norm (e.g. after LayerNorm): "
           "rho = -exp(-z) gives the canonical softmax instead of the "
           "reweighted one">
  ];
  let statistics = [
    Statistic<"numEnergies", "energies", "Number of energies whose steps were derived">,
    Statistic<"numSteps", "steps", "Number of step ops created">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def UnrollInlineDescent : Pass<"unroll-inline-descent", "ModuleOp"> {
  let summary = "Replace each unroll.descend by its energy's derived steps on token batches";
  let description = [{
    A model's loop body descends an energy with `unroll.descend @E(Y, X)
    steps(k)`. This pass writes, in its place, k copies of @E's derived
    steps (its `steps` region, so --unroll-derive-steps must have run) on
    the token batch [B, n, d], chained, with X the op's second operand
    (usually the loop's input P), and records @E in the loop's `energy`
    attribute. The steps' parameters are re-declared by name in the loop
    body and so become parameters of the model.
  }];
  let statistics = [
    Statistic<"numInlined", "inlined", "unroll.descend ops replaced">,
    Statistic<"numSteps", "steps", "Copies of an energy's steps written">
  ];
}

def UnrollFixedPoint : Pass<"unroll-fixed-point", "ModuleOp"> {
  let summary = "Set (override) how every model's loop stops and is differentiated";
  let description = [{
    Rewrites the `until` and `gradient` clauses of every `unroll.loop`, so
    that the choices written in the IR can be changed from the command line
    (`--lower-to-cpu="gradient=implicit"` runs this pass):

    * `gradient=bptt|implicit|jfb|phantom`, with `:K` for phantom's steps
      and `:K:tau` for its damping (`phantom:5:0.5`); implicit takes
      `implicit:TOL:MAX`;
    * `until=TOL:MAX` (a halting rule), or `until=none` to drop one.

    A loop without input injection keeps its gradient mode under a
    fixed-point override, with a warning (its fixed point would not depend
    on the prompt). The loop's verifier then checks the result (a tolerance
    <= 0 or a maximum < 1 is an error located at the loop).
  }];
  let options = [
    Option<"gradient", "gradient", "std::string", /*default=*/"\"\"",
           "bptt | implicit[:TOL[:MAX]] | jfb | phantom[:K[:TAU]] (empty: as written)">,
    Option<"until", "until", "std::string", /*default=*/"\"\"",
           "TOL:MAX, or none (empty: as written)">
  ];
}

def UnrollDifferentiate : Pass<"unroll-differentiate", "ModuleOp"> {
  let summary = "Build the reverse-mode (VJP) regions of every model and energy";
  let description = [{
    For each `unroll.model` whose reverse regions are empty, writes
    vector-Jacobian products in reverse order: each region starts with a
    copy of its forward ops, then the ReverseMode driver asks every op for
    its rule (VJPOpInterface, implemented next to the op):

    * the loop's `reverse` region (u, [P,] dY) -> du (the lowering reads the
      activations the VJPs need from the window's tape, or recomputes them
      from this copy); the cotangent of P becomes `unroll.accumulate_grad`,
    * the model's `head_reverse` (Y, dpred) -> dY for the read-out,
    * `embed_reverse` (Z, dP) for the read-in.

    Energies get a `reverse` region (Y, X, dY') -> dY for one descent
    iteration (X's cotangent as `unroll.accumulate_grad`).
    Parameter gradients become `unroll.accumulate_grad`. The truncated loss
    over the last T iterations is assembled by the lowering from these
    regions (see docs/Rationale.md).
  }];
  let statistics = [
    Statistic<"numModels", "models", "Number of models differentiated">,
    Statistic<"numVJPs", "vjps", "Number of VJP rules applied">
  ];
}

def UnrollCPUKernelCalls : Pass<"unroll-cpu-kernel-calls", "ModuleOp"> {
  let summary = "Turn unroll.kernel_call on buffers into calls of the CPU kernels";
  let description = [{
    On bufferized IR, each `unroll.kernel_call` (written with cpu-kernels by
    --convert-unroll-to-linalg, its outputs in destination style) becomes the
    `func.call` of its kernel with index arguments only, as
    runtime/include/unroll/runtime/CpuKernels.h declares them: every input
    and output buffer passes its address (aligned pointer plus offset) and
    the strides of its outer dimensions, in the op's `abi` order.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def UnrollCPUGemm : Pass<"unroll-cpu-gemm", "ModuleOp"> {
  let summary = "Turn dense contractions into calls of the packed GEMM micro-kernel";
  let description = [{
    On bufferized IR, every linalg contraction whose body is acc + a*b (or a
    named matmul) and whose m, n and k index groups are each contiguous in
    its dense (identity-layout) operands becomes a call of
    `unroll_gemm_f32` / `unroll_gemm_f64` (runtime/cpu/Gemm.cpp; linked into
    the library by unroll-translate) with the groups collapsed to M, N, K
    and the transposes expressed as strides. Contractions with batch or
    broadcast dimensions keep their loop nests. What surrounds a linear
    layer becomes the call's epilogue (GemmFlags.h): the bias broadcast
    before it, a GELU or GELU gradient after it, and a residual sum after
    it (`r = x + (A·B + b)` with the product in a buffer nothing else reads:
    the call writes r, adding x block by block). A GELU whose input buffer
    nothing reads after it runs in place first (its output buffer takes the
    input's place), so the call writes one buffer instead of two. See
    docs/performance.md.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numCalls", "calls", "Contractions turned into GEMM calls">,
    Statistic<"numInPlaceGelus", "in-place-gelus",
              "GELUs made to write over their input, which nothing reads after them">,
    Statistic<"numDeadFills", "dead-fills", "Fills removed because the next op overwrites them">,
    Statistic<"numResidualSums", "residual-sums",
              "Products written straight into the residual sum after them">
  ];
}

def UnrollOutlineOps : Pass<"unroll-outline-ops", "ModuleOp"> {
  let summary = "Move the linalg ops of very large functions into functions of their own";
  let description = [{
    A model with many distinct layers (P2's 12-layer GPT-2) lowers to one
    entry function with thousands of loop nests. LLVM's loop passes
    invalidate ScalarEvolution per loop in time proportional to the function,
    so such a function takes tens of minutes to optimize. In functions with
    at least `min-ops` linalg ops this pass moves every linalg op into a
    private `noinline` function of its own (its operands and the values its
    body captures become arguments; constants are cloned), leaving a call.
    Each loop nest is then optimized on its own, in linear total time.
    Functions below the threshold (every looped model here) are untouched.
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"300",
           "Outline in functions with at least this many linalg ops">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numOutlined", "outlined", "linalg ops moved into functions of their own">
  ];
}

def UnrollCPUMath : Pass<"unroll-cpu-math", "ModuleOp"> {
  let summary = "f32 transcendental functions as vectorizable polynomials";
  let description = [{
    Rewrites f32 `math.exp`, `math.tanh`, `math.log`, `math.erf`, ... into
    MLIR's polynomial approximations (arith only, so LLVM's loop vectorizer
    turns them into SIMD code) instead of scalar libm calls. f64 is left to
    libm. Used by --lower-to-cpu after the loops exist.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

//===----------------------------------------------------------------------===//
// GPU lowering (docs/gpu.md)
//===----------------------------------------------------------------------===//

def UnrollGPUCheckToolkit : Pass<"unroll-gpu-check-toolkit", "ModuleOp"> {
  let summary = "Fail early, with one clear message, when the CUDA toolkit is missing";
  let description = [{
    Kernels call libdevice for exp, tanh, sqrt, ...; cubins need ptxas. Both
    come from the CUDA toolkit. Without this check the failure surfaces once
    per kernel deep in serialization.
  }];
  let options = [
    Option<"cudaPath", "cuda-path", "std::string", /*default=*/"\"/usr/local/cuda\"",
           "CUDA toolkit root">,
    Option<"format", "format", "std::string", /*default=*/"\"bin\"",
           "bin|isa|fatbin (isa does not need ptxas)">
  ];
}

def UnrollGPUStageArguments : Pass<"unroll-gpu-stage-arguments", "ModuleOp"> {
  let summary = "Copy the memref arguments of entry points into GPU-visible buffers";
  let description = [{
    Entry points (functions with `llvm.emit_c_interface`) receive ordinary
    host memory from their caller. This pass gives every memref argument a
    buffer of the same shape from `memref.alloc` (on the GPU path that is the
    runtime's pool of CUDA managed memory, reachable from kernels and from
    host code), copies the argument in on entry and, for arguments the
    function may write, back out before every return. Runs on bufferized IR.

    Arguments inside resident state (buffers from the runtime's
    `unroll_state_alloc`: weights, gradient, optimizer moments kept for a
    whole training run) are used in place: the generated code asks
    `unroll_state_resident(address)` and skips the copies and the buffer.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect", "::mlir::scf::SCFDialect",
                           "::mlir::func::FuncDialect", "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numStaged", "staged", "Arguments copied into GPU-visible buffers">,
    Statistic<"numWrittenBack", "written-back", "Arguments copied back on return">
  ];
}

def UnrollGPUGroupAllocs : Pass<"unroll-gpu-group-allocs", "func::FuncOp"> {
  let summary = "Move allocations up and deallocations down so parallel loops become adjacent";
  let description = [{
    `scf-parallel-loop-fusion` merges only parallel loops that follow each
    other with nothing with a memory effect between them, but bufferization
    puts each result's `memref.alloc` right before the loop that writes it and
    each `memref.dealloc` (or ownership-conditional `scf.if` of deallocs)
    right after its last use. This pass moves every allocation to just after
    the definition of its last operand in the same block (or the block's
    start) and every deallocation to just before the block's terminator.
    Both only lengthen buffer lifetimes within one block.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numHoisted", "hoisted", "Allocations moved up">,
    Statistic<"numSunk", "sunk", "Deallocations moved down">
  ];
}

def UnrollGPUPrepareLinalg : Pass<"unroll-gpu-prepare-linalg", "func::FuncOp"> {
  let summary = "Put parallel iterators first and give pure reductions a unit parallel loop";
  let description = [{
    The CPU lowering orders linalg iterators for contiguous inner loops, which
    can put a reduction between parallel dimensions. On the GPU every output
    element is one thread, so this pass interchanges each linalg.generic to
    have all parallel dimensions outermost and reductions innermost (then
    `convert-linalg-to-parallel-loops` yields one scf.parallel with a serial
    reduction inside). Linalg ops with no parallel dimension (a full
    reduction) are wrapped in a one-iteration scf.parallel so they also run
    on the device instead of on the host.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numInterchanged", "interchanged", "Generics interchanged">,
    Statistic<"numWrapped", "wrapped", "Reductions wrapped in a unit parallel loop">
  ];
}

def UnrollGPUFuseRows : Pass<"unroll-gpu-fuse-rows", "func::FuncOp"> {
  let summary = "Fuse a row-wise loop nest with the elementwise nests beside it over the same rows";
  let description = [{
    `scf-parallel-loop-fusion` fuses nests over the same iteration space. A
    layer norm or a softmax is a nest over rows (a reduction: one thread per
    row, a serial loop along it) next to elementwise nests over rows × columns
    (the residual add before it, the normalization or exp after it). This
    pass fuses two adjacent nests when one's space is a prefix of the
    other's (the "rows") and the wider one is elementwise (no loop inside, so
    a thread's work stays one pass over its row): the fused nest runs over
    the rows, and the wider body becomes a serial loop over the columns.
    Buffers that one nest writes and the other accesses must be addressed by
    the row indices first and through the same value in both, so every row's
    dependences stay inside its thread. Nothing with a memory effect may sit
    between the two. Applied greedily along each block.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numFused", "fused", "Pairs of nests fused over their rows">
  ];
}

def UnrollGPUMapRows : Pass<"unroll-gpu-map-rows", "func::FuncOp"> {
  let summary = "Give each row of a row kernel (layer norm, its gradient) a warp";
  let description = [{
    An outermost `scf.parallel` over rows whose body walks the row's columns
    in serial `scf.for` loops (what `unroll-gpu-fuse-rows` makes of a layer
    norm, its gradient, a softmax) becomes one `gpu.launch` with a warp per
    row: lane l takes the columns l, l + 32, ... of every column loop, a sum
    (or max) over the columns into a row value is 32 partial results
    combined by xor shuffles, and the code between the loops runs in every
    lane alike. Kernels that do not fit (a loop that is neither elementwise
    over its columns nor such a reduction, code between the loops that would
    not give the same result run 32 times) are left to
    `unroll-gpu-map-loops`: one thread per row. With `emulate-on-host` the
    same lane arithmetic runs as host loops (lanes in turn, partial results
    summed in lane order).
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block (a multiple of 32: block-size / 32 rows per block)">,
    Option<"emulateOnHost", "emulate-on-host", "bool", /*default=*/"false",
           "Emit the same row and lane index arithmetic as serial host loops "
           "instead of gpu.launch (the CPU oracle for the GPU lowering)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::NVVM::NVVMDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "row kernels given a warp per row">,
    Statistic<"numReductions", "reductions", "column loops reduced across lanes">
  ];
}

def UnrollGPUMapLoops : Pass<"unroll-gpu-map-loops", "func::FuncOp"> {
  let summary = "Turn every outermost scf.parallel into a gpu.launch";
  let description = [{
    Each outermost `scf.parallel` (after loop fusion) becomes one kernel: its
    iteration space is linearized with the last dimension fastest (so
    neighbouring threads touch neighbouring elements), split into blocks of
    `block-size` threads, and guarded against the ragged last block. Nested
    parallel loops run serially inside the thread. Empty iteration spaces
    skip the launch. Kernels are outlined by `gpu-kernel-outlining`.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"256",
           "Threads per block">,
    Option<"emulateOnHost", "emulate-on-host", "bool", /*default=*/"false",
           "Emit the same block/thread index arithmetic as serial host loops "
           "instead of gpu.launch (the CPU oracle for the GPU lowering)">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "gpu.launch ops created">
  ];
}

def UnrollGPUMapCTAs : Pass<"unroll-gpu-map-ctas", "func::FuncOp"> {
  let summary = "Turn kernels written as phases between barriers into gpu.launch";
  let description = [{
    Kernels that cooperate through shared memory (the fused attention) are
    written as a grid loop over CTAs whose body runs phases, each a loop over
    the CTA's threads, with shared buffers as marked static allocations
    (include/unroll/Utils/CtaKernel.h has the contract). Each grid
    becomes one `gpu.launch` of one block per CTA: the shared buffers become
    workgroup attributions, each phase its body with the thread index
    `threadIdx.x` followed by `gpu.barrier`. With `emulate-on-host` the
    loops stay host loops (CTAs in order, and in each phase the threads in
    order, or in reverse with `reverse-threads`: a phase whose threads
    depend on each other then gives another result). Checks the contract:
    thread counts, phase bounds, static shared buffers that are only loaded
    and stored inside their grid.
  }];
  let options = [
    Option<"emulateOnHost", "emulate-on-host", "bool", /*default=*/"false",
           "Keep the kernels as host loops (the CPU oracle)">,
    Option<"reverseThreads", "reverse-threads", "bool", /*default=*/"false",
           "Emulated: run each phase's threads last to first">
  ];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "CTA kernels mapped">
  ];
}

def UnrollGPUColumnReductions : Pass<"unroll-gpu-column-reductions", "func::FuncOp"> {
  let summary = "Reductions over many rows into few outputs as CTA kernels";
  let description = [{
    A `linalg.generic` on buffers that accumulates (out = out + f(ins))
    over reduction loops of dynamic size (or at least 256 iterations) into
    at most 8,192 outputs of static size: the bias and layer-norm gain
    gradients of the reverse iteration, Σ over batch and tokens. One thread
    per output would give 64 threads reading thousands of rows each. It
    becomes a kernel in the phase form of
    include/unroll/Utils/CtaKernel.h: 32 outputs per CTA of 512
    threads, 16 threads per output summing every 16th row into a register,
    then the 16 partial sums and the output's old value added by one thread
    per output (shared memory, no atomics). Loads stay coalesced: a warp
    reads 32 consecutive outputs of one row. The sum is reassociated.
    Such reductions next to each other over the same rows (an input read
    with the same map; a layer norm's gain and bias gradients) with
    outputs that do not overlap share one kernel.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numRewritten", "rewritten", "Reductions written as CTA kernels">,
    Statistic<"numKernels", "kernels", "CTA kernels they became">
  ];
}

def UnrollGPUFuseElementwise : Pass<"unroll-gpu-fuse-elementwise"> {
  let summary = "Elementwise fusion on tensors that leaves contractions alone";
  let description = [{
    `linalg-fuse-elementwise-ops` with one difference: a producer is never
    fused into a contraction (a generic with reductions, two inputs and an
    acc + a*b body). On the GPU those become cuBLASLt calls
    (`unroll-gpu-gemm`); a layer norm's normalization folded into the
    projection's operand, or GELU recomputed inside the down-projection's
    reduction, would keep them serial-dot-product kernels. Everything else
    (residuals into layer-norm statistics, chains of elementwise ops) still
    fuses. And one addition: `a + r`, where r is a reduction into a zero
    fill whose body only adds to its accumulator (a contraction, a column
    sum) and both a and r have no other use, becomes the reduction into a.
    The reverse iteration's gradient accumulations (grad[W] += Xᵀ·dY,
    grad[b] += Σ dY) then write the flat gradient in place: a GEMM with
    accumulate, not a product into a temporary, an add and a copy back.
    Last, the tape slots marked by convert-unroll-to-entry-points are
    written in place again (fusion gives the ops it rebuilds fresh
    outputs), and tensor.dim of dead fills is folded so that the fills go.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::affine::AffineDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numKept", "kept", "Fusions into contractions refused">
  ];
}

def UnrollGPUGemm : Pass<"unroll-gpu-gemm", "ModuleOp"> {
  let summary = "Turn dense contractions into calls of the GPU GEMM ABI (cuBLASLt)";
  let description = [{
    On bufferized IR, every linalg contraction whose body is acc + a*b (or a
    named matmul), without batch dimensions, whose m, n and k index groups
    are each contiguous in its operands and whose operands each have a
    static unit stride in their row or column group, becomes a call of
    `unroll_gpu_gemm_f32` / `_f64` (include/unroll/runtime/GpuKernels.h):
    cuBLASLt in GPU libraries, a host loop in emulated ones. This covers the
    linear layers and their input and weight gradients (the batch and token
    dimensions collapse into one, so a weight gradient is one GEMM with
    K = batch x tokens). A zero fill right before is dropped (the call
    overwrites). `precision=tf32` computes the f32 products on TF32 tensor
    cores, `precision=bf16` on bf16 ones (operands rounded to bf16, f32
    accumulation; activations and weights stay f32). With `gelu-epilogue`,
    a GELU (marked unroll.gelu) of a row-major, overwritten C right after
    the contraction moves into the call: cuBLASLt's GELU_AUX(_BIAS) epilogue writes GELU(C) to the GELU's
    output and keeps the pre-activation in C.
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32 (FP32 compute, the default), tf32 (TF32 tensor cores, f32 accumulation) "
           "or bf16 (bf16 operands on tensor cores, f32 accumulation)">,
    Option<"geluEpilogue", "gelu-epilogue", "bool", /*default=*/"false",
           "Fold GELU into the preceding GEMM's epilogue (cuBLASLt GELU_AUX)">
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numCalls", "calls", "Contractions turned into GEMM calls">
  ];
}

def UnrollGPUSerialKernels : Pass<"unroll-gpu-serial-kernels", "ModuleOp"> {
  let summary = "Run host code that reads or writes device buffers as one-thread kernels";
  let description = [{
    After `unroll-gpu-map-loops`, a little code outside kernels may still
    touch buffers: a rank-0 fill and the full reduction into it (a loss, a
    bias-gradient total) whose unit parallel loop the canonicalizer folded
    away, and the scalar arithmetic on its result. Buffers live in device
    memory, which host code cannot dereference, so each maximal run of such
    operations in a block (with the side-effect-free operations that depend
    on them) becomes one `gpu.launch` of one thread. Buffers of `index` or
    `i1` elements are the deallocation bookkeeping of the host and stay
    there. A value such a kernel computes and later code needs goes through
    a device scalar: later device code loads it (and joins a kernel in its
    turn); host control flow (a branch on an energy comparison) calls
    `unroll_gpu_read_f32/f64`, which waits for the stream and copies it
    back. A pass on the module, one function after the other: it declares
    those functions in the module, which a pass on functions (run on
    several threads at once) must not do.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numKernels", "kernels", "One-thread kernels created">,
    Statistic<"numHostReads", "host-reads", "Scalars read back for host control flow">
  ];
}

def UnrollGPUNameKernels : Pass<"unroll-gpu-name-kernels", "ModuleOp"> {
  let summary = "Give every outlined kernel its module's unique name";
  let description = [{
    `gpu-kernel-outlining` calls every kernel of a function
    `<function>_kernel` (each in a module `<function>_kernel_<n>`). This
    pass renames each kernel to its module's name and updates the launches,
    so that the runtime's profile, cuobjdump and ncu tell kernels apart.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def UnrollGPUPromoteAccumulators : Pass<"unroll-gpu-promote-accumulators", "func::FuncOp"> {
  let summary = "Carry a loop's accumulator in a register instead of memory";
  let description = [{
    A reduction lowered to loops reads and writes its accumulator element in
    memory every iteration (`store 0; for k { load; add; store }`), a
    dependent global-memory round trip per iteration on a GPU. Where the
    loop touches that element only through loads and stores at the same
    loop-invariant indices directly in its body, and the buffer is an
    allocation nothing else in the loop can reach (no other name for it:
    every use is a view, load, store, deallocation or an address taken for
    use outside the loop), the element becomes an iter_arg: loaded once
    before the loop, stored once after. Inner loops first, so nests promote
    outward. Runs on the kernels (and on the emulated pipeline's host loops,
    where the CPU tests check it).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numPromoted", "promoted", "Accumulators carried in registers">
  ];
}

def UnrollGPUParallelReductions : Pass<"unroll-gpu-parallel-reductions", "func::FuncOp"> {
  let summary = "Spread the full reductions of one-thread kernels over a block";
  let description = [{
    After `unroll-gpu-serial-kernels` and `unroll-gpu-promote-accumulators`,
    a full reduction (the loss over all prompts and positions, a
    bias-gradient total) is a one-thread kernel whose loop adds into a
    register. This pass gives such a kernel 256 threads: thread t runs the
    outer loop's iterations t, t + 256, ... from zero, `gpu.all_reduce add`
    combines the partial sums, and thread 0 runs the code before and after
    the loop with the total. Applies when the loop only adds into its one
    float iter_arg (nested loops of the same kind allowed), writes no
    memory, and uses no value computed earlier in the kernel. The sum is
    reassociated.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numParallelized", "parallelized", "One-thread reductions given a block">
  ];
}

def UnrollGPUAsync : Pass<"unroll-gpu-async", "ModuleOp"> {
  let summary = "Device memory, stream-ordered launches and one synchronization per entry point";
  let description = [{
    Every function with kernels gets one stream, `%s = gpu.wait async`, at
    its start. Launches, copies between its arguments and device buffers
    (`memref.copy` of `unroll-gpu-stage-arguments` becomes `gpu.memcpy`) and
    the allocation of every buffer (`memref.alloc` becomes
    `gpu.alloc async`, device memory from the runtime's pool) are issued on
    it; the host waits once, `gpu.wait [%s]`, before each return. All work
    of a call goes to one stream, so stream order is program order, and a
    buffer freed to the pool can be reused by a later allocation of the same
    call without a wait. Buffers of `index`/`i1` elements (deallocation
    bookkeeping) stay in host memory. The pass fails, at the operation, if
    host code still loads or stores a device buffer.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
  let statistics = [
    Statistic<"numLaunches", "launches", "Launches made asynchronous">,
    Statistic<"numAllocs", "allocs", "Allocations moved to device memory">,
    Statistic<"numCopies", "copies", "Copies issued on the stream">
  ];
}

#endif
