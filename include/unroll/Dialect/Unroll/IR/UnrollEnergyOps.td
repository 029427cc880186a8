//===- UnrollEnergyOps.td - energy-level ops ---------------*- tablegen -*-===//
//
// Energy level: what is minimized. An `unroll.energy` holds terms of its
// variable Y and ends with `unroll.minimize`, which states the schedule.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_ENERGY_OPS_TD
#define UNROLL_ENERGY_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollBase.td"
include "unroll/Dialect/Unroll/IR/UnrollInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

//===----------------------------------------------------------------------===//
// Energy level
//===----------------------------------------------------------------------===//

def Unroll_EnergyOp : Unroll_Op<"energy", [
    Symbol, IsolatedFromAbove, NoTerminator]> {
  let summary = "an energy E(Y) over tokens Y, with a descent schedule";
  let description = [{
    The `body` region has two block arguments: the variable `Y`
    (`tensor<n x d x f32|f64>`) and the input `X`, a 2-d tensor of the same
    element type (of Y's type, except for the terms that read X as data:
    `unroll.lsq`'s measurements, `unroll.lse`'s memory). It defines the energy terms
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
    model. A `fixed` one is data a task supplies (sparse coding's dictionary
    A, ALISTA's analytic weight W) and is never trained. The runtime
    initialises them (N(0, std²), zeros, ones, or every
    entry `value` with `init(constant)`) or loads them by name.

    ```mlir
    %Wa = unroll.param "W_a" {std = 0.3 : f64} : tensor<4x4xf64>
    ```
  }];
  let arguments = (ins StrAttr:$name, DefaultValuedAttr<F64Attr, "0.1">:$std,
                       DefaultValuedAttr<Unroll_InitKind, "InitKind::normal">:$init,
                       OptionalAttr<F64Attr>:$value, UnitAttr:$fixed);
  let results = (outs RankedTensorOf<[F32, F64]>:$result);
  let assemblyFormat =
      "$name (`init` `(` $init^ `)`)? (`fixed` $fixed^)? attr-dict `:` type($result)";
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

def Unroll_KernelPairwiseOp : Unroll_Op<"kernel_pairwise", [Pure]> {
  let summary = "kernel energy  1/2 sum_h sum_ij m_ij kappa(q_i, k_j) <v_i, v_j>";
  let description = [{
    A pairwise term whose kernel reads one projection of the tokens while
    its value reads another: with S the `source` (the variable Y, or the
    input X; with `features [lo, hi]` its features lo .. hi − 1 alone, e.g.
    the x part of concat tokens (x, y)), q = S W_q, k = S W_k (W_k = W_q
    when no `key` is given) and
    v = Y W_v, split into `heads` equal column blocks,

      E(Y) = ½ Σ_h Σ_{i,j} m_ij κ(q_i^h, k_j^h) ⟨v_i^h, v_j^h⟩.

    κ is `linear` (q·k) or, for a concave non-decreasing ρ (the built-in
    ones or `custom` with a region computing ρ(z)), the MM weight
    ρ′(½‖q − k‖²) of P1's pairwise energy. The mask m: `none`, `causal`
    (j ≤ i), `graph`, or `context`: the pairs of context tokens (every token
    but the last, the query of the concat encoding). With `mean` each row's
    kernel is divided by the number of keys it reads (the least squares'
    mean instead of its sum: the curvature no longer grows with the
    prompt's length, so one learned step size serves every length; not
    with mask(graph)).

    With the kernel read from X (or, when it reads Y, held at its current
    value during a step, as P1's MM step holds its weights), E is a
    quadratic form in the values. Its derived step moves every token by
    G = Σ_h (M ∘ K_h) V_h W_v,hᵀ, with M the step's mask: the pairs of the
    energy, except that under mask(context) the query also reads the
    context (it does not enter E; its row follows the context's descent,
    which for the linear kernel is the prediction of the weights that
    descent implies: von Oswald et al., 2023). G is ∇E for a symmetric
    kernel and mask. Schedules: `gd`, `line_search`, `cg`, `nesterov`
    (unroll.minimize).

    ```mlir
    %e = unroll.kernel_pairwise %Y kernel(linear) of %X : tensor<?x6xf32> features [0, 5]
           query %Wq : tensor<5x5xf32> value %Wv : tensor<6x1xf32> mask(context)
           : tensor<?x6xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$source, Matrix:$query,
                       Optional<Matrix>:$key, Matrix:$value, Unroll_KernelKind:$kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$features, UnitAttr:$mean,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "1">:$heads,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph);
  let results = (outs Unroll_EnergyType:$energy);
  let regions = (region AnyRegion:$rho_body);
  let assemblyFormat = [{
    $y `kernel` `(` $kernel `)` ($rho_body^)? `of` $source `:` type($source)
    (`features` $features^)? `query` $query `:` type($query) (`key` $key^ `:` type($key))?
    `value` $value `:` type($value) (`heads` `(` $heads^ `)`)? (`mask` `(` $mask^ `)`)?
    (`mean` $mean^)? attr-dict `:` type($y)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Sparse coding and Hopfield terms (X need not have Y's shape)
//===----------------------------------------------------------------------===//

def Unroll_LsqOp : Unroll_Op<"lsq", [Pure]> {
  let summary = "least-squares fit 1/2 ||X - Y A^T||^2 (rows: 1/2 ||b - A x||^2)";
  let description = [{
    The data term of sparse coding. Each row of Y is a code x [n], the
    matching row of the input X a measurement b [m], and A [m, n] the
    dictionary that maps codes to measurements. Y and X have the same number
    of rows; their feature sizes differ. `power_iterations` (default 100) is
    how many power-method steps the derived ISTA step spends on L, the
    largest eigenvalue of AᵀA.

    ```mlir
    %f = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, Matrix:$dict,
                       DefaultValuedAttr<ConfinedAttr<I64Attr, [IntMinValue<1>]>, "100">:$power_iterations);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y `,` $x `,` $dict attr-dict `:` type($y) `,` type($x) `,` type($dict)";
  let hasVerifier = 1;
}

def Unroll_L1Op : Unroll_Op<"l1", [Pure]> {
  let summary = "sparsity penalty lambda ||Y||_1 (with `nonneg`: + indicator of Y >= 0)";
  let description = [{
    Its proximal operator is the soft threshold η_θ(v) = sign(v) max(|v| − θ,
    0), with `nonneg` the one-sided max(v − θ, 0). `lambda` must be >= 0.

    ```mlir
    %r = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, F64Attr:$lambda, UnitAttr:$nonneg);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y `lambda` `(` $lambda `)` (`nonneg` $nonneg^)? attr-dict `:` type($y)";
  let hasVerifier = 1;
}

def Unroll_LseOp : Unroll_Op<"lse", [Pure]> {
  let summary = "modern Hopfield term  -1/beta sum_q log sum_i exp(beta x_i . y_q)";
  let description = [{
    The log-sum-exp of each query (a row of Y) against the memory X [N, d]
    (the energy's input: one stored pattern per row). With `unroll.sqnorm`
    (1/2 ||Y||^2) it is the energy of Ramsauer et al.'s modern Hopfield
    network, without its constant terms. `beta` > 0.

    ```mlir
    %e = unroll.lse %Y, %X beta(8.0) : tensor<?x64xf64>, tensor<?x64xf64>
    ```
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, F64Attr:$beta);
  let results = (outs Unroll_EnergyType:$energy);
  let assemblyFormat = "$y `,` $x `beta` `(` $beta `)` attr-dict `:` type($y) `,` type($x)";
  let hasVerifier = 1;
}

def Unroll_MinimizeOp : Unroll_Op<"minimize", [
    Terminator, HasParent<"EnergyOp">]> {
  let summary = "sum the energy terms and state how to descend them";
  let description = [{
    Schedules (P1): `single` — one MM attention step per iteration (Thm 3.1);
    `aim` — MM attention step, then a gradient step of size `alpha` on the
    quadratic term (Alg. 1, eqs. 15–16); `proximal_aim` — both, then the prox
    of the indicator (Alg. 2, eq. 20). Sparse coding (`unroll.lsq` +
    `unroll.l1`): `ista` — the proximal-gradient step of size 1/L, L the
    largest eigenvalue of AᵀA; `fista` — the same step at the extrapolated
    point Y + μ_k (Y − Y_prev) (Beck & Teboulle's momentum: the steps region
    takes the previous iterate as a second loop state). Hopfield (`unroll.lse` + `unroll.sqnorm`):
    `cccp` — the concave–convex step Y ← softmax(β Y Xᵀ) X / c.
    `attention(certified)` replaces the
    paper's weighted mean by a gradient step on the majorizer with step
    1/L, L an upper bound of its largest Hessian eigenvalue.

    `learnable` makes the step size a trainable parameter `alpha` (shape
    [1], initialised to `alpha`) of a model whose loop descends this energy
    (`unroll.descend`); the derived `unroll.grad_step` reads it.

    Kernel energies (one `unroll.kernel_pairwise` term), with G the step's
    gradient and A the Hessian of the kernel's quadratic form:
    `gd` — Y ← Y − α G; `line_search` — the exact minimizer along −G of
    each prompt's quadratic (a step that adapts to the prompt); `cg` —
    conjugate gradients, each prompt's direction made A-conjugate to its
    previous step Y − Y_prev (the steps region takes the previous iterate)
    and its step length found by exact line search, so that a
    d-dimensional least squares is solved in d steps; `nesterov` —
    Z = Y + μ (Y − Y_prev), Y ← Z − α G(Z). `learnable` makes α (and μ)
    parameters, `per_iteration` one per iteration (shape [iterations],
    read at the steps' iteration index; later iterations reuse the last).
    `eps(e)` (default 1e-5) is the relative curvature below which
    `line_search` and `cg` take no step along a direction, and the relative
    gradient ‖G‖ / (tr A ‖Y‖) below which they take none at all (converged
    to rounding: f32 needs about 1e-5, f64 reaches 1e-12).

    ```mlir
    unroll.minimize %e1, %e2, %r, %p schedule(proximal_aim) iterations(12) alpha(0.5)
    ```
  }];
  let arguments = (ins Variadic<Unroll_EnergyType>:$terms,
                       Unroll_Schedule:$schedule,
                       ConfinedAttr<I64Attr, [IntMinValue<1>]>:$iterations,
                       OptionalAttr<F64Attr>:$alpha,
                       UnitAttr:$learnable,
                       DefaultValuedAttr<Unroll_AttentionVariant,
                                         "AttentionVariant::paper">:$attention,
                       UnitAttr:$per_iteration,
                       OptionalAttr<F64Attr>:$momentum,
                       OptionalAttr<F64Attr>:$eps);
  let assemblyFormat = [{
    $terms `schedule` `(` $schedule `)` `iterations` `(` $iterations `)`
    (`alpha` `(` $alpha^ `)`)? (`momentum` `(` $momentum^ `)`)? (`learnable` $learnable^)?
    (`per_iteration` $per_iteration^)? (`eps` `(` $eps^ `)`)? (`attention` `(` $attention^ `)`)?
    attr-dict
  }];
  let hasVerifier = 1;
}

#endif // UNROLL_ENERGY_OPS_TD
