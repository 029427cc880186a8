//===- UnrollStepOps.td - descent-step ops -----------------*- tablegen -*-===//
//
// Step level: how an energy is descended. --unroll-derive-steps writes these
// into an energy's `steps` region; each op knows its vector-Jacobian product.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_STEP_OPS_TD
#define UNROLL_STEP_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollBase.td"
include "unroll/Dialect/Unroll/IR/UnrollInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Step level
//===----------------------------------------------------------------------===//

def Unroll_MMStepOp : Unroll_Op<"mm_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AttrSizedOperandSegments,
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
      Requires `form(general)`. With `quad` W (the quadratic term
      ½Tr(Y W Yᵀ) of the same energy) the step is on the majorizer of the
      whole smooth part: the gradient gains Y (W + Wᵀ)/2 and L gains
      ‖(W + Wᵀ)/2‖_F, so that (with the prox of the indicator after it) the
      whole energy cannot increase.

    ```mlir
    %u = unroll.mm_step %Y form(reweighted_softmax) mask(causal)
           : tensor<?x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y,
                       Optional<RankedTensorOf<[F32, F64]>>:$proj,
                       Optional<TokenMatrix>:$center,
                       Optional<RankedTensorOf<[F32, F64]>>:$quad,
                       Unroll_WeightForm:$form,
                       DefaultValuedAttr<Unroll_AttentionVariant,
                                         "AttentionVariant::paper">:$variant,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph,
                       DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$result);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $y (`proj` $proj^ `:` type($proj))? (`center` $center^ `:` type($center))?
    (`quad` $quad^ `:` type($quad))? `form` `(` $form `)`
    ($weight_body^)? (`variant` `(` $variant^ `)`)? (`mask` `(` $mask^ `)`)?
    attr-dict `:` type($y)
  }];
  let hasVerifier = 1;
}

def Unroll_GradStepOp : Unroll_Op<"grad_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AttrSizedOperandSegments, AllTypesMatch<["y", "result"]>]> {
  let summary = "gradient step on 1/2 Tr(Y W Y^T) + coeff/2 ||Y - C||^2";
  let description = [{
    Y <- Y W_s + alpha·coeff·C with W_s = (1 - alpha·coeff) I
    - alpha (W + W^T)/2 (P1 eq. 16; the C term is the residual of §6).
    With a `step` operand (a learnable parameter of shape [1]) alpha is its
    value and the `alpha` attribute only its initial value.

    ```mlir
    %v = unroll.grad_step %u, %Wf alpha(0.5) {coeff = 1.0 : f64}
           : tensor<?x4xf64>, tensor<4x4xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, RankedTensorOf<[F32, F64]>:$weight,
                       Optional<TokenMatrix>:$center,
                       Optional<RankedTensorOf<[F32, F64]>>:$step, F64Attr:$alpha,
                       DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $y `,` $weight (`center` $center^ `:` type($center))? (`step` $step^ `:` type($step))?
    `alpha` `(` $alpha `)` attr-dict `:` type($y) `,` type($weight)
  }];
  let hasVerifier = 1;
}

