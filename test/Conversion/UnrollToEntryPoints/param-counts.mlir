// P2's parameter counts, read from the model info the lowering embeds:
// blocks + final LayerNorm = 790,272 ("0.79M") for the looped model and
// 9,477,632 ("9.48M") for L = 12; 847,873 trainable in the looped model
// (with wpe 203·256, read-in 20·256 + 256 and read-out 256 + 1).
// RUN: unroll-opt %examples/looped_gpt2.mlir --unroll-differentiate --convert-unroll-to-entry-points | FileCheck %s --check-prefix=LOOPED
// RUN: unroll-opt %examples/gpt2_l12.mlir --unroll-differentiate --convert-unroll-to-entry-points | FileCheck %s --check-prefix=L12
// LOOPED: \22param_counts\22:{\22blocks_and_ln_f\22:790272,\22total\22:847873}
// LOOPED-SAME: \22window\22:15
// L12: \22layers\22:12
// L12-SAME: \22param_counts\22:{\22blocks_and_ln_f\22:9477632,
