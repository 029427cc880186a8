//===- AdamStep.h - calling a library's compiled Adam -----------*- C++ -*-===//
//
// What the runtime hands a library's @M_adam or @E_adam (Adam.cpp in
// lib/Conversion/UnrollToEntryPoints): this step's hyperparameters as a
// buffer, and a buffer for the partial sums of the squared gradient norm.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_RUNTIME_ADAMSTEP_H
#define UNROLL_RUNTIME_ADAMSTEP_H

#include "unroll/runtime/MemRef.h"

#include <cmath>
#include <cstdint>
#include <vector>

namespace unroll {

/// The hyperparameters of one step of a library's compiled Adam: PyTorch's
/// formulation, `step` counting this step (1 for the first).
struct AdamStep {
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t step = 1;
};

/// The hyper buffer: lr / (1 - beta1^t), sqrt(1 - beta2^t), beta1, beta2, eps.
/// kAdamPartials: the partial sums of the squared gradient norm, each a thread
/// of the GPU kernel. 256 were one block on one of an H200's 132 multiprocessors,
/// 587 us for the paper config's 847,873 values (2026-12-04); 32,768 are 128
/// blocks of 26 values per thread, and 128 KB read back per step.
constexpr int64_t kAdamHyper = 5, kAdamPartials = 32768;
template <typename T> std::vector<T> adamHyper(const AdamStep &opt) {
  double bc1 = 1 - std::pow(opt.beta1, (double)opt.step);
  double bc2 = 1 - std::pow(opt.beta2, (double)opt.step);
  return {T(opt.lr / bc1), T(std::sqrt(bc2)), T(opt.beta1), T(opt.beta2), T(opt.eps)};
}

/// One call of a library's compiled Adam (@M_adam, @E_adam) on n values of
/// θ, their gradient and Adam's moments (updated in place), with a hyper
/// buffer (adamHyper) and kAdamPartials partial sums of the squared
/// gradient norm. The buffers are the caller's: host vectors, or a GPU
/// library's resident memory.
template <typename T>
void callCompiledAdam(void *fn, T *theta, T *grad, T *mom, T *vel, int64_t n, T *hyper,
                      T *partial) {
  using Fn = void (*)(MemRef<T, 1> *, MemRef<T, 1> *, MemRef<T, 1> *, MemRef<T, 1> *,
                      MemRef<T, 1> *, MemRef<T, 1> *);
  auto th = makeMemRef<T, 1>(theta, {n}), g = makeMemRef<T, 1>(grad, {n}),
       m = makeMemRef<T, 1>(mom, {n}), v = makeMemRef<T, 1>(vel, {n});
  auto hm = makeMemRef<T, 1>(hyper, {kAdamHyper});
  auto pm = makeMemRef<T, 1>(partial, {kAdamPartials});
  reinterpret_cast<Fn>(fn)(&th, &g, &m, &v, &hm, &pm);
}

} // namespace unroll

#endif
