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
    sizes it). With `support` the entries among the largest p_k% magnitudes
    of each row, p_k = min(1.2 (k + 1), 13), that are past θ_k keep their
    value instead of being shrunk (support selection, as in LISTA-CPSS and
    ALISTA); an entry below θ_k is still zeroed.

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

//===----------------------------------------------------------------------===//
// Kernel energies' steps: the pieces that gradient descent, exact line
// search, conjugate gradients and momentum are made of. Each works on a
// token matrix [n, D] or, prompt by prompt, on a token batch [B, n, D]; a
// value per prompt (an inner product, a step length) is then 0-d or [B].
//===----------------------------------------------------------------------===//

def Unroll_KernelMatrixOp : Unroll_Op<"kernel_matrix", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>,
    Pure]> {
  let summary = "masked kernel matrices K_h[i, j] = m_ij kappa(q_i^h, k_j^h)";
  let description = [{
    q = S W_q and k = S W_k (k = q without `key`), S the source's features
    lo .. hi − 1 with `features [lo, hi]`, split into `heads` column blocks; κ is `linear` (q·k) or, with a region computing ρ′(z),
    ρ′(½‖q − k‖²). Result [H, n, n] (per prompt [B, H, n, n]). The mask is
    the step's: under mask(context) every row reads the context columns.

    ```mlir
    %K = unroll.kernel_matrix %X query %Wq : tensor<6x5xf32> kernel(linear) mask(context)
           : tensor<?x6xf32> -> tensor<1x?x?xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$source, Matrix:$query, Optional<Matrix>:$key,
                       Unroll_KernelKind:$kernel,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$heads,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph,
                       OptionalAttr<DenseI64ArrayAttr>:$features, UnitAttr:$mean);
  let results = (outs KernelMatrices:$result);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $source (`features` $features^)? `query` $query `:` type($query) (`key` $key^ `:` type($key))?
    `kernel` `(` $kernel `)` ($weight_body^)? (`heads` `(` $heads^ `)`)? (`mask` `(` $mask^ `)`)?
    (`mean` $mean^)? attr-dict `:` type($source) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Unroll_KernelApplyOp : Unroll_Op<"kernel_apply", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>,
    Pure, AllTypesMatch<["z", "result"]>]> {
  let summary = "the kernel energy's Hessian on Z: sum_h K_h (Z W_v,h) W_v,h^T";
  let description = [{
    With Z = Y this is the step's gradient G of a kernel energy; with a
    direction Z, the product of the quadratic form's Hessian with it.

    ```mlir
    %G = unroll.kernel_apply %K, %Y value %Wv : tensor<6x1xf32>
           : tensor<1x?x?xf32>, tensor<?x6xf32>
    ```
  }];
  let arguments = (ins KernelMatrices:$kernels, TokenMatrix:$z, Matrix:$value);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $kernels `,` $z `value` $value `:` type($value) attr-dict `:` type($kernels) `,` type($z)
  }];
  let hasVerifier = 1;
}

def Unroll_InnerOp : Unroll_Op<"inner", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AllTypesMatch<["lhs", "rhs"]>]> {
  let summary = "<A, B> per prompt (over the context rows with `context`)";
  let arguments = (ins TokenMatrix:$lhs, TokenMatrix:$rhs, UnitAttr:$over_context);
  let results = (outs PerPrompt:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`context` $over_context^)? attr-dict `:` type($lhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Unroll_AxpyOp : Unroll_Op<"axpy", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AttrSizedOperandSegments, AllTypesMatch<["x", "result"]>]> {
  let summary = "c a X + Y: a per-prompt or learned scalar a, a constant c";
  let description = [{
    `a` is a value per prompt (0-d or [B]) or a parameter-like [1]; without
    it the coefficient is `scale` alone. Without `plus` Y is 0.

    ```mlir
    %y1 = unroll.axpy %G times %a : tensor<f32> plus %Y : tensor<?x6xf32> {scale = -1.0 : f64}
           : tensor<?x6xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$x, Optional<RankedTensorOf<[F32, F64]>>:$a,
                       Optional<TokenMatrix>:$y, DefaultValuedAttr<F64Attr, "1.0">:$scale);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = [{
    $x (`times` $a^ `:` type($a))? (`plus` $y^ `:` type($y))? attr-dict `:` type($x)
  }];
  let hasVerifier = 1;
}

def Unroll_NormalizeOp : Unroll_Op<"normalize", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>,
    Pure, AllTypesMatch<["z", "result"]>]> {
  let summary = "Z / ||Z|| per prompt (0 where ||Z||^2 <= eps)";
  let description = [{
    The norm is over the context rows with `context`; every row is scaled.
    Directions are normalized before their curvature is measured, so that
    near convergence no product of two small numbers underflows.
  }];
  let arguments = (ins TokenMatrix:$z, UnitAttr:$over_context,
                       DefaultValuedAttr<F64Attr, "1e-30">:$eps);
  let results = (outs TokenMatrix:$result);
  let assemblyFormat = "$z (`context` $over_context^)? attr-dict `:` type($z)";
}

