#!/usr/bin/env python3
"""Projected step time of data-parallel training on N GPUs, on paper: the
per-GPU step at the share B/N of a fixed global batch B, plus the gradient
all-reduce of the NCCL ring, which unroll-run runs after the whole gradient
(no overlap with the backward pass).

  step(N)      = t_fixed + (t_1 - t_fixed) / N + allreduce(N)   (a fixed global batch B)
  step(N)      = t_1 + allreduce(N)                             (--weak: B per GPU, N B in all)
  allreduce(N) = 2 (N - 1) alpha + 2 (N - 1) / N * S / bw      (ring; 0 for N = 1)

t_1: the measured single-GPU step at batch B (--step-ms); t_fixed: the part
that does not shrink with the batch (host work, launch latency, the
smallest kernels' duration: --fixed-ms); S: the gradient's bytes; alpha: the
latency of one ring step; bw: NCCL's bus bandwidth for messages of S bytes.
With a fixed global batch, gradient all-reduce stops paying at the N that
minimizes step(N):
N* = sqrt(((t_1 - t_fixed) - 2 S / bw) / (2 alpha)), and a GPU more costs
more than it saves past it.

  scripts/scaling-projection.py --step-ms 5 [--fixed-ms 1.04] [--params 847873]
      [--bytes-per-param 4] [--alpha-us 8] [--bw-gbs 150] [--max-n 64] [--json F]
"""
import argparse
import json
import math


def project(a):
    S = a.params * a.bytes_per_param
    alpha, bw = a.alpha_us * 1e-6, a.bw_gbs * 1e9
    t1, t0 = a.step_ms * 1e-3, a.fixed_ms * 1e-3
    rows = []
    n = 1
    while n <= a.max_n:
        ar = 0.0 if n == 1 else 2 * (n - 1) * alpha + 2 * (n - 1) / n * S / bw
        compute = t1 if a.weak else t0 + (t1 - t0) / n
        step = compute + ar
        # Speed-up in prompts per second over one GPU.
        speedup = n * t1 / step if a.weak else t1 / step
        rows.append({"gpus": n, "compute_ms": compute * 1e3, "allreduce_ms": ar * 1e3,
                     "step_ms": step * 1e3, "speedup": speedup, "allreduce_share": ar / step})
        n *= 2
    work = (t1 - t0) - 2 * S / bw
    best = math.sqrt(work / (2 * alpha)) if work > 0 and not a.weak else float("inf")
    return S, rows, best


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--step-ms", type=float, required=True, help="single-GPU training step at batch B")
    ap.add_argument("--fixed-ms", type=float, default=1.04,
                    help="the part of a step that does not shrink with the batch (default: the paper "
                         "config's host time per CUDA-graph step, measured with the recording driver)")
    ap.add_argument("--params", type=int, default=847873, help="parameters (the paper config's)")
    ap.add_argument("--bytes-per-param", type=int, default=4, help="4: f32 gradients")
    ap.add_argument("--alpha-us", type=float, default=8.0, help="latency of one ring step")
    ap.add_argument("--bw-gbs", type=float, default=150.0,
                    help="NCCL bus bandwidth at this message size, GB/s")
    ap.add_argument("--max-n", type=int, default=64)
    ap.add_argument("--weak", action="store_true", help="the batch grows with N (B per GPU)")
    ap.add_argument("--json", help="also write the table here")
    a = ap.parse_args()
    S, rows, best = project(a)
    print(f"gradient {S / 1e6:.2f} MB; single-GPU step {a.step_ms} ms (fixed {a.fixed_ms} ms); "
          f"ring: alpha {a.alpha_us} us, bus bandwidth {a.bw_gbs} GB/s")
    print(f"{'GPUs':>5} {'compute ms':>11} {'all-reduce ms':>14} {'step ms':>9} {'speed-up':>9} {'share':>7}")
    for r in rows:
        print(f"{r['gpus']:5d} {r['compute_ms']:11.3f} {r['allreduce_ms']:14.3f} {r['step_ms']:9.3f} "
              f"{r['speedup']:8.2f}x {100 * r['allreduce_share']:6.1f}%")
    if a.weak:
        print("(speed-up: prompts per second against one GPU)")
    else:
        print(f"step time is least at N* = {best:.1f} GPUs; past it a GPU more adds more all-reduce "
              f"than it takes compute away")
    if a.json:
        json.dump({"inputs": vars(a), "gradient_bytes": S, "rows": rows, "best_n": best},
                  open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
