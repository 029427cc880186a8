//===- UnrollModelOps.td - looped-transformer ops ----------*- tablegen -*-===//
//
// Looped transformers (P2): the model, its loop and the GPT-2 pieces of a
// block. Each piece knows its vector-Jacobian product.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_MODEL_OPS_TD
#define UNROLL_MODEL_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollBase.td"
include "unroll/Dialect/Unroll/IR/UnrollInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Looped transformers (P2): model, loop, GPT-2 pieces
//===----------------------------------------------------------------------===//
def Unroll_ModelOp : Unroll_Op<"model", [Symbol, IsolatedFromAbove, NoTerminator]> {
  let summary = "a looped (or L-layer) transformer trained on in-context prompts";
  let description = [{
    The body takes the prompt tokens Z [B, n, d] (batch B and length n are
    run-time sizes) and contains, in order: parameters, the read-in ops
    computing P, exactly one `unroll.loop`, the read-out ("head") ops, and
    `unroll.output` with the predictions [B, n, 1] ([B, n, F] with
    encoding(dense)). The head is applied to every iterate of the loop that
    the loss sees (P2: the last T).

    `--unroll-differentiate` fills `head_reverse` (Y, dpred) -> dY and
    `embed_reverse` (Z, dP) with vector-Jacobian products; the loop gets its
    own `reverse` region.

    `encoding` says how a prompt of k points becomes Z: `interleaved` (P2:
    x_1, (y_1, 0, …), x_2, …, Z [B, 2k, d], the predictions read at the x
    tokens) or `concat` (tokens (x_i, y_i) and the query (x_k, 0) last,
    Z [B, k, d + 1], the prediction read at the query) or `dense` (Z is
    data of any shape, and every entry of the predictions [B, n, F] has a
    target: the loss is their mean squared error against targets
    [B, n·F], e.g. a learned unrolling's codes against the true ones).

    ```mlir
    unroll.model @tiny {
    ^bb0(%Z: tensor<?x?x2xf32>):
      %Wi = unroll.param "_read_in.weight" {std = 0.02 : f64} : tensor<8x2xf32>
      ...
      %P = unroll.linear %Z, %Wi, %bi : (...) -> tensor<?x?x8xf32>
      %Y = unroll.loop %P iterations(4) window(2) injection(add) { ... }
      %p = unroll.linear %Y, %Wo, %bo : (...) -> tensor<?x?x1xf32>
      unroll.output %p : tensor<?x?x1xf32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       DefaultValuedAttr<Unroll_Encoding, "Encoding::interleaved">:$encoding);
  let regions = (region SizedRegion<1>:$body, AnyRegion:$head_reverse,
                        AnyRegion:$embed_reverse);
  let assemblyFormat = [{
    $sym_name (`encoding` `(` $encoding^ `)`)? attr-dict-with-keyword $body
    (`head_reverse` $head_reverse^)? (`embed_reverse` $embed_reverse^)?
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Value getPrompt() { return getBody().front().getArgument(0); }
    LoopOp getLoop();
    OutputOp getOutput();
    bool isDifferentiated() { return !getHeadReverse().empty(); }
  }];
}

def Unroll_OutputOp : Unroll_Op<"output", [Terminator, HasParent<"ModelOp">]> {
  let summary = "the model's predictions [B, n, 1] ([B, n, F] with encoding(dense))";
  let arguments = (ins TokenBatch:$predictions);
  let assemblyFormat = "$predictions attr-dict `:` type($predictions)";
}

def Unroll_LoopOp : Unroll_Op<"loop"> {
  let summary = "apply a weight-shared block b times with input injection";
  let description = [{
    With P = `input` and M the body (u -> next Y):
    `add`: Y_0 = 0, Y_t = M(Y_{t-1} + P) (P2); `none`: Y_0 = P,
    Y_t = M(Y_{t-1}) (weight tying); `mul`: Y_0 = 1, Y_t = M(Y_{t-1} * P).
    The result is Y_b.

    A loop whose state has another type than its input (`: type(P) ->
    type(Y)`, with injection(none) and a body that takes P) starts from
    Y_0 = 0 and reads P as data: a learned unrolling's measurements, with
    the codes as its state (examples/alista.mlir's @alista_model). The
    state and P share the batch and token sizes.

    `iterations` is the default b (the runtime may run
    more or fewer); the loss sees the last `window` = T iterates, the first
    b - T run without gradient. An L-layer model is a loop with
    iterations(1) window(1) injection(none) whose body holds L blocks.

    The body takes u, or (u, P): then P, the loop's input, is available in
    every iteration (an energy's center term ½‖Y − P‖² turns its gradient
    step into an input injection). It may also take the iteration index
    (u, P, k: index), t − 1 for Y_t, and then the previous iteration's
    input (u, P, k, u_prev), u_prev = u for the first: a second loop state,
    for steps with memory (conjugate gradients, momentum). A body that descends an energy
    (`unroll.descend`) names it in `energy`, which the library uses to report
    the energy of every iterate. `--unroll-differentiate` fills `reverse`
    (u, [P, [k, [u_prev,]]] dY) -> du [, du_prev], with
    `unroll.accumulate_grad` for P.

    A loop with input injection is a fixed-point iteration Y* = M(Y* + P).
    `until(tol = ε, max = m)` lets it stop there: a prompt halts once
    ‖Y_t − Y_{t−1}‖ ≤ ε ‖Y_{t−1}‖ and keeps its iterate; the loop ends when
    every prompt has halted or after m iterations (the library's
    `@M_solve`, and `unroll-run --loops auto`). `gradient(...)` chooses
    how training differentiates the loop (docs/training.md):
    `bptt` (the default: through the last T = `window` iterates),
    `implicit` (g = ∂L/∂Y* + g J solved by a damped fixed-point iteration,
    `tol`, `max`, `damping`), `jfb` (g = ∂L/∂Y*) or `phantom` (`steps` = k
    damped steps at the fixed point, `damping` = τ). The last three store one
    iteration's activations, whatever b is.

    ```mlir
    %Y = unroll.loop %P iterations(20) window(15) injection(add) {
    ^bb0(%u: tensor<?x?x256xf32>):
      ...
      unroll.yield %y : tensor<?x?x256xf32>
    }
    %Z = unroll.loop %P iterations(20) window(1) injection(add)
           until(tol = 1.0e-4, max = 500) gradient(phantom, steps = 5, damping = 0.5) ...
    ```
  }];
  let arguments = (ins TokenBatch:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$iterations,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$window,
                       DefaultValuedAttr<Unroll_Injection, "Injection::add">:$injection,
                       OptionalAttr<FlatSymbolRefAttr>:$energy,
                       OptionalAttr<F64Attr>:$halt_tol,
                       OptionalAttr<I64Attr>:$halt_max,
                       OptionalAttr<Unroll_GradientMode>:$gradient,
                       OptionalAttr<F64Attr>:$gradient_tol,
                       OptionalAttr<I64Attr>:$gradient_max,
                       OptionalAttr<I64Attr>:$phantom_steps,
                       OptionalAttr<F64Attr>:$damping);
  let results = (outs TokenBatch:$result);
  let regions = (region SizedRegion<1>:$body, AnyRegion:$reverse);
  let assemblyFormat = [{
    $input `iterations` `(` $iterations `)` `window` `(` $window `)`
    `injection` `(` $injection `)` (`energy` `(` $energy^ `)`)?
    (`until` `(` `tol` `=` $halt_tol^ `,` `max` `=` $halt_max `)`)?
    (`gradient` `(` custom<Gradient>($gradient, $gradient_tol, $gradient_max, $phantom_steps,
                                      $damping)^ `)`)?
    attr-dict `:` type($input) custom<StateType>(type($result), ref(type($input))) $body
    (`reverse` $reverse^)?
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    LogicalResult verifyFixedPoint();
    LogicalResult verifyDataInput();
    /// The gradient mode, bptt unless the op names another.
    GradientMode getGradientMode() {
      return getGradient() ? *getGradient() : GradientMode::bptt;
    }
    /// Whether the loop's input reaches every iteration (injection add or
    /// mul, or a body that takes P): only then can a fixed point depend on
    /// the prompt.
    bool hasInputInjection() {
      return getInjection() != Injection::none || getBody().getNumArguments() >= 2;
    }
    /// The state's type (the result's; P's unless the loop reads P as data).
    ::mlir::RankedTensorType getStateType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getResult().getType());
    }
    /// The loop reads P as data: its state has another type and starts at 0.
    bool readsData() { return getResult().getType() != getInput().getType(); }
    /// The body takes the iteration index (its third argument).
    bool takesIteration() { return getBody().getNumArguments() >= 3; }
    /// The body takes the previous iteration's input (its fourth argument).
    bool takesPrevious() { return getBody().getNumArguments() == 4; }
  }];
}

def Unroll_LinearOp : Unroll_Op<"linear", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure]> {
  let summary = "y = x W^T + b over the last dimension (PyTorch Linear layout)";
  let description = [{
    x [B, n, K], W [O, K], b [O] -> y [B, n, O].

    ```mlir
    %y = unroll.linear %x, %w, %b : (tensor<?x?x20xf32>, tensor<256x20xf32>, tensor<256xf32>) -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins TokenBatch:$x, Matrix:$weight, Vector:$bias);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$x `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Unroll_LayerNormOp : Unroll_Op<"layer_norm", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["x", "result"]>,
    AllTypesMatch<["gain", "bias"]>]> {
  let summary = "LayerNorm over the last dimension, with gain and bias";
  let description = [{
    ```mlir
    %y = unroll.layer_norm %x, %g, %b {eps = 1.0e-5 : f64} : tensor<?x?x256xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins TokenBatch:$x, Vector:$gain, Vector:$bias,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$x `,` $gain `,` $bias attr-dict `:` type($x) `,` type($gain)";
  let hasVerifier = 1;
}

def Unroll_AttentionOp : Unroll_Op<"attention", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure]> {
  let summary = "causal multi-head softmax attention from fused q, k, v";
  let description = [{
    qkv [B, n, 3D] holds q | k | v (each D = heads x head_dim, heads
    contiguous); out[b, i, h·hd + e] = Σ_{j<=i} softmax_j(q_i·k_j/√hd) v_j.

    ```mlir
    %a = unroll.attention %qkv heads(8) : tensor<?x?x768xf32> -> tensor<?x?x256xf32>
    ```
  }];
  let arguments = (ins TokenBatch:$qkv, ConfinedAttr<I64Attr, [IntMinValue<1>]>:$heads);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$qkv `heads` `(` $heads `)` attr-dict `:` type($qkv) `->` type($result)";
  let hasVerifier = 1;
}

def Unroll_GeluOp : Unroll_Op<"gelu", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "tanh GELU: 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))";
  let arguments = (ins TokenBatch:$x);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Unroll_AddOp : Unroll_Op<"add", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "elementwise sum (residual connections, summed cotangents)";
  let description = [{
    Any ranked f32/f64 tensors of one type: token batches in models, token
    matrices in energies (where the reverse mode sums cotangents with it).

    ```mlir
    %r = unroll.add %x, %y : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32, F64]>:$lhs, RankedTensorOf<[F32, F64]>:$rhs);
  let results = (outs RankedTensorOf<[F32, F64]>:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Unroll_PositionEmbedOp : Unroll_Op<"position_embed", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "x[b, i, :] + wpe[i, :] (learned absolute positions)";
  let description = [{
    The table has one row per position; the run-time length n must not
    exceed it.
  }];
  let arguments = (ins TokenBatch:$x, Matrix:$table);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$x `,` $table attr-dict `:` type($x) `,` type($table)";
  let hasVerifier = 1;
}

#endif // UNROLL_MODEL_OPS_TD
