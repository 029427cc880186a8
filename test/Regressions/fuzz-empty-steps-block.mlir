// Found by the fuzzer: an empty `steps` block made the energy verifier read
// past the end of the block (ASan: heap-buffer-overflow). It is now a located
// diagnostic. (The same guard is on every region the verifiers inspect.)
// RUN: not unroll-opt %s 2>&1 | FileCheck %s
// CHECK: fuzz-empty-steps-block.mlir:[[@LINE+1]]:1: error: 'unroll.energy' op expected the steps region to yield the next Y of type 'tensor<?x4xf64>'
unroll.energy @general_without_region {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
  %p = unroll.pairwise %Y rho(neg_exp) : tensor<?x4xf64>
  unroll.minimize %p schedule(single) iterations(1)
} steps {
^bb0(%Y: tensor<?x4xf64>, %X: tensor<?x4xf64>):
}
