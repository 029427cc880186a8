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

def Unroll_GradStepOp : Unroll_Op<"grad_step", [DeclareOpInterfaceMethods<Unroll_VJPOpInterface>, Pure, AllTypesMatch<["y", "result"]>]> {
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