def Unroll_RatioOp : Unroll_Op<"ratio", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure,
    AttrSizedOperandSegments, AllTypesMatch<["num", "den", "result"]>]> {
  let summary = "num / den per prompt, 0 where the direction is flat or the descent converged";
  let description = [{
    A step length: a slope over a curvature. No step is taken (the result is
    0) where the curvature is at most `eps` times `scale` (an upper bound of
    the largest curvature: the direction is flat to rounding), nor, with
    `converged(%r, %s)`, where r ≤ (eps · scale)² s: with r = ‖G‖² and
    s = ‖Y‖², the gradient is within eps of the largest it can be at Y, and
    the descent has converged to rounding. A converged step is exactly the
    identity, so that back-propagation through later iterations passes the
    gradient on unchanged instead of through directions made of rounding
    errors.

    ```mlir
    %t = unroll.ratio %num, %den scale %tr : tensor<f32> converged(%gg, %yy) : tensor<f32>
           {eps = 1.0e-05 : f64} : tensor<f32>
    ```
  }];
  let arguments = (ins PerPrompt:$num, PerPrompt:$den, Optional<PerPrompt>:$scale,
                       Optional<PerPrompt>:$residual, Optional<PerPrompt>:$size,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs PerPrompt:$result);
  let assemblyFormat = [{
    $num `,` $den (`scale` $scale^ `:` type($scale))?
    (`converged` `(` $residual^ `,` $size `)` `:` type($residual) `,` type($size))?
    attr-dict `:` type($num)
  }];
  let hasVerifier = 1;
}

def Unroll_KernelTraceOp : Unroll_Op<"kernel_trace", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>,
    Pure]> {
  let summary = "tr of the kernel energy's Hessian: sum_h tr(K_h) ||W_v,h||_F^2";
  let description = [{
    Over the context rows with `context`. For a positive semi-definite
    kernel it bounds the largest curvature; `unroll.ratio` scales its
    threshold by it. It enters steps only through comparisons (no gradient).
  }];
  let arguments = (ins KernelMatrices:$kernels, Matrix:$value, UnitAttr:$over_context);
  let results = (outs PerPrompt:$result);
  let assemblyFormat = [{
    $kernels `value` $value `:` type($value) (`context` $over_context^)? attr-dict `:` type($kernels)
    `->` type($result)
  }];
}

def Unroll_PickOp : Unroll_Op<"pick", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure]> {
  let summary = "entry min(k, K - 1) of a learned vector [K], as a [1]";
  let description = [{
    A step size per iteration: k is the steps' iteration index; iterations
    past the last entry reuse it.

    ```mlir
    %a = unroll.pick %alpha[%k] : tensor<10xf32> -> tensor<1xf32>
    ```
  }];
  let arguments = (ins Vector:$values, Index:$layer);
  let results = (outs Vector:$result);
  let assemblyFormat = "$values `[` $layer `]` attr-dict `:` type($values) `->` type($result)";
  let hasVerifier = 1;
}

def Unroll_DescendOp : Unroll_Op<"descend", [Pure, AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>, AllTypesMatch<["y", "result"]>]> {
  let summary = "descent steps of an energy on a batch of token matrices";
  let description = [{
    `steps` iterations of the derived steps of the energy `@energy` (its
    `steps` region), applied to every prompt of a token batch Y [B, n, d]
    with input X [B, n, d] (for an energy without a center term any tensor
    of Y's type; usually the loop's P). An energy whose input has its own
    width (sparse coding's measurements X [n, m] beside the codes Y [n, d])
    takes X [B, n, m]: a loop that reads P as data. This is how a model's loop body
    descends an energy: the energy's parameters become the model's (by
    name), its center term ½‖Y − X‖² with X the loop's injected input P makes
    the gradient step an input injection, and `--unroll-inline-descent`
    replaces the op by the steps (on [B, n, d] tensors) before
    differentiation.

    Steps that take the iteration index k (a step size per iteration) get
    `iteration %k`, the loop's iteration index; steps that take the previous
    iterate (conjugate gradients, momentum) also get `prev %u_prev`, the
    loop body's input of the iteration before (the loop body's third and
    fourth arguments). With steps(s), step j of iteration k has index
    k s + j.

    ```mlir
    %y = unroll.descend @icl_energy(%u, %p) steps(1) : tensor<?x?x64xf32>
    %y = unroll.descend @icl_cg(%u, %p) iteration %k prev %v : tensor<?x?x6xf32>
           : tensor<?x?x6xf32>
    %x = unroll.descend @alista(%u, %b) iteration %k
           : tensor<?x?x500xf32>, tensor<?x?x250xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$energy, TokenBatch:$y, TokenBatch:$x,
                       Optional<Index>:$iteration, Optional<TokenBatch>:$prev,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$steps);
  let results = (outs TokenBatch:$result);
  let assemblyFormat = [{
    $energy `(` $y `,` $x `)` (`steps` `(` $steps^ `)`)? (`iteration` $iteration^)?
    (`prev` $prev^ `:` type($prev))? attr-dict `:` type($y)
    custom<InputType>(type($x), ref(type($y)))
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
