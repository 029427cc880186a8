//===- UnrollBase.td - dialect, type, enums ----------------*- tablegen -*-===//
//
// The unroll dialect, its type, enums and the tensor constraints its ops use.
//
//===----------------------------------------------------------------------===//

#ifndef UNROLL_BASE_TD
#define UNROLL_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

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
    I32EnumAttrCase<"graph", 2>,
    // Every token reads the context (all tokens but the last, the query);
    // the energy sums the context's pairs (unroll.kernel_pairwise only).
    I32EnumAttrCase<"context", 3>
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_Schedule : I32EnumAttr<"Schedule", "descent schedule", [
    I32EnumAttrCase<"single", 0>, I32EnumAttrCase<"aim", 1>,
    I32EnumAttrCase<"proximal_aim", 2>, I32EnumAttrCase<"ista", 3>,
    I32EnumAttrCase<"cccp", 4>, I32EnumAttrCase<"fista", 5>,
    // Kernel energies (unroll.kernel_pairwise): a gradient step, a step of
    // exact line search, conjugate gradients, Nesterov's momentum.
    I32EnumAttrCase<"gd", 6>, I32EnumAttrCase<"line_search", 7>,
    I32EnumAttrCase<"cg", 8>, I32EnumAttrCase<"nesterov", 9>
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_KernelKind : I32EnumAttr<"KernelKind", "kernel of a kernel energy", [
    I32EnumAttrCase<"linear", 0>,       // q_i . k_j
    I32EnumAttrCase<"neg_exp", 1>,      // rho'(z) of rho(z) = -exp(-z): exp(-z)
    I32EnumAttrCase<"log_plus_two", 2>, // 1 / (z + 2)
    I32EnumAttrCase<"log_plus_one", 3>, // 1 / (z + 1)
    I32EnumAttrCase<"custom", 4>        // rho'(z) of a rho given as a region
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def Unroll_Encoding : I32EnumAttr<"Encoding", "how a prompt becomes tokens", [
    I32EnumAttrCase<"interleaved", 0>, // P2: x_1, (y_1, 0, ...), x_2, ... [B, 2k, d]
    I32EnumAttrCase<"concat", 1>,      // (x_i, y_i), the query (x_q, 0) last [B, k, d + 1]
    I32EnumAttrCase<"dense", 2>        // data Z; every prediction [B, n, F] has a target
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
    I32EnumAttrCase<"zeros", 1>, I32EnumAttrCase<"ones", 2>,
    I32EnumAttrCase<"constant", 3> // every entry `value` (a learnable step size)
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
def Unroll_GradientMode : I32EnumAttr<"GradientMode", "how a loop's gradient is computed", [
    I32EnumAttrCase<"bptt", 0>,     // back-propagation through the last T iterations
    I32EnumAttrCase<"implicit", 1>, // implicit function theorem at the fixed point
    I32EnumAttrCase<"jfb", 2>,      // Jacobian-free: dL/dY* only
    I32EnumAttrCase<"phantom", 3>   // k damped unrolled steps at the fixed point
  ]> {
  let cppNamespace = "::mlir::unroll";
}

def TokenMatrix : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[2, 3]>],
    "token matrix [n, d] (an energy's Y) or token batch [B, n, d] (a loop body's)">;

def TokenBatch : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[3]>],
                                 "3-d tensor (batch x tokens x features)">;
def PerPrompt : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[0, 1]>],
    "a value per prompt: 0-d for a token matrix, [B] for a token batch">;
def KernelMatrices : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[3, 4]>],
    "kernel matrices [H, n, n] (or, per prompt, [B, H, n, n])">;
def Vector : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[1]>], "1-d tensor">;
def Matrix : RankedTensorOf<[F32, F64], [HasAnyRankOfPred<[2]>], "2-d tensor">;

#endif // UNROLL_BASE_TD
