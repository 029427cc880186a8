"""python-gpu-vs-cpu.py GPU.so CPU.so [TOL]: the same model built for the GPU
and the CPU, driven from python/unroll with the same parameters (seed 0) and
prompts: the GPU library's forward (no gradient) against the CPU library's.
Prints the largest relative difference; exit status 1 past TOL (1e-12)."""
import sys

import torch

import unroll.torch as ut

gpu_so, cpu_so = sys.argv[1], sys.argv[2]
tol = float(sys.argv[3]) if len(sys.argv) > 3 else 1e-12
gpu, cpu = ut.Model(gpu_so, seed=0), ut.Model(cpu_so, seed=0)
print("GPU:", gpu.library.device)
g = torch.Generator().manual_seed(1)
xs = torch.randn(8, 5, gpu.dim, generator=g, dtype=gpu.dtype)
ys = torch.randn(8, 5, generator=g, dtype=gpu.dtype)
with torch.no_grad():
    a, b = gpu(xs, ys), cpu(xs, ys)
err = float((a - b).abs().max() / b.abs().max())
print("python forward, GPU library vs CPU library: max rel %.2e over %s" % (err, tuple(a.shape)))
sys.exit(0 if err <= tol else 1)
