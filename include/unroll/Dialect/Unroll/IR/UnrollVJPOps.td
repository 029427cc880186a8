//===- UnrollVJPOps.td - vector-Jacobian products ----------*- tablegen -*-===//
//
// Vector-Jacobian products, written by --unroll-differentiate from the
// VJPOpInterface rules of the forward ops, and the gradient accumulation.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_VJP_OPS_TD
#define UNROLL_VJP_OPS_TD

include "unroll/Dialect/Unroll/IR/UnrollBase.td"
include "unroll/Dialect/Unroll/IR/UnrollInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

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
  let description = [{
    With `plus %a`, dx is `a` plus the layer norm's part: the rest of x's
    cotangent (in a pre-norm block, the residual branch's), summed in the
    same pass over the rows instead of by a separate `unroll.add`. The
    LayerNorm rule adds it whenever x already has a cotangent.

    ```mlir
    %dx, %dg, %db = unroll.layer_norm_vjp %x, %g, %dy plus %dres
        : (tensor<?x?x64xf32>, tensor<64xf32>, tensor<?x?x64xf32>, tensor<?x?x64xf32>)
          -> (tensor<?x?x64xf32>, tensor<64xf32>, tensor<64xf32>)
    ```
  }];
  let arguments = (ins TokenBatch:$x, Vector:$gain, TokenBatch:$dy,
                       Optional<TokenBatch>:$addend,
                       DefaultValuedAttr<F64Attr, "1e-5">:$eps);
  let results = (outs TokenBatch:$dx, Vector:$dgain, Vector:$dbias);
  let assemblyFormat = "$x `,` $gain `,` $dy (`plus` $addend^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
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


def Unroll_MMStepVJPOp : Unroll_Op<"mm_step_vjp", [Pure, AttrSizedOperandSegments,
    AttrSizedResultSegments, AllTypesMatch<["y", "dy", "dx"]>]> {
  let summary = "(dY, dW_a, dC) of a majorize-minimize attention step";
  let description = [{
    `variant(paper)`: Y' = A Y with A the row-normalized weights of the step.
    For `form(general)` the region yields (rho'(z), rho''(z)): rho'' is the
    derivative of the step's rho' region, through which the gradient reaches
    z_ij and so the tokens and the projection.

    `variant(certified)`: Y' = Y − (L_w̃ Y S + c (Y − C)) / L with
    L = 2 max_i deg_i ‖W_a‖_F² + c: the maximum passes its gradient to the
    row of largest degree, shared equally among rows that tie (exact where
    one row attains it, and where rows tie identically, as the two rows of
    a two-token step always do). Gives dC when the step has a center and
    dW for its `quad` weight.
  }];
  let arguments = (ins TokenMatrix:$y, Optional<RankedTensorOf<[F32, F64]>>:$proj,
                       TokenMatrix:$dy, Optional<TokenMatrix>:$center,
                       Optional<RankedTensorOf<[F32, F64]>>:$quad, Unroll_WeightForm:$form,
                       DefaultValuedAttr<Unroll_AttentionVariant,
                                         "AttentionVariant::paper">:$variant,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph,
                       DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$dx, Optional<RankedTensorOf<[F32, F64]>>:$dproj,
                      Optional<TokenMatrix>:$dcenter,
                      Optional<RankedTensorOf<[F32, F64]>>:$dquad);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $y (`proj` $proj^ `:` type($proj))? `,` $dy (`center` $center^ `:` type($center))?
    (`quad` $quad^ `:` type($quad))?
    `form` `(` $form `)` ($weight_body^)? (`variant` `(` $variant^ `)`)? (`mask` `(` $mask^ `)`)?
    attr-dict `:` type($y) (`->` type($dproj)^)? (`center_grad` type($dcenter)^)?
    (`quad_grad` type($dquad)^)?
  }];
}

