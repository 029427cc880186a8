// Modern Hopfield retrieval as an energy (issue 17): rows of Y are queries
// ξ ∈ ℝ⁶⁴, rows of the input X the stored patterns (the memory):
//
//   E(ξ) = −β⁻¹ log Σᵢ exp(β xᵢᵀ ξ) + ½‖ξ‖²
//
// schedule(cccp) derives the concave–convex step ξ ← X softmax(β Xᵀ ξ): the
// majorize–minimize step of P1's attention, from a query to a memory
// instead of token to token. The energy never increases.
//
//   unroll-opt hopfield.mlir --lower-to-cpu -o h.mlir
//   unroll-translate h.mlir -o h.so
//   unroll-run h.so --task hopfield --out out/hopfield
unroll.energy @hopfield {
^bb0(%Y: tensor<?x64xf64>, %X: tensor<?x64xf64>):
  %lse = unroll.lse %Y, %X beta(16.0) : tensor<?x64xf64>, tensor<?x64xf64>
  %reg = unroll.sqnorm %Y : tensor<?x64xf64>
  unroll.minimize %lse, %reg schedule(cccp) iterations(10)
}
