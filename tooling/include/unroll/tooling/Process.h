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

namespace unroll {

/// Tunes glibc's allocator for many calls with buffers of a few hundred KB
/// (above its default mmap threshold each call would map fresh pages and
/// fault them in: measured a quarter of a small-config step on 2 threads).
/// Idempotent.
void tuneAllocator();

/// $UNROLL_THREADS if set to a positive integer, else 0 (the runner's
/// default: all cores).
int threadsFromEnvironment();

/// Both, for a runner about to be used by this process.
void configureRunner(ModelRunner &run);

} // namespace unroll

#endif // UNROLL_TOOLING_PROCESS_H
