#!/usr/bin/env python3
"""The table of bench/run.sh's OUT/bench.json (markdown on stdout): per
config, thread count and entry (training step, forward) unroll's and
PyTorch's medians, the speed-up, GFLOP/s from the model's FLOPs, the GEMM
peak measured in the same run and the share of it (against the higher of
the peaks before and after all timings, and the median over unroll's timed
runs of each run's share against the mean of the two peaks measured right
before and after it: `unroll-bench --bracket-peak`), and with BENCH_BASE the
other build's times, and with BENCH_BF16=1 unroll's times with bf16 GEMM
operands against the bf16 GEMM peak of the same run. Below the table, the
FMA pipes' own rate (`unroll-gemm-bench --fma-peak`) where bench.json has it.

  bench/table.py OUT/bench.json
"""
import json, statistics, sys
from shares import bracket_shares, flops
j = json.load(open(sys.argv[1]))

def share_text(shares):
    if not shares:
        return "–"
    return (f"{100 * statistics.median(shares):.0f}% "
            f"({100 * min(shares):.0f}–{100 * max(shares):.0f}%)")

has_before = any("before" in r for r in j["runs"])
has_bf16 = any("bf16" in r for r in j["runs"])
extra = " before (s) | before: share of peak | before: share of the peaks around each run |" if has_before else ""
extra += " bf16 (s) | bf16 vs f32 | bf16 GEMM peak GFLOP/s | bf16: share of bf16 peak |" if has_bf16 else ""
print("| config | threads | what | unroll (s) | PyTorch (s) | speed-up | unroll GFLOP/s | GEMM peak GFLOP/s | share of GEMM peak | share of the peaks around each run, median (range) | PyTorch GFLOP/s |" + extra)
print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if has_before else "")
      + ("---|---|---|---|" if has_bf16 else ""))
for r in j["runs"]:
    d, D, H, L, loops, window, points = r["dims"]
    b = r["unroll"]["batch"]
    ff, ft = flops(d, D, H, L, loops, window, points, b)
    peak = j["gemm_peak"][str(r["threads"])]["gflops"]
    for what, key, f in (("training step", "train_step_median_s", ft), ("forward", "forward_median_s", ff)):
        u, t = r["unroll"][key], r["torch"][key]
        row = (f"| {r['config']} (b={loops}, T={window}, k={points}, batch {b}) | {r['threads']} | {what} "
               f"| {u:.4f} | {t:.4f} | {t/u:.2f}x | {f/u/1e9:.1f} | {peak:.0f} | {100*f/u/1e9/peak:.0f}% "
               f"| {share_text(bracket_shares(r, 'unroll', key, f))} | {f/t/1e9:.1f} |")
        if has_before:
            bt = r["before"][key]
            row += f" {bt:.4f} | {100*f/bt/1e9/peak:.0f}% | {share_text(bracket_shares(r, 'before', key, f))} |"
        if has_bf16:
            ht = r["bf16"][key]
            hp = j["gemm_peak"][f"{r['threads']}-bf16"]["gflops"]
            row += f" {ht:.4f} | {u/ht:.2f}x | {hp:.0f} | {100*f/ht/1e9/hp:.0f}% |"
        print(row)
def peak_text(k, v):
    both = v.get("measured_gflops")
    seen = f" (higher of {both[0]:.0f} and {both[1]:.0f}, before and after)" if both else ""
    t, _, kind = k.partition("-")
    return f"{t} thread{'s' if t != '1' else ''}{' ' + kind if kind else ''}: {v['gflops']:.0f} GFLOP/s{seen}"
pk = ", ".join(peak_text(k, v) for k, v in j["gemm_peak"].items())
t0 = j["runs"][0]["torch"]
n = len(j["runs"][0]["unroll"]["train_step_s"])
def around(r):
    """The peaks measured around unroll's timed runs of `r`: their range."""
    ps = [p for k in ("train_step_peaks_gflops", "forward_peaks_gflops")
          for pair in r["unroll"].get(k, []) for p in pair]
    return f"{min(ps):.0f}–{max(ps):.0f}" if ps else None
rp = "; ".join(f"{r['config']}, {r['threads']} thread{'s' if r['threads'] != 1 else ''}: {around(r)}"
               for r in j["runs"] if around(r))
rp = f"; the peaks measured around unroll's timed runs (GFLOP/s): {rp}" if rp else ""
fp = {t: v for t, v in (j.get("fma_peak") or {}).items() if v.get("fma_peak")}
if fp:
    rp += "; the FMA pipes alone (unroll-gemm-bench --fma-peak), the ceiling above the GEMM peak: " + ", ".join(
        f"{t} thread{'s' if t != '1' else ''}: {v['gflops']:.0f} GFLOP/s ({v['isa']}; GEMM peak "
        f"{100 * j['gemm_peak'][t]['gflops'] / v['gflops']:.0f}% of it)"
        for t, v in fp.items() if t in j["gemm_peak"])
print(f"(median of {n} runs each, unroll and PyTorch alternating in {j['runs'][0]['unroll']['rounds']} rounds; GEMM peak = unroll's f32 GEMM kernel on 2048x2048x256 in the same run: {pk}{rp}; "
      f"PyTorch {t0['torch']}, BLAS: {t0['blas']})")
