//===- Peak.h - the GEMM peak, timed the same way in both benchmarks ------===//
//
// The machine's f32 GEMM peak as the benchmarks define it: C += A·B on
// 2048 x 2048 x 256 with unroll's own kernel, each thread multiplying its
// own matrices (as unroll's threads each run their own chunks of a batch),
// GFLOP/s over all threads from the median of `repeats` timed rounds after
// one to warm up. unroll-gemm-bench times any shape this way;
// unroll-bench --bracket-peak measures the peak between its own timings, so
// that each step is set against the peak of the seconds around it.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_BENCH_PEAK_H
#define UNROLL_BENCH_PEAK_H

#include "unroll/runtime/CpuKernels.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace unroll::bench {

/// The peak's shape: M, N, K.
inline constexpr int64_t kPeakM = 2048, kPeakN = 2048, kPeakK = 256;

/// The median wall time of `repeats` rounds, after one to warm up, in each
/// of which `threads` threads run run(t) once, t = 0 on the calling thread.
/// before(r) runs untimed ahead of round r (0 is the warm-up).
template <typename Run, typename Before>
double medianRoundSeconds(int64_t threads, int64_t repeats, Run run, Before before) {
  std::vector<double> secs;
  for (int64_t r = 0; r <= repeats; ++r) {
    before(r);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int64_t t = 1; t < threads; ++t)
      pool.emplace_back(run, t);
    run(int64_t(0));
    for (auto &th : pool)
      th.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0)
      secs.push_back(s); // the first round warms up
  }
  std::sort(secs.begin(), secs.end());
  return secs[secs.size() / 2];
}

/// GFLOP/s of the peak shape on `threads` threads (see the file comment).
inline double gemmPeakGflops(int64_t threads, int64_t repeats) {
  const int64_t M = kPeakM, N = kPeakN, K = kPeakK;
  std::vector<std::vector<float>> As(threads, std::vector<float>(M * K, 0.5f)),
      Bs(threads, std::vector<float>(K * N, 0.25f)), Cs(threads, std::vector<float>(M * N, 0.0f));
  double secs = medianRoundSeconds(
      threads, repeats,
      [&](int64_t t) {
        unroll_gemm_f32(M, N, K, As[t].data(), K, 1, Bs[t].data(), N, 1, Cs[t].data(), N, 1, 1);
      },
      [](int64_t) {});
  return 2.0 * M * N * K * threads / secs / 1e9;
}

} // namespace unroll::bench

#endif // UNROLL_BENCH_PEAK_H
