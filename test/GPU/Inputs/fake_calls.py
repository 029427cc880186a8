"""Per-training-step driver calls, from the logs of the recording fake
libcuda (fake_libcuda.c) for two runs of unroll-run that differ only in
their number of steps: (calls of the longer run - calls of the shorter) /
(step difference), by call name; and the calls no run may make."""
import collections
import sys

short_log, short_steps, long_log, long_steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def counts(path):
    c = collections.Counter()
    for line in open(path):
        c[line.split()[0]] += 1
    return c


a, b = counts(short_log), counts(long_log)
steps = long_steps - short_steps
for name in sorted(set(a) | set(b)):
    per_step = (b[name] - a[name]) / steps
    print(f"per step: {name} {per_step:g}")
print(f"ever: cuMemAllocManaged {b['cuMemAllocManaged']}")
computes = collections.Counter(
    int(line.split("compute ")[1].split()[0]) for line in open(long_log)
    if line.startswith("cublasLtMatmul m"))
print(f"ever: cublasLtMatmul compute {dict(computes)}")
epilogues = collections.Counter(
    int(line.split("epilogue ")[1].split()[0]) for line in open(long_log)
    if line.startswith("cublasLtMatmul m"))
print(f"ever: cublasLtMatmul epilogue {dict(sorted(epilogues.items()))}")
betas = collections.Counter(
    line.split("beta ")[1].split()[0] for line in open(long_log)
    if line.startswith("cublasLtMatmul ") and "beta " in line)
print(f"ever: cublasLtMatmul beta {dict(sorted(betas.items()))}")
# Calls recorded while a stream was captured into a graph: a wait, an
# allocation or a copy there would break the graph (or be baked into it).
captured = collections.Counter(line.split()[0] for line in open(long_log)
                               if line.startswith("captured:"))
for name in ("cuStreamSynchronize", "cuCtxSynchronize", "cuMemAlloc", "cuMemFree",
             "cuMemcpy", "cuMemcpyAsync"):
    print(f"ever in capture: {name} {captured['captured:' + name]}")
print(f"ever in capture: launches {captured['captured:cuLaunchKernel']}, "
      f"matmuls {captured['captured:cublasLtMatmul']}")