def Unroll_GradStepVJPOp : Unroll_Op<"grad_step_vjp", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["y", "dy", "dx", "dcenter"]>]> {
  let summary = "(dY, dW, dC, dα) of a gradient step on the quadratic energy";
  let description = [{
    With a `step` operand (the learnable step size) alpha is its value and
    the op also gives its gradient `dstep`; `center` is the step's center C
    (needed for dα only).
  }];
  let arguments = (ins TokenMatrix:$y, RankedTensorOf<[F32, F64]>:$weight, TokenMatrix:$dy,
                       Optional<TokenMatrix>:$center, Optional<RankedTensorOf<[F32, F64]>>:$step,
                       F64Attr:$alpha, DefaultValuedAttr<F64Attr, "0.0">:$coeff);
  let results = (outs TokenMatrix:$dx, RankedTensorOf<[F32, F64]>:$dweight, TokenMatrix:$dcenter,
                      Optional<RankedTensorOf<[F32, F64]>>:$dstep);
  let assemblyFormat = [{
    $y `,` $weight `,` $dy (`center` $center^ `:` type($center))? (`step` $step^ `:` type($step))?
    `alpha` `(` $alpha `)` attr-dict `:` type($y) `,` type($weight) `->` type($dweight)
    (`,` type($dstep)^)?
  }];
}

def Unroll_IstaStepVJPOp : Unroll_Op<"ista_step_vjp", [Pure,
    AllTypesMatch<["y", "dy", "dx"]>, AllTypesMatch<["x", "dinput"]>,
    AllTypesMatch<["dict", "ddict"]>]> {
  let summary = "(dY, dX, dA) of a proximal-gradient (ISTA) step";
  let description = [{
    Through the soft threshold (dY' where |v| > θ), the gradient step and
    the step size 1/L(A) (dL/dA = 2 A v vᵀ at the power method's v).
  }];
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, Matrix:$dict, TokenMatrix:$dy,
                       F64Attr:$lambda, UnitAttr:$nonneg, I64Attr:$power_iterations);
  let results = (outs TokenMatrix:$dx, TokenMatrix:$dinput, Matrix:$ddict);
  let assemblyFormat = [{
    $y `,` $x `,` $dict `,` $dy `lambda` `(` $lambda `)` (`nonneg` $nonneg^)? attr-dict
    `:` type($y) `,` type($x) `,` type($dict)
  }];
}

def Unroll_ListaStepVJPOp : Unroll_Op<"lista_step_vjp", [Pure,
    AllTypesMatch<["y", "dy", "dx"]>, AllTypesMatch<["x", "dinput"]>,
    AllTypesMatch<["dict", "ddict"]>, AllTypesMatch<["weight", "dweight"]>,
    AllTypesMatch<["gamma", "theta", "dgamma", "dtheta"]>]> {
  let summary = "(dY, dX, dA, dW, dγ, dθ) of a learned proximal-gradient layer";
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, Matrix:$dict,
                       RankedTensorOf<[F32, F64]>:$weight,
                       Optional<RankedTensorOf<[F32, F64]>>:$w2, Vector:$gamma, Vector:$theta,
                       Index:$layer, TokenMatrix:$dy, UnitAttr:$nonneg, UnitAttr:$support);
  let results = (outs TokenMatrix:$dx, TokenMatrix:$dinput, Matrix:$ddict,
                      RankedTensorOf<[F32, F64]>:$dweight,
                      Optional<RankedTensorOf<[F32, F64]>>:$dw2, Vector:$dgamma,
                      Vector:$dtheta);
  let assemblyFormat = [{
    $y `,` $x `,` $dict `,` $weight (`w2` $w2^ `:` type($w2) `->` type($dw2))? `,` $gamma `,`
    $theta `,` $layer `,` $dy (`nonneg` $nonneg^)? (`support` $support^)? attr-dict `:`
    type($y) `,` type($x) `,` type($dict) `,` type($weight) `,` type($gamma)
  }];
}

