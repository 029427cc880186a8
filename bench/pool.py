#!/usr/bin/env python3
"""Pools the paper training steps (or forwards) of several `make bench` runs.

Each timed step is set against the mean of the GEMM peaks measured right
before and after it (`unroll-bench --bracket-peak`), as bench/run.sh's
table does per run; this prints each run's steps and the pooled median.

  python3 bench/pool.py [--threads 2] [--forward] [--skip FILE:N ...] bench.json ...

--skip FILE:N leaves out the first N timed runs of FILE (steps timed in a minute
when the VM ran one vCPU slow, say so in the docs that quote the result).
"""
import argparse
import json
import statistics

from shares import bracket_shares, flops


def shares(path, threads, forward):
    with open(path) as f:
        runs = json.load(f)["runs"]
    for run in runs:
        if run["config"] == "paper" and run["threads"] == threads:
            fwd, step = flops(*run["dims"], run["unroll"]["batch"])
            key, f = ("forward_median_s", fwd) if forward else ("train_step_median_s", step)
            xs = bracket_shares(run, "unroll", key, f)
            if xs is None:
                raise SystemExit(f"{path}: no peaks measured around the timed runs")
            return xs
    raise SystemExit(f"{path}: no paper run on {threads} thread(s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="bench.json files written by bench/run.sh")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--forward", action="store_true",
                    help="pool the timed forwards instead of the training steps")
    ap.add_argument("--skip", action="append", default=[], metavar="FILE:N",
                    help="leave out the first N steps of FILE")
    ap.add_argument("--target", type=float, default=0.88)
    args = ap.parse_args()
    skip = {}
    for s in args.skip:
        path, _, n = s.rpartition(":")
        if not path or not n.isdigit():
            raise SystemExit(f"--skip {s}: expected FILE:N")
        skip[path] = int(n)
    what = "forwards" if args.forward else "steps"
    pooled = []
    for path in args.files:
        xs = shares(path, args.threads, args.forward)[skip.get(path, 0):]
        pooled += xs
        print(f"{path}: median {100 * statistics.median(xs):.1f}% of {len(xs)} {what}:",
              " ".join(f"{100 * x:.0f}" for x in xs))
    hit = sum(x >= args.target for x in pooled)
    print(f"pooled, {args.threads} thread(s): {len(pooled)} {what}, median "
          f"{100 * statistics.median(pooled):.1f}%, {hit} at {100 * args.target:.0f}% or more, "
          f"range {100 * min(pooled):.0f}-{100 * max(pooled):.0f}%")


if __name__ == "__main__":
    main()
