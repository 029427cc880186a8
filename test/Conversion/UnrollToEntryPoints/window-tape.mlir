// The training step's window stores the activations that the block's VJPs
// read (the tape) instead of recomputing the block in the backward pass:
// the recorded forward loop carries one [T, B, n, F] tensor per activation
// (9 for a GPT-2 block: the position-embedded input, both layer norms'
// outputs, QKV, the attention output, the residual, the MLP's pre- and
// post-GELU activations, the second residual), its ops write into their
// slice of it, and the reverse loop reads the slices.
// With --recompute-window only the states are stored.
//
// RUN: %python %S/../../../scripts/gen-gpt2.py t --d 3 --D 8 --heads 2 --loops 4 --window 2 --positions 6 --dtype f64 > %t.mlir
// RUN: unroll-opt %t.mlir --unroll-derive-steps --unroll-differentiate --convert-unroll-to-entry-points --convert-unroll-to-linalg | FileCheck %s
// RUN: unroll-opt %t.mlir --unroll-derive-steps --unroll-differentiate --convert-unroll-to-entry-points=recompute-window --convert-unroll-to-linalg | FileCheck %s --check-prefix=RECOMPUTE

// CHECK-LABEL: func.func @t_loss_grad
// CHECK:       %[[WIN:.*]]:11 = scf.for %[[W:arg[0-9]+]] = {{.*}} -> (tensor<?x?x8xf64>, tensor<?x?x?x8xf64>, {{.*}}tensor<?x?x?x24xf64>{{.*}}tensor<?x?x?x32xf64>, tensor<?x?x?x32xf64>, tensor<?x?x?x8xf64>)
// The QKV projection's output slot is a slice of its tape, written in place.
// CHECK:         %[[QKV:.*]] = tensor.extract_slice %{{.*}}[%[[W]], 0, 0, 0] [1, %{{.*}}, %{{.*}}, 24] [1, 1, 1, 1] : tensor<?x?x?x24xf64> to tensor<?x?x24xf64>
// CHECK:         linalg.fill ins(%{{.*}} : f64) outs(%[[QKV]] : tensor<?x?x24xf64>)
// CHECK:         tensor.insert_slice %{{.*}} into %{{.*}}[%[[W]], 0, 0, 0] [1, %{{.*}}, %{{.*}}, 24]
// CHECK:         scf.yield
// The reverse loop reads every tape.
// CHECK:       scf.for
// CHECK-COUNT-9: tensor.extract_slice %[[WIN]]#{{[0-9]+}}[
// CHECK:       window_activations\22:\22stored

// RECOMPUTE-LABEL: func.func @t_loss_grad
// RECOMPUTE:       %[[WIN:.*]]:2 = scf.for {{.*}} -> (tensor<?x?x8xf64>, tensor<?x?x?x8xf64>)
// RECOMPUTE-NOT:   tensor<?x?x?x24xf64>
// RECOMPUTE:       window_activations\22:\22recomputed