def Unroll_ExtrapolateVJPOp : Unroll_Op<"extrapolate_vjp", [Pure,
    AllTypesMatch<["dy", "dx", "dprev"]>]> {
  let summary = "(dY, dY_prev) = ((1 + mu_k) dZ, -mu_k dZ)";
  let arguments = (ins TokenMatrix:$dy, Index:$layer);
  let results = (outs TokenMatrix:$dx, TokenMatrix:$dprev);
  let assemblyFormat = "$dy `layer` $layer attr-dict `:` type($dy)";
}

def Unroll_CccpStepVJPOp : Unroll_Op<"cccp_step_vjp", [Pure,
    AllTypesMatch<["y", "dy", "dx"]>, AllTypesMatch<["x", "dinput"]>]> {
  let summary = "(dY, dX) of a Hopfield CCCP step";
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$x, TokenMatrix:$dy, F64Attr:$beta,
                       F64Attr:$coeff);
  let results = (outs TokenMatrix:$dx, TokenMatrix:$dinput);
  let assemblyFormat = "$y `,` $x `,` $dy `beta` `(` $beta `)` attr-dict `:` type($y) `,` type($x)";
}

def Unroll_ProxNonNegVJPOp : Unroll_Op<"prox_nonneg_vjp", [Pure, AllTypesMatch<["y", "dy", "dx"]>]> {
  let summary = "dY of ReLU: dY' where y > 0";
  let arguments = (ins TokenMatrix:$y, TokenMatrix:$dy);
  let results = (outs TokenMatrix:$dx);
  let assemblyFormat = "$y `,` $dy attr-dict `:` type($y)";
}

def Unroll_KernelMatrixVJPOp : Unroll_Op<"kernel_matrix_vjp", [Pure,
    AllTypesMatch<["source", "dsource"]>,
    AllTypesMatch<["query", "dquery"]>]> {
  let summary = "(dS, dW_q, dW_k) of unroll.kernel_matrix given dK";
  let description = [{
    For a ρ kernel the region yields (ρ′(z), ρ″(z)): the gradient reaches
    z_ij = ½‖q_i − k_j‖² through ρ″.
  }];
  let arguments = (ins TokenMatrix:$source, Matrix:$query, Optional<Matrix>:$key,
                       KernelMatrices:$dk, Unroll_KernelKind:$kernel, I64Attr:$heads,
                       DefaultValuedAttr<Unroll_MaskKind, "MaskKind::none">:$mask,
                       OptionalAttr<ElementsAttr>:$graph,
                       OptionalAttr<DenseI64ArrayAttr>:$features, UnitAttr:$mean);
  let results = (outs TokenMatrix:$dsource, Matrix:$dquery, Optional<Matrix>:$dkey);
  let regions = (region AnyRegion:$weight_body);
  let assemblyFormat = [{
    $source (`features` $features^)? `query` $query `:` type($query) (`key` $key^ `:` type($key))? `,` $dk
    `kernel` `(` $kernel `)` ($weight_body^)? `heads` `(` $heads `)` (`mask` `(` $mask^ `)`)?
    (`mean` $mean^)? attr-dict `:` type($source) `,` type($dk) (`->` type($dkey)^)?
  }];
}

def Unroll_KernelApplyVJPOp : Unroll_Op<"kernel_apply_vjp", [Pure,
    AllTypesMatch<["kernels", "dkernels"]>, AllTypesMatch<["z", "dy", "dz"]>,
    AllTypesMatch<["value", "dvalue"]>]> {
  let summary = "(dK, dZ, dW_v) of unroll.kernel_apply given dY";
  let arguments = (ins KernelMatrices:$kernels, TokenMatrix:$z, Matrix:$value, TokenMatrix:$dy);
  let results = (outs KernelMatrices:$dkernels, TokenMatrix:$dz, Matrix:$dvalue);
  let assemblyFormat = [{
    $kernels `,` $z `value` $value `:` type($value) `,` $dy attr-dict `:` type($kernels) `,`
    type($z)
  }];
}

