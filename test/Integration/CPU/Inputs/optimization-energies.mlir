// Small sparse-coding and Hopfield energies for optimization-energies.test:
// codes x [12] from measurements b [8]; queries of 6 features against a
// memory of patterns. @ista_nonneg's dictionary in the check has close top
// eigenvalues (3.02, 2.82): its power method gets 1000 steps.
unroll.energy @ista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" {std = 0.35 : f64} : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
}

unroll.energy @fista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" {std = 0.35 : f64} : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A {power_iterations = 1000 : i64} : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(fista) iterations(16)
}

unroll.energy @ista_nonneg {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" {std = 0.35 : f64} : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A {power_iterations = 1000 : i64} : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) nonneg : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(16)
}

unroll.energy @hopfield {
^bb0(%Y: tensor<?x6xf64>, %X: tensor<?x6xf64>):
  %lse = unroll.lse %Y, %X beta(2.0) : tensor<?x6xf64>, tensor<?x6xf64>
  %reg = unroll.sqnorm %Y : tensor<?x6xf64>
  unroll.minimize %lse, %reg schedule(cccp) iterations(5)
}

// Learned unrollings of the same sparse-coding energy: hand-written steps
// that take the layer index k. LISTA-CP: one W per layer; ALISTA: a fixed
// W (the task computes it), learned step sizes and thresholds only.
unroll.energy @lista_cp {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
} steps {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %W = unroll.param "W" {std = 0.1 : f64} : tensor<4x8x12xf64>
  %g = unroll.param "gamma" init(constant) {value = 1.0 : f64} : tensor<4xf64>
  %t = unroll.param "theta" init(constant) {value = 0.02 : f64} : tensor<4xf64>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k
         : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>, tensor<4x8x12xf64>, tensor<4xf64>
  unroll.yield %x : tensor<?x12xf64>
}

unroll.energy @alista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) nonneg : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
} steps {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %W = unroll.param "W" fixed : tensor<8x12xf64>
  %g = unroll.param "gamma" init(constant) {value = 1.0 : f64} : tensor<4xf64>
  %t = unroll.param "theta" init(constant) {value = 0.02 : f64} : tensor<4xf64>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k nonneg
         : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>, tensor<8x12xf64>, tensor<4xf64>
  unroll.yield %x : tensor<?x12xf64>
}

// LISTA's uncoupled layers x' = η(W1 b + W2 x) (per layer), and LISTA-CPSS
// (coupled, with support selection: the largest p_k% pass untouched).
unroll.energy @lista {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x12xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
} steps {
^bb0(%Y: tensor<?x12xf64>, %X: tensor<?x8xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<8x12xf64>
  %W = unroll.param "W" {std = 0.1 : f64} : tensor<4x8x12xf64>
  %W2 = unroll.param "W2" {std = 0.1 : f64} : tensor<4x12x12xf64>
  %g = unroll.param "gamma" init(ones) : tensor<4xf64>
  %t = unroll.param "theta" init(constant) {value = 0.02 : f64} : tensor<4xf64>
  %x = unroll.lista_step %Y, %X, %A, %W w2 %W2 : tensor<4x12x12xf64> gamma %g theta %t layer %k
         : tensor<?x12xf64>, tensor<?x8xf64>, tensor<8x12xf64>, tensor<4x8x12xf64>, tensor<4xf64>
  unroll.yield %x : tensor<?x12xf64>
}

unroll.energy @lista_cpss {
^bb0(%Y: tensor<?x40xf64>, %X: tensor<?x8xf64>):
  %A = unroll.param "A" fixed : tensor<8x40xf64>
  %fit = unroll.lsq %Y, %X, %A : tensor<?x40xf64>, tensor<?x8xf64>, tensor<8x40xf64>
  %l1 = unroll.l1 %Y lambda(0.05) : tensor<?x40xf64>
  unroll.minimize %fit, %l1 schedule(ista) iterations(4)
} steps {
^bb0(%Y: tensor<?x40xf64>, %X: tensor<?x8xf64>, %k: index):
  %A = unroll.param "A" fixed : tensor<8x40xf64>
  %W = unroll.param "W" {std = 0.1 : f64} : tensor<4x8x40xf64>
  %g = unroll.param "gamma" init(ones) : tensor<4xf64>
  %t = unroll.param "theta" init(constant) {value = 0.02 : f64} : tensor<4xf64>
  %x = unroll.lista_step %Y, %X, %A, %W gamma %g theta %t layer %k support
         : tensor<?x40xf64>, tensor<?x8xf64>, tensor<8x40xf64>, tensor<4x8x40xf64>, tensor<4xf64>
  unroll.yield %x : tensor<?x40xf64>
}
