//===- unroll_bench.cpp - time a compiled model's training step and forward ===//
//
//   unroll-bench MODEL.so [--batch 64] [--points k] [--repeats 5] [--threads N]
//                         [--optimizer host|compiled] [--only forward|train]
//                         [--bracket-peak R]
//
// Prints JSON: the wall time of every repeat of one training step (loss,
// gradient and an Adam update) and of one forward pass at the model's b,
// after one warm-up each. The Adam update runs as in unroll-run: by default
// on the host for CPU libraries and compiled, on resident state, for GPU
// libraries (weights and moments stay on the GPU).
//
// --bracket-peak R (CPU libraries): the GEMM peak (Peak.h, median of R
// rounds on the step's thread count) is measured before the first timed
// run and after each one, and every timed step and forward is printed with
// the two peaks around it (`train_step_peaks_gflops`, `forward_peaks_gflops`:
// [before, after] per run). The VM's speed drifts within seconds, so a
// step's share of the peak is best taken against the peak of its own
// seconds (bench/run.sh, bench/table.py).
//
// With UNROLL_GEMM_PROFILE=1, a CPU library prints at exit a table of its
// GEMM calls grouped by shape, layout, epilogue and kernel (median time,
// GFLOP/s, total; runtime/cpu/Gemm.cpp): where a step's time goes between
// the GEMM calls and the rest.
//
//===----------------------------------------------------------------------===//
#include "Peak.h"
#include "unroll/runtime/ModelRun.h"
#include "unroll/tooling/Adam.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Tasks.h"

#include "unroll/runtime/ModelInfo.h"
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace key = ::unroll::info;

