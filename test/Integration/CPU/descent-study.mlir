// The descent study of P1 Thm 3.1: over 10,000 random (n, d, scale) cases,
// one compiled majorize-minimize step of E1(Y) = Σ_ij ρ(½‖y_i − y_j‖²) + ½‖Y‖²
// for each built-in ρ. The checker recomputes the step and both energies with
// its own plain loops, and counts steps that increased E. The paper's weighted
// mean may increase E in rare cases; the certified step must never do so
// beyond rounding (1e-12 relative). Counts are reported in docs/descent.md.
//
// RUN: unroll-opt %s --lower-to-cpu -o %t.mlir
// RUN: unroll-translate %t.mlir -o %t.so
// RUN: unroll-energy-check --study %t.so --energy paper_neg_exp --cases 10000 | FileCheck %s --check-prefix=PAPER
// RUN: unroll-energy-check --study %t.so --energy paper_log2 --cases 10000 | FileCheck %s --check-prefix=PAPER
// RUN: unroll-energy-check --study %t.so --energy paper_log1 --cases 10000 | FileCheck %s --check-prefix=PAPER
// RUN: unroll-energy-check --study %t.so --energy certified_neg_exp --cases 10000 --expect-no-increase | FileCheck %s --check-prefix=CERT
// RUN: unroll-energy-check --study %t.so --energy certified_log2 --cases 10000 --expect-no-increase | FileCheck %s --check-prefix=CERT
// RUN: unroll-energy-check --study %t.so --energy certified_log1 --cases 10000 --expect-no-increase | FileCheck %s --check-prefix=CERT
// RUN: unroll-energy-check --study %t.so --energy certified_eq20 --cases 10000 --expect-no-increase | FileCheck %s --check-prefix=CERT
//
// PAPER: descent study @paper_{{.*}} 10000 random cases
// PAPER: steps that increased E:
// PAPER: compiled step vs reference step: {{.*}} mismatches 0
// PAPER: PASS
// CERT: descent study @certified_{{.*}} 10000 random cases
// CERT: steps that increased E: {{[0-9]+}} (beyond 1e-12 relative: 0;
// CERT: compiled step vs reference step: {{.*}} mismatches 0
// CERT: PASS

unroll.energy @paper_neg_exp {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(neg_exp) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1)
}
unroll.energy @paper_log2 {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(log_plus_two) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1)
}
unroll.energy @paper_log1 {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(log_plus_one) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1)
}
unroll.energy @certified_neg_exp {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(neg_exp) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1) attention(certified)
}
unroll.energy @certified_log2 {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(log_plus_two) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1) attention(certified)
}
unroll.energy @certified_log1 {
^bb0(%Y: tensor<?x?xf64>, %X: tensor<?x?xf64>):
  %e = unroll.pairwise %Y rho(log_plus_one) : tensor<?x?xf64>
  %r = unroll.sqnorm %Y : tensor<?x?xf64>
  unroll.minimize %e, %r schedule(single) iterations(1) attention(certified)
}

// P1 eq. 20's energy with the residual term, certified: one step on the
// majorizer of the whole smooth part, then the prox of the indicator. The
// whole energy must never increase (the guarantee a trained energy-derived
// model relies on; docs/experiments/energy-icl/).
unroll.energy @certified_eq20 {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %Wa = unroll.param "W_a" {std = 0.6 : f64} : tensor<4x4xf64>
  %Wf = unroll.param "W_f" {std = 0.5 : f64} : tensor<4x4xf64>
  %e = unroll.pairwise %Y proj %Wa : tensor<4x4xf64> rho(neg_exp) mask(causal) : tensor<?x4xf64>
  %q = unroll.quadratic %Y, %Wf : tensor<?x4xf64>, tensor<4x4xf64>
  %r = unroll.sqnorm %Y center %X : tensor<?x4xf64> : tensor<?x4xf64>
  %n = unroll.nonneg %Y : tensor<?x4xf64>
  unroll.minimize %e, %q, %r, %n schedule(proximal_aim) iterations(1) attention(certified)
}
