//===- unroll-run.cpp - run a compiled.so ---------------------------------===//
//
//   unroll-run compiled.so --info
//   unroll-run --gpu-info
//   unroll-run compiled.so --task energy --iterations 12 --seed 0 [--json]
//   unroll-run compiled.so --task icl_linear --steps 2000 --out out/train
//
// The command line and --help: Options.cpp; energy libraries: RunEnergy.cpp;
// models: RunModel.cpp.
//
//===----------------------------------------------------------------------===//
#include "Options.h"

#include "unroll/runtime/Model.h"
#include "unroll/tooling/Distributed.h"
#include "unroll/tooling/Flags.h"
#include "unroll/tooling/Process.h"
#include "unroll/tooling/Tasks.h"

#include "unroll/runtime/ModelInfo.h"
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>
#include <string>

namespace key = ::unroll::info;

using namespace unroll;

// From the GPU runtime (runtime/gpu/CudaRuntime.cpp, linked in statically).
extern "C" const char *unroll_gpu_init(void);
extern "C" const char *unroll_gpu_device(void);

static int runMain(int argc, char **argv);

int main(int argc, char **argv) {
  // A training step allocates parameter-sized vectors (conversions, slices,
  // gradients) and frees them again, every step. glibc maps each one of
  // more than its mmap threshold afresh and unmaps it on free, so every step
  // faulted its pages in again: on a virtual machine that was most of a
  // 2-million-parameter learned unrolling's step (bench/malloc-policy.sh).
  // The heap serves them instead and keeps what is freed for the next step.
  // (ASan's allocator ignores this; UNROLL_MALLOC=glibc keeps glibc's own
  // policy, the benchmark's peer.)
  const char *policy = getenv("UNROLL_MALLOC");
  if (!policy || strcmp(policy, "glibc") != 0) {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
  }
  // Under mpirun or srun this process is one rank of a job (a no-op
  // otherwise); finish() ends it with the others, or ends the job when this
  // rank failed alone.
  std::string err;
  if (!world().init(err))
    return die(err);
  int rc;
  // A size the machine cannot hold (--batch 100000000000) ends in a message,
  // not in std::terminate's abort.
  try {
    rc = runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    rc = die("out of memory: the sizes asked for (--batch, --tokens, --iterations, --loops, "
             "--eval-prompts) need more memory than this machine can give");
  }
  return world().finish(rc);
}

static int runMain(int argc, char **argv) {
  if (FlagTable::wantsHelp(argc, argv)) {
    if (world().root())
      fputs(usageText().c_str(), stdout);
    return 0;
  }
  if (argc == 2 && !strcmp(argv[1], "--gpu-info")) {
    if (const char *why = unroll_gpu_init()) {
      printf("%sno usable GPU: %s\n", world().who().c_str(), why);
      return 1;
    }
    printf("%s%s\n", world().who().c_str(), unroll_gpu_device());
    return 0;
  }
  Options o;
  std::string err;
  if (!parseOptions(argc, argv, o, err))
    return die(err);
  // One GPU per rank: the node-local rank picks it.
  Model m;
  if (!m.load(o.model, err, /*useDevice=*/!o.info, world().localRank()))
    return die(err);
  std::string kind = m.info().value(key::kKind, "");
  std::string task = o.task.empty() ? (kind == "energy" ? "energy" : "icl_linear") : o.task;
  bool training = !o.info && !o.predict && o.checkpoint.empty() &&
                  ((kind == "model" && task.rfind("icl_", 0) == 0 && o.evalLoops.empty()) ||
                   task == "sparse_coding");
  if (world().distributed() && !training) {
    // Only training is data-parallel: rank 0 does the rest alone.
    if (!world().root())
      return 0;
    if (!o.info)
      fprintf(stderr, "note: only training runs on several ranks; rank 0 does this alone\n");
  }
  if (o.info) {
    printf("%s\n", m.info().dump(2).c_str());
    return 0;
  }
  if (m.gpu())
    setDeviceFreeBytes([&m] { return m.deviceFreeBytes(); });
  if (task == "sparse_coding" || task == "hopfield")
    return runOptimization(o, m, task);
  if (task == "energy")
    return kind == "model" ? runModel(o, m, "icl_linear", /*energyOfModel=*/true) : runEnergy(o, m);
  std::string known;
  if (!findTask(task, known))
    return die("unknown task '" + task + "' (tasks: energy, " + known + ")");
  return runModel(o, m, task, /*energyOfModel=*/false);
}
