#!/usr/bin/env python3
"""Data-parallel training on one machine: the same training steps run as one
process on 1 and T threads and as R MPI ranks of one thread each, in one run.
Per arrangement: the step time (median over the steps after the first), and
for the ranks the gradient all-reduce's time, its share of the step and its
bytes (from unroll-run's OUT/parallel.json). Prints a table and writes
OUT/scaling.json.

  bench/scaling.py [--build build] [--out out/scaling] [--steps 20]
                   [--configs small,paper] [--ranks 2]

The runs train at the final curriculum size (--no-curriculum: the paper
config at b = 20, T = 15, 41 points), batch 64, without evaluation.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

CONFIGS = {"small": "looped_gpt2_small", "paper": "looped_gpt2"}


def compile_model(build, out, name):
    so = os.path.join(out, name + ".so")
    src = os.path.join("examples", name + ".mlir")
    if not os.path.exists(so) or os.path.getmtime(src) > os.path.getmtime(so):
        print(f"compiling {src}", file=sys.stderr)
        ll = os.path.join(out, name + ".ll.mlir")
        subprocess.run([f"{build}/bin/unroll-opt", src, "--lower-to-cpu", "-o", ll], check=True)
        subprocess.run([f"{build}/bin/unroll-translate", ll, "-o", so], check=True)
    return so


def step_times(run_dir):
    """Per-step seconds from metrics.jsonl's elapsed_s, the first step left out."""
    el = [json.loads(l)["elapsed_s"] for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    return [b - a for a, b in zip(el, el[1:])]


def train(build, so, run_dir, steps, threads, ranks):
    shutil.rmtree(run_dir, ignore_errors=True)
    cmd = [f"{build}/bin/unroll-run", so, "--task", "icl_linear", "--steps", str(steps),
           "--batch", "64", "--no-curriculum", "--eval-prompts", "0", "--save-every", "100000",
           "--log-every", "100000", "--out", run_dir]
    env = dict(os.environ, UNROLL_THREADS=str(threads))
    if ranks > 1:
        mpirun = [shutil.which("mpirun"), "--oversubscribe", "-np", str(ranks), "-x", "UNROLL_THREADS"]
        if os.geteuid() == 0:
            mpirun.insert(2, "--allow-run-as-root")
        cmd = mpirun + cmd
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rec = {"ranks": ranks, "threads_per_rank": threads}
    rec["step_ms"] = 1e3 * statistics.median(step_times(run_dir))
    par = os.path.join(run_dir, "parallel.json")
    if ranks > 1:
        p = json.load(open(par))
        rec.update({k: p[k] for k in ("gradient_allreduce_ms", "status_exchange_ms", "bytes_per_step",
                                      "allreduce", "mpi")})
        rec["allreduce_share"] = p["gradient_allreduce_ms"] / p["step_ms"]
        rec["mean_step_ms"] = p["step_ms"]
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="out/scaling")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--configs", default="small,paper")
    ap.add_argument("--ranks", type=int, default=2)
    a = ap.parse_args()
    if not shutil.which("mpirun"):
        sys.exit("scaling.py: mpirun not found (Debian: openmpi-bin)")
    os.makedirs(a.out, exist_ok=True)
    R = a.ranks
    rows = []
    for c in a.configs.split(","):
        so = compile_model(a.build, a.out, CONFIGS[c])
        # One process on 1 and R threads, R ranks of one thread: the last
        # two use the same cores.
        for ranks, threads in ((1, 1), (1, R), (R, 1)):
            print(f"timing {c}: {ranks} rank(s) x {threads} thread(s), {a.steps} steps ...", file=sys.stderr)
            rec = train(a.build, so, os.path.join(a.out, f"{c}-{ranks}x{threads}"), a.steps, threads, ranks)
            rec["config"] = c
            rows.append(rec)
    hdr = f"{'config':7} {'ranks x threads':>15} {'step ms':>9} {'vs 1x1':>7} {'all-reduce ms':>13} {'share':>7} {'bytes/step':>11}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        base = next(x for x in rows if x["config"] == r["config"] and x["ranks"] == 1 and x["threads_per_rank"] == 1)
        ar = f"{r['gradient_allreduce_ms']:.3f}" if "gradient_allreduce_ms" in r else "-"
        share = f"{100 * r['allreduce_share']:.2f}%" if "allreduce_share" in r else "-"
        by = f"{r['bytes_per_step'] / 1e6:.2f} MB" if "bytes_per_step" in r else "-"
        print(f"{r['config']:7} {str(r['ranks']) + ' x ' + str(r['threads_per_rank']):>15} {r['step_ms']:9.2f} "
              f"{base['step_ms'] / r['step_ms']:6.2f}x {ar:>13} {share:>7} {by:>11}")
    host = {"cpu": open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"),
            "cores": os.cpu_count()}
    json.dump({"host": host, "steps": a.steps, "batch": 64, "runs": rows},
              open(os.path.join(a.out, "scaling.json"), "w"), indent=2)
    print(f"wrote {a.out}/scaling.json")


if __name__ == "__main__":
    main()