def Unroll_InnerVJPOp : Unroll_Op<"inner_vjp", [Pure, AllTypesMatch<["lhs", "rhs", "dlhs", "drhs"]>]> {
  let summary = "(dA, dB) = (ds B, ds A) on the rows of unroll.inner";
  let arguments = (ins TokenMatrix:$lhs, TokenMatrix:$rhs, PerPrompt:$ds, UnitAttr:$over_context);
  let results = (outs TokenMatrix:$dlhs, TokenMatrix:$drhs);
  let assemblyFormat = [{
    $lhs `,` $rhs `,` $ds (`context` $over_context^)? attr-dict `:` type($lhs) `,` type($ds)
  }];
}

def Unroll_AxpyVJPOp : Unroll_Op<"axpy_vjp", [Pure, AllTypesMatch<["x", "dy", "dx"]>]> {
  let summary = "(dX, da) of unroll.axpy given dY (Y's cotangent is dY itself)";
  let description = [{
    da is per prompt for a per-prompt a, summed over the batch for a [1].
  }];
  let arguments = (ins TokenMatrix:$x, Optional<RankedTensorOf<[F32, F64]>>:$a, TokenMatrix:$dy,
                       F64Attr:$scale);
  let results = (outs TokenMatrix:$dx, Optional<RankedTensorOf<[F32, F64]>>:$da);
  let assemblyFormat = [{
    $x (`times` $a^ `:` type($a))? `,` $dy attr-dict `:` type($x) (`->` type($da)^)?
  }];
}

def Unroll_NormalizeVJPOp : Unroll_Op<"normalize_vjp", [Pure, AllTypesMatch<["z", "dy", "dz"]>]> {
  let summary = "dZ = (dY - [rows] <dY, Z^> Z^) / ||Z|| of unroll.normalize";
  let arguments = (ins TokenMatrix:$z, TokenMatrix:$dy, UnitAttr:$over_context, F64Attr:$eps);
  let results = (outs TokenMatrix:$dz);
  let assemblyFormat = "$z `,` $dy (`context` $over_context^)? attr-dict `:` type($z)";
}

def Unroll_RatioVJPOp : Unroll_Op<"ratio_vjp", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["num", "den", "dr", "dnum", "dden"]>]> {
  let summary = "(dnum, dden) = (dr / den, -dr r / den) where the step is taken, else 0";
  let arguments = (ins PerPrompt:$num, PerPrompt:$den, Optional<PerPrompt>:$scale,
                       Optional<PerPrompt>:$residual, Optional<PerPrompt>:$size, PerPrompt:$dr,
                       F64Attr:$eps);
  let results = (outs PerPrompt:$dnum, PerPrompt:$dden);
  let assemblyFormat = [{
    $num `,` $den (`scale` $scale^ `:` type($scale))?
    (`converged` `(` $residual^ `,` $size `)` `:` type($residual) `,` type($size))? `,` $dr
    attr-dict `:` type($num)
  }];
}

def Unroll_PickVJPOp : Unroll_Op<"pick_vjp", [Pure, AllTypesMatch<["values", "dvalues"]>]> {
  let summary = "the gradient of unroll.pick: dy at entry min(k, K - 1), 0 elsewhere";
  let arguments = (ins Vector:$values, Index:$layer, Vector:$dy);
  let results = (outs Vector:$dvalues);
  let assemblyFormat = "$values `[` $layer `]` `,` $dy attr-dict `:` type($values) `,` type($dy)";
}

def Unroll_AccumulateGradOp : Unroll_Op<"accumulate_grad", [AllTypesMatch<["param", "grad"]>]> {
  let summary = "add a gradient into the gradient of a parameter or input";
  let description = [{
    `param` is an `unroll.param` (the lowering adds `grad` to its slice of
    the flat gradient vector), or an input whose gradient the lowering
    collects: in an energy's `reverse` region the input X (returned by the
    VJP entry point), in a loop's `reverse` region the injected input P
    (added to the read-in's cotangent).
  }];
  let arguments = (ins AnyRankedTensor:$param, AnyRankedTensor:$grad);
  let assemblyFormat = "$param `,` $grad attr-dict `:` type($grad)";
  let hasVerifier = 1;
}


#endif // UNROLL_VJP_OPS_TD
