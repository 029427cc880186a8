//===- Process.cpp - process-wide settings of unroll's tools --------------===//
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Distributed.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <string>

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

int unroll::defaultThreads() {
  int cores = std::max(1u, std::thread::hardware_concurrency());
  const Communicator &w = world();
  if (!w.distributed())
    return cores;
  // The ranks on this node share its cores. A launcher that bound each
  // rank to its own cores (Open MPI binds to cores for two ranks) already
  // divided them.
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) < cores)
    return std::max(1, CPU_COUNT(&set));
  return std::max(1, cores / w.localSize());
}

void unroll::configureRunner(ModelRunner &run) {
  tuneAllocator();
  if (int n = threadsFromEnvironment())
    run.setThreads(n);
  else if (world().distributed())
    run.setThreads(defaultThreads());
}

double unroll::availableBytes() {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f)
    return -1;
  char line[256];
  double kib = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1)
      break;
  fclose(f);
  return kib < 0 ? -1 : kib * 1024.0;
}

namespace {
std::string human(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6)
    bytes /= 1024.0, ++u;
  char buf[64];
  if (bytes >= 1e6)
    snprintf(buf, sizeof buf, "%.3g %s", bytes, units[u]);
  else
    snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}
} // namespace

namespace {
std::function<double()> gDeviceFree;
} // namespace

void unroll::setDeviceFreeBytes(std::function<double()> query) { gDeviceFree = std::move(query); }

bool unroll::checkMemory(double needed, const std::string &what, const std::string &flags,
                         std::string &error) {
  double have = availableBytes();
  if (have >= 0 && needed > have) {
    error = what + " needs about " + human(needed) + " of memory, and this machine has " +
            human(have) + " available; lower " + flags;
    return false;
  }
  // A GPU library's buffers live on the device: the same estimate against
  // its free memory.
  double dev = gDeviceFree ? gDeviceFree() : -1;
  if (dev >= 0 && needed > dev) {
    error = what + " needs about " + human(needed) + " of device memory, and the GPU has " +
            human(dev) + " free; lower " + flags;
    return false;
  }
  return true;
}

unroll::Fault unroll::Fault::fromEnvironment() {
  Fault f;
  const char *e = getenv("UNROLL_FAULT");
  char kind[16];
  long long step;
  int rank;
  if (e && sscanf(e, "%15[a-z]:%d:%lld", kind, &rank, &step) == 3) {
    f.kind = kind;
    f.rank = rank;
    f.step = step;
  }
  return f;
}
