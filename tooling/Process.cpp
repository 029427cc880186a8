//===- Process.cpp - process-wide settings of unroll's tools --------------===//
#include "unroll/tooling/Process.h"

#include <cstdlib>
#include <malloc.h>

void unroll::tuneAllocator() {
  static bool tuned = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20); // glibc's maximum on 64-bit
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    return true;
  }();
  (void)tuned;
}

int unroll::threadsFromEnvironment() {
  const char *env = getenv("UNROLL_THREADS");
  int n = env ? atoi(env) : 0;
  return n > 0 ? n : 0;
}

void unroll::configureRunner(ModelRunner &run) {
  tuneAllocator();
  if (int n = threadsFromEnvironment())
    run.setThreads(n);
}
