//===- Process.h - process-wide settings of unroll's tools ------*- C++ -*-===//
//
// What a tool (unroll-run, unroll-bench, the test checkers) decides for its
// whole process, kept out of the runtime library: the thread count from
// $UNROLL_THREADS and the allocator's tuning.
//
//===----------------------------------------------------------------------===//
#ifndef UNROLL_TOOLING_PROCESS_H
#define UNROLL_TOOLING_PROCESS_H

#include "unroll/runtime/ModelRun.h"

#include <functional>
#include <string>

namespace unroll {

/// Tunes glibc's allocator for many calls with buffers of a few hundred KB
/// (above its default mmap threshold each call would map fresh pages and
/// fault them in: measured a quarter of a small-config step on 2 threads).
/// Idempotent.
void tuneAllocator();

/// $UNROLL_THREADS if set to a positive integer, else 0 (the runner's
/// default: all cores).
int threadsFromEnvironment();

/// Threads a runner uses when $UNROLL_THREADS is not set: every core, or in
/// a data-parallel job this rank's share of its node's cores.
int defaultThreads();

/// Both, for a runner about to be used by this process.
void configureRunner(ModelRunner &run);

/// Memory this process can still get, in bytes: the kernel's MemAvailable
/// (/proc/meminfo; -1 where unknown). GPU libraries also meet the device's
/// free memory, which the GPU runtime checks at each allocation.
double availableBytes();

/// Where checkMemory also looks: a query of the device's free memory (set
/// by unroll-run for a GPU library; returns -1 when unknown).
void setDeviceFreeBytes(std::function<double()> query);

/// Refuses a run whose estimated working memory `needed` (bytes; a double,
/// so that products of hostile sizes do not overflow) exceeds what is
/// available, before anything is allocated: false with a message naming
/// `what` needs it and the flags that set it.
bool checkMemory(double needed, const std::string &what, const std::string &flags,
                 std::string &error);

/// A fault injected by the tests of training runs: $UNROLL_FAULT =
/// "KIND:RANK:STEP" makes rank RANK, in step STEP (counted from 1, as the
/// progress line does), put a NaN in its gradient (nan), stop answering
/// (hang) or die (die: SIGKILL).
struct Fault {
  std::string kind;
  int rank = -1;
  int64_t step = -1;
  static Fault fromEnvironment();
  bool at(const char *k, int r, int64_t s) const { return kind == k && rank == r && step == s; }
};

} // namespace unroll

#endif // UNROLL_TOOLING_PROCESS_H