using namespace unroll;

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: unroll-bench MODEL.so [--batch B] [--points k] [--repeats R] [--threads N] "
            "[--gpu-profile TOP] [--gpu-graphs on|off] [--micro-batch-tokens N] "
            "[--bracket-peak R]\n"
            "  (UNROLL_GEMM_PROFILE=1: a table of a CPU library's GEMM calls at exit)\n");
    return 2;
  }
  int64_t batch = 64, points = -1, repeats = 5, threads = -1, profileTop = 0, microTokens = -1,
          peakRepeats = 0;
  std::string optimizer = "auto", only;
  bool graphs = true;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--optimizer") {
      optimizer = argv[i + 1];
      continue;
    }
    if (a == "--gpu-graphs") { // on (default) | off
      graphs = std::string(argv[i + 1]) != "off";
      continue;
    }
    if (a == "--only") { // forward | train: time one of them (for profiling)
      only = argv[i + 1];
      if (only != "forward" && only != "train") {
        fprintf(stderr, "unroll-bench: --only takes forward or train, got '%s'\n", only.c_str());
        return 2;
      }
      continue;
    }
    int64_t v = std::stoll(argv[i + 1]);
    if (a == "--batch")
      batch = v;
    else if (a == "--points")
      points = v;
    else if (a == "--repeats")
      repeats = v;
    else if (a == "--threads")
      threads = v;
    else if (a == "--micro-batch-tokens") // CPU: 0 runs each thread's share at once
      microTokens = v;
    else if (a == "--bracket-peak") // CPU: the GEMM peak around every timed run
      peakRepeats = v;
    else if (a == "--gpu-profile") // after timing: per-kernel times of one step and one forward
      profileTop = v;
  }
  Model m;
  std::string err;
  if (!m.load(argv[1], err)) {
    fprintf(stderr, "unroll-bench: %s\n", err.c_str());
    return 2;
  }
  if (peakRepeats > 0 && m.gpu()) {
    fprintf(stderr,
            "unroll-bench: --bracket-peak measures the CPU GEMM peak; %s is a GPU "
            "library\n",
            argv[1]);
    return 2;
  }
  const nlohmann::json *mi = findModel(m, "", err);
  ModelRunner run;
  if (!mi || !run.init(m, *mi, err)) {
    fprintf(stderr, "unroll-bench: %s\n", err.c_str());
    return 2;
  }
  configureRunner(run);
  if (threads > 0)
    run.setThreads(threads);
  if (microTokens >= 0)
    run.setMicroBatchTokens(microTokens);
  int64_t d = (*mi)[key::kPromptDim], b = (*mi)[key::kIterations], T = (*mi)[key::kWindow];
  if (points < 0)
    points = 2 * d + 1;
  Rng rng(0);
  std::vector<double> theta(run.numParams());
  for (double &v : theta)
    v = 0.02 * rng.normal();
  Prompts p = sampleLinear(batch, points, d, d, 0.0, rng);
  Adam adam;
  std::vector<double> losses, grad, preds;
  auto time = [](auto fn) {
    auto t0 = std::chrono::steady_clock::now();
    fn();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  bool compiled = optimizer == "compiled" || (optimizer == "auto" && m.gpu());
  ResidentState dev;
  if (compiled &&
      (!run.hasAdam() ||
       !dev.init(m, run.numParams(), m.info().value(key::kElementType, "") == "f32", err))) {
    fprintf(stderr, "unroll-bench: %s\n", err.empty() ? "no compiled optimizer" : err.c_str());
    return 2;
  }
  if (compiled) {
    dev.setGraphs(graphs);
    dev.upload(theta, {}, {});
  }
  auto step = [&] {
    if (compiled) {
      ++adam.step;
      double normSq;
      run.trainStep(p, dev, b, T, adam.compiledStep(), losses, normSq, err);
      return;
    }
    run.lossGrad(p, theta, b, T, losses, grad, err);
    adam.update(theta, grad);
  };
  // On resident weights where the step keeps them (a GPU library's forward
  // then copies only the prompts in and the predictions out).
  auto fwd = [&] {
    if (compiled)
      run.forward(p, dev, b, preds, err);
    else
      run.forward(p, theta, b, preds, err);
  };
  bool doStep = only != "forward", doFwd = only != "train";
  if (doStep)
    step();
  if (doFwd)
    fwd();
  // With --bracket-peak, the peak after one timed run is the peak before
  // the next.
  std::vector<double> ts, fs;
  nlohmann::json tsPeaks = nlohmann::json::array(), fsPeaks = nlohmann::json::array();
  double peak = peakRepeats > 0 ? bench::gemmPeakGflops(run.threads(), peakRepeats) : 0.0;
  auto timed = [&](auto fn, std::vector<double> &secs, nlohmann::json &peaks) {
    secs.push_back(time(fn));
    if (peakRepeats > 0) {
      double next = bench::gemmPeakGflops(run.threads(), peakRepeats);
      peaks.push_back({peak, next});
      peak = next;
    }
  };
  for (int64_t r = 0; r < repeats; ++r) {
    if (doStep)
      timed(step, ts, tsPeaks);
    else
      ts.push_back(0.0);
    if (doFwd)
      timed(fwd, fs, fsPeaks);
    else
      fs.push_back(0.0);
  }
  bool usedGraphs = compiled && m.gpu() && dev.graphsUsable();
  if (profileTop > 0 && m.gpu()) {
    // One more training step and forward, each timed kernel by kernel with
    // events (the runtime's profile); the table goes to stderr.
    auto start = reinterpret_cast<void (*)()>(m.symbol("unroll_gpu_profile_start"));
    auto report = reinterpret_cast<const char *(*)(int)>(m.symbol("unroll_gpu_profile_report"));
    if (!start || !report) {
      fprintf(stderr, "unroll-bench: %s has no GPU profile (rebuild it)\n", argv[1]);
      return 2;
    }
    dev.setGraphs(false); // kernel by kernel, not one graph launch
    for (auto [name, fn] : {std::pair<const char *, std::function<void()>>{"training step", step},
                            {"forward", fwd}}) {
      start();
      fn();
      fprintf(stderr, "%s, batch %lld, k = %lld:\n%s", name, (long long)batch, (long long)points,
              report(static_cast<int>(profileTop)));
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  nlohmann::json j{{"model", (*mi)[key::kName]},
                   {"batch", batch},
                   {"points", points},
                   {"loops", b},
                   {"window", T},
                   {"threads", run.threads()},
                   {"micro_batch_tokens", run.microBatchTokens()},
                   {"optimizer", compiled ? "compiled" : "host"},
                   {"cuda_graphs", usedGraphs},
                   {"target", m.info().value(key::kTarget, "cpu")},
                   {"device", m.gpu() ? m.device() : std::string("cpu")},
                   {"train_step_s", ts},
                   {"forward_s", fs},
                   {"train_step_median_s", median(ts)},
                   {"forward_median_s", median(fs)}};
  if (peakRepeats > 0) {
    j["train_step_peaks_gflops"] = tsPeaks;
    j["forward_peaks_gflops"] = fsPeaks;
  }
  printf("%s\n", j.dump().c_str());
  return 0;
}
