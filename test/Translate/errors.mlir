// unroll-translate takes fully lowered input and says what to run otherwise.
// RUN: not unroll-translate %s -o %t.so 2>&1 | FileCheck %s
// RUN: not test -e %t.so
// CHECK: errors.mlir:[[@LINE+1]]:1: error: 'unroll.energy' is not lowered to the LLVM dialect; run 'unroll-opt --lower-to-cpu' (or --lower-to-gpu) first
unroll.energy @e {
^bb0(%Y: tensor<?x2xf64>, %X: tensor<?x2xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x2xf64>
  unroll.minimize %p schedule(single) iterations(1)
}