def Unroll_ProxNonNegOp : Unroll_Op<"prox_nonneg", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["y", "result"]>]> {
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

def Unroll_IstaStepOp : Unroll_Op<"ista_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AllTypesMatch<["y", "result"]>]> {
  let summary = "proximal-gradient step on 1/2 ||X - Y A^T||^2 + lambda ||Y||_1";
  let description = [{
    Y' = η_{λ/L}(Y + (X − Y Aᵀ) A / L): a gradient step of size 1/L on the
    least-squares term, then the soft threshold (with `nonneg` the
    one-sided one). L = ‖A v‖² with v from `power_iterations` steps of the
    power method on AᵀA (a lower bound of λ_max(AᵀA) that converges to it;
    any step below 2/λ_max decreases the energy).

    ```mlir
    %x = unroll.ista_step %Y, %X, %A lambda(0.1)
           : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, Matrix:$dict, F64Attr:$lambda,
                       UnitAttr:$nonneg,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "100">:$power_iterations);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $y `,` $x `,` $dict `lambda` `(` $lambda `)` (`nonneg` $nonneg^)? attr-dict
    `:` type($y) `,` type($x) `,` type($dict)
  }];
}

def Unroll_ListaStepOp : Unroll_Op<"lista_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AllTypesMatch<["y", "result"]>, AllTypesMatch<["gamma", "theta"]>]> {
  let summary = "a learned proximal-gradient layer (LISTA-CP, TiLISTA, ALISTA)";
  let description = [{
    Layer k of a learned ISTA:
    Y' = η_{θ_k}(Y + γ_k (X − Y Aᵀ) W_k), i.e. x' = η_{θ_k}(x + γ_k W_kᵀ(b − A x)),
    with W [m, n] shared by every layer (TiLISTA, ALISTA) or W [K, m, n]
    one per layer (LISTA-CP), and per-layer step sizes γ [K] and thresholds
    θ [K]. `layer` is the steps region's iteration index; layers past K − 1
    reuse the last one. With `nonneg` the threshold is one-sided.

    With `w2` W2 ([n, n] or [K, n, n]) the layer is LISTA's uncoupled form
    Y' = η_{θ_k}(γ_k X W_k + Y W2_k), i.e. x' = η(W1 b + W2 x) (A only
    sizes it). With `support` the largest p_k% magnitudes of each row,
    p_k = min(1.2 (k + 1), 13), bypass the threshold (LISTA-CPSS's support
    selection).

    ```mlir
    %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k
           : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>,
             tensor<16x250x500xf32>, tensor<16xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, Matrix:$dict,
                       RankedTensorOf<[F32, F64]>:$weight,
                       Optional<RankedTensorOf<[F32, F64]>>:$w2, Vector:$gamma, Vector:$theta,
                       Index:$layer, UnitAttr:$nonneg, UnitAttr:$support);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $y `,` $x `,` $dict `,` $weight (`w2` $w2^ `:` type($w2))? `gamma` $gamma `theta` $theta
    `layer` $layer (`nonneg` $nonneg^)? (`support` $support^)? attr-dict `:` type($y) `,`
    type($x) `,` type($dict) `,` type($weight) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Unroll_ExtrapolateOp : Unroll_Op<"extrapolate", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>,
    Pure, AllTypesMatch<["y", "prev", "result"]>]> {
  let summary = "FISTA's momentum: Y + mu_k (Y - Y_prev)";
  let description = [{
    μ_k = (t_k − 1) / t_{k+1} with t_0 = 1, t_{k+1} = (1 + √(1 + 4 t_k²)) / 2
    (Beck & Teboulle), k the steps region's iteration index: μ_0 = 0.

    ```mlir
    %z = unroll.extrapolate %Y, %Yprev layer %k : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$prev, Index:$layer);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = "$y `,` $prev `layer` $layer attr-dict `:` type($y)";
}

def Unroll_CccpStepOp : Unroll_Op<"cccp_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AllTypesMatch<["y", "result"]>]> {
  let summary = "concave-convex step of the modern Hopfield energy";
  let description = [{
    Y' = softmax(β Y Xᵀ) X / c: each query moves to the softmax-weighted mean
    of the stored patterns (the rows of X). It minimizes the convex part
    c/2 ‖Y‖² against the linearized concave log-sum-exp, so the energy never
    increases (Yuille & Rangarajan's CCCP; Ramsauer et al.'s update).

    ```mlir
    %y = unroll.cccp_step %Y, %X beta(8.0) : tensor<?x64xf64>, tensor<?x64xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, F64Attr:$beta,
                       DefaultValuedAttr<F64Attr, "1.0">:$coeff);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = "$y `,` $x `beta` `(` $beta `)` attr-dict `:` type($y) `,` type($x)";
}

def Unroll_DescendOp : Unroll_Op<"descend", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, AllTypesMatch<["y", "x", "result"]>]> {
  let summary = "descent steps of an energy on a batch of token matrices";
  let description = [{
    `steps` iterations of the derived steps of the energy `@energy` (its
    `steps` region), applied to every prompt of a token batch Y [B, n, d]
    with input X [B, n, d] (for an energy without a center term any tensor
    of Y's type; usually the loop's P). This is how a model's loop body
    descends an energy: the energy's parameters become the model's (by
    name), its center term ½‖Y − X‖² with X the loop's injected input P makes
    the gradient step an input injection, and `--unroll-inline-descent`
    replaces the op by the steps (on [B, n, d] tensors) before
    differentiation.

    ```mlir
    %y = unroll.descend @icl_energy(%u, %p) steps(1) : tensor<?x?x64xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$energy, TokenBatch:$y, TokenBatch:$x,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$steps);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = [{
    $energy `(` $y `,` $x `)` (`steps` `(` $steps^ `)`)? attr-dict `:` type($y)
  }];
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

#endif // UNROLL_STEP_OPS_TD
