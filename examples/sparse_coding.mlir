// Sparse coding as an energy (issue 17): each row of Y is a code x ∈ ℝ⁵⁰⁰,
// the matching row of X its measurement b ∈ ℝ²⁵⁰, A [250, 500] the
// dictionary (its parameter "A"; --task sparse_coding draws it):
//
//   E(x) = ½‖b − A x‖² + λ‖x‖₁
//
// schedule(ista) derives the proximal-gradient step
//   x ← η_{λ/L}(x + Aᵀ(b − A x) / L),  L = λ_max(AᵀA) (power method),
// with η the soft threshold; --unroll-differentiate gives its gradient
// (through η, the gradient step and L(A)).
//
//   unroll-opt sparse_coding.mlir --lower-to-cpu -o sc.mlir
//   unroll-translate sc.mlir -o sc.so
//   unroll-run sc.so --task sparse_coding --out out/ista
//   unroll-run sc.so --task sparse_coding --energy fista --out out/fista
//
// @fista: schedule(fista) derives the same step at the extrapolated point
// x + μ_k (x − x_prev) (Beck & Teboulle's momentum); the previous iterate is
// the descent loop's second state.
unroll.energy @sparse_coding {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
}

unroll.energy @fista {
^bb0(%Y: tensor<?x500xf32>, %X: tensor<?x250xf32>):
  %A = unroll.param "A" fixed : tensor<250x500xf32>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x500xf32>, tensor<?x250xf32>, tensor<250x500xf32>
  %l1 = unroll.l1 %Y lambda(0.1) : tensor<?x500xf32>
  unroll.minimize %fit, %l1 schedule(fista) iterations(16)
}
