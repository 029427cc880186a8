// Found by the fuzzer (unroll-fuzz, seeded from test/Transforms): an energy
// whose hand-written steps have no MM step crashed the lowering, which
// assumed one for the attention-weights entry. It now compiles, without
// that entry.
// RUN: unroll-opt %s --lower-to-cpu | FileCheck %s
// CHECK: llvm.func @_mlir_ciface_already_trace(
// CHECK-NOT: already_weights
// CHECK: \22weights\22:null
unroll.energy @already {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  unroll.yield %Y : tensor<?x2xf64>
}
