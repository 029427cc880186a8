//===- UnrollOps.td - unroll dialect definition ------------*- tablegen -*-===//
//
// The unroll dialect: energies (what is minimized) and descent steps (how).
// See docs/Rationale.md for why the dialect looks as it does.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_OPS_TD
#define UNROLL_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Dialect
//===----------------------------------------------------------------------===//

def Unroll_Dialect : Dialect {
  let name = "unroll";
  let cppNamespace = "::mlir::unroll";
  let summary = "Unrolled optimization models: energies and their descent steps";
  let description = [{
    A model is written as an energy `E(Y)` over a token matrix `Y` (n × d) plus
    a schedule saying how to descend it. `--unroll-derive-steps` turns the
    energy into explicit step ops (majorize–minimize attention, gradient
    steps, proximal steps); the conversion passes lower both the energy and
    its steps to linalg and on to LLVM.
  }];
  let useDefaultTypePrinterParser = 1;
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

class Unroll_Op<string mnemonic, list<Trait> traits = []>
    : Op<Unroll_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Unroll_EnergyType : TypeDef<Unroll_Dialect, "Energy"> {
  let mnemonic = "energy";
  let summary = "a scalar energy term of the enclosing energy's variable";
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Unroll_RhoKind : I32EnumAttr<"RhoKind", "concave non-decreasing rho", [
    I32EnumAttrCase<"neg_exp", 0>,       // rho(z) = -exp(-z)
    I32EnumAttrCase<"log_plus_two", 1>,  // rho(z) = log(z + 2)
    I32EnumAttrCase<"log_plus_one", 2>,  // rho(z) = log(z + 1)
    I32EnumAttrCase<"custom", 3>         // rho given as a region
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_MaskKind : I32EnumAttr<"MaskKind", "which token pairs interact", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"causal", 1>,
    I32EnumAttrCase<"graph", 2>
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_Schedule : I32EnumAttr<"Schedule", "descent schedule", [
    I32EnumAttrCase<"single", 0>, I32EnumAttrCase<"aim", 1>,
    I32EnumAttrCase<"proximal_aim", 2>
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_AttentionVariant : I32EnumAttr<"AttentionVariant",
    "which majorize-minimize update", [
    I32EnumAttrCase<"paper", 0>,     // weighted mean, P1 eq. (10)
    I32EnumAttrCase<"certified", 1>  // gradient step on the majorizer
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_WeightForm : I32EnumAttr<"WeightForm", "attention weight form", [
    I32EnumAttrCase<"reweighted_softmax", 0>, // softmax_beta, P1 Thm 3.1
    I32EnumAttrCase<"softmax", 1>,            // canonical softmax (rows of equal norm)
    I32EnumAttrCase<"general", 2>             // w_ij = rho'(z_ij), given as a region
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_InitKind : I32EnumAttr<"InitKind", "parameter initialisation", [
    I32EnumAttrCase<"normal", 0>,  // N(0, std^2)
    I32EnumAttrCase<"zeros", 1>, I32EnumAttrCase<"ones", 2>
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_Injection : I32EnumAttr<"Injection", "input injection of a loop", [
    I32EnumAttrCase<"add", 0>,   // u = Y + P, Y_0 = 0   (P2 default)
    I32EnumAttrCase<"none", 1>,  // u = Y,     Y_0 = P   (weight tying)
    I32EnumAttrCase<"mul", 2>    // u = Y * P, Y_0 = 1
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def TokenMatrix : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[2]>],
                                  "2-d tensor (tokens x features)">;

//===----------------------------------------------------------------------===//
// Energy level
//===----------------------------------------------------------------------===//

def Unroll_EnergyOp : Unroll_Op<"energy", [
    Symbol, IsolatedFromAbove, NoTerminator]> {
  let summary = "an energy E(Y) over tokens Y, with a descent schedule";
  let description = [{
    The `body` region has two block arguments: the variable `Y` and the input
    `X` (same type, `tensor<n x d x f32|f64>`). It defines the energy terms
    and ends with `unroll.minimize`, which sums them and states the schedule.
    The `steps` region is empty as written by a user; `--unroll-derive-steps`
    fills it with one iteration of the descent, ending in `unroll.yield`.
    `--unroll-differentiate` fills `reverse` (Y, X, dY') -> (dY, dX): the
    vector-Jacobian product of one iteration, with `unroll.accumulate_grad`
    for the parameters.

    ```mlir
    unroll.energy @attn {
    ^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
      %e1 = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
      %e2 = unroll.sqnorm %Y : tensor<?x4xf64>
      unroll.minimize %e1, %e2 schedule(single) iterations(12)
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body, AnyRegion:$steps, AnyRegion:$reverse);
  let assemblyFormat = [{
    $sym_name attr-dict-with-keyword $body (`steps` $steps^)? (`reverse` $reverse^)?
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::Value getVariable() { return getBody().front().getArgument(0); }
    ::mlir::Value getInput() { return getBody().front().getArgument(1); }
    ::mlir::RankedTensorType getTokenType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getVariable().getType());
    }
    MinimizeOp getMinimize();
  }];
}

def Unroll_ParamOp : Unroll_Op<"param", [Pure]> {
  let summary = "a named, learnable parameter tensor";
  let description = [{
    Parameters are identified by name across the regions of an energy or
    model; the runtime initialises them (N(0, std²), zeros or ones) or loads
    them by name.

    ```mlir
    %Wa = unroll.param "W_a" {std = 0.3 : f64} : tensor<4x4xf64>
    ```
  }];
  let arguments = (ins StrAttr:$name, DefaultValuedAttr<F64Attr, "0.1">:$std,
                       DefaultValuedAttr<Unroll_InitKind, "InitKind::normal">:$init);
  let results = (outs RankedTensorOf<[F32, F64]>:$result);
  let assemblyFormat = "$name (`init` `(` $init^ `)`)? attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Unroll_PairwiseOp : Unroll_Op<"pairwise", [Pure]> {
  let summary = "pairwise token energy  sum_ij m_ij rho(1/2 ||(y_i - y_j) W_a||^2)";
  let description = [{
    P1 eq. (9). `rho` is one of the built-in concave non-decreasing functions
    or `custom`, in which case the region computes rho(z) for a scalar z with
    arith/math ops. The optional `proj` W_a [d, k] reparameterises the
    distance (P1 eq. 12). `mask(causal)` keeps pairs j <= i, `mask(graph)`
    the pairs whose entry in the dense 0/1 `graph` attribute is 1.

    ```mlir
    %e = unroll.pairwise %Y proj %Wa : tensor<4x4xf64> rho(custom) {
    ^bb0(%z: f64):
      %c = arith.constant 3.0 : f64
      %s = arith.addf %z, %c : f64
      %r = math.sqrt %s : f64
      unroll.yield %r : f64
    } mask(causal) : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y,
                       Optional<RankedTensorOf<[F32, F64]>>:$proj,
                       Unroll_RhoKind:$rho,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph);
  let results = (outs Unroll_EnergyType:$energy);
  let regions = (region AnyRegion:$rho_body);
  let assemblyFormat = [{
    $y (`proj` $proj^ `:` type($proj))? `rho` `(` $rho `)` ($rho_body^)?
    (`mask` `(` $mask^ `)`)? attr-dict `:` type($y)
  }];
  let hasVerifier = 1;
}

def Unroll_QuadraticOp : Unroll_Op<"quadratic", [Pure]> {
  let summary = "quadratic energy 1/2 Tr(Y W Y^T)";
  let description = [{
    The FFN energy of P1 §4.2 (without its 1/2||Y||² part, which is a
    separate `unroll.sqnorm` term). W is square, d × d.

    ```mlir
    %e = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, RankedTensorOf<[F32, F64]>:$weight);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y `,` $weight attr-dict `:` type($y) `,` type($weight)";
  let hasVerifier = 1;
}

def Unroll_SqNormOp : Unroll_Op<"sqnorm", [Pure]> {
  let summary = "convex regularizer R(Y) = coeff/2 ||Y - C||^2";
  let description = [{
    C is zero, or the given `center` (typically the input X: the residual
    variant of P1 §6). `coeff` must be positive so that R is convex.

    ```mlir
    %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> {coeff = 1.0 : f64} : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, Optional<TokenMatrix>:$center,
                       DefaultValuedAttr<F64Attr, "1.0">:$coeff);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y (`center` $center^ `:` type($center))? attr-dict `:` type($y)";
  let hasVerifier = 1;
}

def Unroll_NonNegOp : Unroll_Op<"nonneg", [Pure]> {
  let summary = "indicator of Y >= 0 (0 inside, +inf outside)";
  let description = [{
    Its proximal operator is ReLU (P1 eq. 17).

    ```mlir
    %p = unroll.nonneg %Y : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y attr-dict `:` type($y)";
}

def Unroll_MinimizeOp : Unroll_Op<"minimize", [
    Terminator, HasParent<"EnergyOp">]> {
  let summary = "sum the energy terms and state how to descend them";
  let description = [{
    Schedules (P1): `single` — one MM attention step per iteration (Thm 3.1);
    `aim` — MM attention step, then a gradient step of size `alpha` on the
    quadratic term (Alg. 1, eqs. 15–16); `proximal_aim` — both, then the prox
    of the indicator (Alg. 2, eq. 20). `attention(certified)` replaces the
    paper's weighted mean by a gradient step on the majorizer with step
    1/L, L an upper bound of its largest Hessian eigenvalue.

    ```mlir
    unroll.minimize %e1, %e2, %r, %p schedule(proximal_aim) iterations(12) alpha(0.5)
    ```
  }];
  let arguments = (ins Variadic<Unroll_EnergyType>:$terms,
                       Unroll_Schedule:$schedule,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$iterations,
                       OptionalAttr<F64Attr>:$alpha,
                       DefaultValuedAttr<Unroll_AttentionVariant,
                                         "AttentionVariant::paper">:$attention);
  let assemblyFormat = [{
    $terms `schedule` `(` $schedule `)` `iterations` `(` $iterations `)`
    (`alpha` `(` $alpha^ `)`)? (`attention` `(` $attention^ `)`)? attr-dict
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Step level
//===----------------------------------------------------------------------===//

def Unroll_MMStepOp : Unroll_Op<"mm_step", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["y", "result"]>]> {
  let summary = "majorize-minimize attention step";
  let description = [{
    With weights w_ij = m_ij rho'(z_ij), z_ij = 1/2 ||(y_i - y_j) W_a||²:

    * `variant(paper)`: y_i <- sum_j w_ij y_j / sum_j w_ij (P1 eq. 10, 12).
      `form(reweighted_softmax)` computes the normalized weights as
      softmax_j(u_i·u_j - 1/2||u_j||²) (Thm 3.1, rho = -exp(-z));
      `form(softmax)` as softmax_j(u_i·u_j) (rows of constant norm);
      `form(general)` from the region, which computes rho'(z).
    * `variant(certified)`: Y <- Y - (L_w~ Y S + c (Y - C)) / L with
      w~ = w + w^T, S = W_a W_a^T, L = 2 max_i deg_i ||W_a||_F² + c: a
      gradient step on the majorizer that cannot increase the energy.
      Requires `form(general)`.

    ```mlir
    %u = unroll.mm_step %Y form(reweighted_softmax) mask(causal)
           : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y,
                       Optional<RankedTensorOf<[F32, F64]>>:$proj,
                       Optional<TokenMatrix>:$center,
                       Unroll_WeightForm:$form,
                       DefaultValuedAttr<Unroll_AttentionVariant,
                                         "AttentionVariant::paper">:$variant,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph,
                       DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$result);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $y (`proj` $proj^ `:` type($proj))? (`center` $center^ `:` type($center))? `form` `(` $form `)`
    ($weight_body^)? (`variant` `(` $variant^ `)`)? (`mask` `(` $mask^ `)`)?
    attr-dict `:` type($y)
  }];
  let hasVerifier = 1;
}

def Unroll_GradStepOp : Unroll_Op<"grad_step", [Pure, AllTypesMatch<["y", "result"]>]> {
  let summary = "gradient step on 1/2 Tr(Y W Y^T) + coeff/2 ||Y - C||^2";
  let description = [{
    Y <- Y W_s + alpha·coeff·C with W_s = (1 - alpha·coeff) I
    - alpha (W + W^T)/2 (P1 eq. 16; the C term is the residual of §6).

    ```mlir
    %v = unroll.grad_step %u, %Wf alpha(0.5) {coeff = 1.0 : f64}
           : tensor<?x4xf64>, tensor<4x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, RankedTensorOf<[F32, F64]>:$weight,
                       Optional<TokenMatrix>:$center, F64Attr:$alpha,
                       DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $y `,` $weight (`center` $center^ `:` type($center))? `alpha` `(` $alpha `)` attr-dict
    `:` type($y) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Unroll_ProxNonNegOp : Unroll_Op<"prox_nonneg", [Pure, AllTypesMatch<["y", "result"]>]> {
  let summary = "proximal step of the non-negativity indicator: ReLU";
  let description = [{
    ```mlir
    %w = unroll.prox_nonneg %v : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = "$y attr-dict `:` type($y)";
}

def Unroll_YieldOp : Unroll_Op<"yield", [Pure, Terminator, ReturnLike]> {
  let summary = "yield a value from an unroll region";
  let description = [{
    Ends the scalar rho / rho' regions and the `steps` region of an energy.
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
  let builders = [OpBuilder<(ins), [{ build($_builder, $_state, {}); }]>];
}


//===----------------------------------------------------------------------===//
// Looped transformers (P2): model, loop, GPT-2 pieces
//===----------------------------------------------------------------------===//

def TokenBatch : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[3]>],
                                 "3-d tensor (batch x tokens x features)">;
def Vector : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[1]>], "1-d tensor">;
def Matrix : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[2]>], "2-d tensor">;

def Unroll_ModelOp : Unroll_Op<"model", [Symbol, IsolatedFromAbove, NoTerminator]> {
  let summary = "a looped (or L-layer) transformer trained on in-context prompts";
  let description = [{
    The body takes the prompt tokens Z [B, n, d] (batch B and length n are
    run-time sizes) and contains, in order: parameters, the read-in ops
    computing P, exactly one `unroll.loop`, the read-out ("head") ops, and
    `unroll.output` with the predictions [B, n, 1]. The head is applied to
    every iterate of the loop that the loss sees (P2: the last T).

    `--unroll-differentiate` fills `head_reverse` (Y, dpred) -> dY and
    `embed_reverse` (Z, dP) with vector-Jacobian products; the loop gets its
    own `reverse` region.

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
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body, AnyRegion:$head_reverse,
                        AnyRegion:$embed_reverse);
  let assemblyFormat = [{
    $sym_name attr-dict-with-keyword $body
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
  let summary = "the model's predictions [B, n, 1]";
  let arguments = (ins TokenBatch:$predictions);
  let assemblyFormat = "$predictions attr-dict `:` type($predictions)";
}

def Unroll_LoopOp : Unroll_Op<"loop", [AllTypesMatch<["input", "result"]>]> {
  let summary = "apply a weight-shared block b times with input injection";
  let description = [{
    With P = `input` and M the body (u -> next Y):
    `add`: Y_0 = 0, Y_t = M(Y_{t-1} + P) (P2); `none`: Y_0 = P,
    Y_t = M(Y_{t-1}) (weight tying); `mul`: Y_0 = 1, Y_t = M(Y_{t-1} * P).
    The result is Y_b. `iterations` is the default b (the runtime may run
    more or fewer); the loss sees the last `window` = T iterates, the first
    b - T run without gradient. An L-layer model is a loop with
    iterations(1) window(1) injection(none) whose body holds L blocks.
    `--unroll-differentiate` fills `reverse` (u, dY) -> du.

    ```mlir
    %Y = unroll.loop %P iterations(20) window(15) injection(add) {
    ^bb0(%u: tensor<?x?x256xf32>):
      ...
      unroll.yield %y : tensor<?x?x256xf32>
    }
    ```
  }];
  let arguments = (ins TokenBatch:$input,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$iterations,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$window,
                       DefaultValuedAttr<Unroll_Injection, "Injection::add">:$injection);
  let results = (outs TokenBatch:$result);
  let regions = (region SizedRegion<1>:$body, AnyRegion:$reverse);
  let assemblyFormat = [{
    $input `iterations` `(` $iterations `)` `window` `(` $window `)`
    `injection` `(` $injection `)` attr-dict `:` type($input) $body
    (`reverse` $reverse^)?
  }];
  let hasRegionVerifier = 1;
}

def Unroll_LinearOp : Unroll_Op<"linear", [Pure]> {
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

def Unroll_LayerNormOp : Unroll_Op<"layer_norm", [Pure, AllTypesMatch<["x", "result"]>,
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

def Unroll_AttentionOp : Unroll_Op<"attention", [Pure]> {
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

def Unroll_GeluOp : Unroll_Op<"gelu", [Pure, AllTypesMatch<["x", "result"]>]> {
  let summary = "tanh GELU: 0.5 x (1 + tanh(√(2/π)(x + 0.044715 x³)))";
  let arguments = (ins TokenBatch:$x);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$x attr-dict `:` type($x)";
}

def Unroll_AddOp : Unroll_Op<"add", [Pure, AllTypesMatch<["lhs", "rhs", "result"]>]> {
  let summary = "elementwise sum (residual connections)";
  let arguments = (ins TokenBatch:$lhs, TokenBatch:$rhs);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Unroll_PositionEmbedOp : Unroll_Op<"position_embed", [Pure, AllTypesMatch<["x", "result"]>]> {
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

//===----------------------------------------------------------------------===//
// Vector-Jacobian products (written by --unroll-differentiate)
//===----------------------------------------------------------------------===//

def Unroll_LinearVJPOp : Unroll_Op<"linear_vjp", [Pure]> {
  let summary = "(dx, dW, db) of y = x W^T + b given dy";
  let arguments = (ins TokenBatch:$x, Matrix:$weight, TokenBatch:$dy);
  let results = (outs TokenBatch:$dx, Matrix:$dweight, Vector:$dbias);
  let assemblyFormat = "$x `,` $weight `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Unroll_LayerNormVJPOp : Unroll_Op<"layer_norm_vjp", [Pure]> {
  let summary = "(dx, dgain, dbias) of LayerNorm given dy";
  let arguments = (ins TokenBatch:$x, Vector:$gain, TokenBatch:$dy,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs TokenBatch:$dx, Vector:$dgain, Vector:$dbias);
  let assemblyFormat = "$x `,` $gain `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Unroll_AttentionVJPOp : Unroll_Op<"attention_vjp", [Pure]> {
  let summary = "dqkv of causal multi-head attention given dout";
  let arguments = (ins TokenBatch:$qkv, TokenBatch:$dy, I64Attr:$heads);
  let results = (outs TokenBatch:$dqkv);
  let assemblyFormat = "$qkv `,` $dy `heads` `(` $heads `)` attr-dict `:` functional-type(operands, results)";
}

def Unroll_GeluVJPOp : Unroll_Op<"gelu_vjp", [Pure]> {
  let summary = "dx of tanh GELU given dy";
  let arguments = (ins TokenBatch:$x, TokenBatch:$dy);
  let results = (outs TokenBatch:$dx);
  let assemblyFormat = "$x `,` $dy attr-dict `:` functional-type(operands, results)";
}

def Unroll_PositionEmbedVJPOp : Unroll_Op<"position_embed_vjp", [Pure]> {
  let summary = "dtable of position_embed given dy (sums over the batch)";
  let arguments = (ins TokenBatch:$dy, Matrix:$table);
  let results = (outs Matrix:$dtable);
  let assemblyFormat = "$dy `,` $table attr-dict `:` functional-type(operands, results)";
}


def Unroll_MMStepVJPOp : Unroll_Op<"mm_step_vjp", [Pure,
    AllTypesMatch<["y", "dy", "dx"]>]> {
  let summary = "(dY, dW_a) of a majorize-minimize attention step (paper variant)";
  let description = [{
    Y' = A Y with A the row-normalized weights of the step. For
    `form(general)` the region yields (rho'(z), rho''(z)): rho'' is the
    derivative of the step's rho' region, through which the gradient reaches
    z_ij and so the tokens and the projection.
  }];
  let arguments = (ins TokenMatrix:$y, Optional<RankedTensorOf<[F32, F64]>>:$proj,
                       TokenMatrix:$dy, Unroll_WeightForm:$form,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph);
  let results = (outs TokenMatrix:$dx, Optional<RankedTensorOf<[F32, F64]>>:$dproj);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $y (`proj` $proj^ `:` type($proj))? `,` $dy `form` `(` $form `)`
    ($weight_body^)? (`mask` `(` $mask^ `)`)?
    attr-dict `:` type($y) (`->` type($dproj)^)?
  }];
}

def Unroll_GradStepVJPOp : Unroll_Op<"grad_step_vjp", [Pure,
    AllTypesMatch<["y", "dy", "dx", "dcenter"]>]> {
  let summary = "(dY, dW, dC) of a gradient step on the quadratic energy";
  let arguments = (ins TokenMatrix:$y, RankedTensorOf<[F32, F64]>:$weight, TokenMatrix:$dy,
                       F64Attr:$alpha, DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$dx, RankedTensorOf<[F32, F64]>:$dweight, TokenMatrix:$dcenter);
  let assemblyFormat = [{
    $y `,` $weight `,` $dy `alpha` `(` $alpha `)` attr-dict `:` type($y) `,` type($weight)
    `->` type($dweight)
  }];
}

def Unroll_ProxNonNegVJPOp : Unroll_Op<"prox_nonneg_vjp", [Pure, AllTypesMatch<["y", "dy", "dx"]>]> {
  let summary = "dY of ReLU: dY' where y > 0";
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$dy);
  let results = (outs TokenMatrix:$dx);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
}

def Unroll_AccumulateGradOp : Unroll_Op<"accumulate_grad", [AllTypesMatch<["param", "grad"]>]> {
  let summary = "add a gradient into the gradient of a parameter or input";
  let description = [{
    `param` is an `unroll.param` (the lowering adds `grad` to its slice of
    the flat gradient vector) or, in an energy's `reverse` region, the input
    X (its gradient is returned by the VJP entry point).
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$grad);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
  let hasVerifier = 1;
}

#endif // UNROLL_OPS_TD
