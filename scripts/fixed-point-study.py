#!/usr/bin/env python3
"""The fixed-point study of docs/experiments/fixed-points/ (issue 16).

For the small looped GPT-2 (examples/looped_gpt2_small.mlir) and P1's energy
descended in a loop with injection (examples/energy_icl_add.mlir), trains one
model per gradient mode (bptt, implicit, jfb, phantom) for the same number of
steps on icl_linear, then measures:
  * the error at k = 2d at the trained b, and the loop study out to 500 loops;
  * time per training step, activation memory per prompt, g iterations;
  * halting at several tolerances: loops used against the error at k = 2d;
and, for contrast, the GPT-2 with weight tying (injection(none)), which has
no fixed point that depends on the prompt (bptt only).

  scripts/fixed-point-study.py [--build build] [--steps 2000] [--work DIR] [--out DIR]

Writes results.json, summary.md, CSVs and SVG plots into --out; the runs'
folders stay in --work. Uses unroll-opt, unroll-translate, unroll-run and
unroll-plot from --build.
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ["bptt", "implicit", "jfb", "phantom:5:0.5"]
LOOP_LIST = "1:10,12:40:2,45:100:5,110:500:10"
TOLS = [1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4]


def run(cmd, log=None, may_fail=False):
    print("$ " + " ".join(cmd), flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if log:
        with open(log, "w") as f:
            f.write(r.stdout + r.stderr)
    if r.returncode != 0 and may_fail:
        return None
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}")
    return r.stdout + r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--work", default=os.path.join(ROOT, "out", "fixed-points"))
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "experiments", "fixed-points"))
    a = ap.parse_args()
    bin_ = lambda t: os.path.join(a.build, "bin", t)
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    config = os.path.join(ROOT, "examples", "looped_gpt2_small.train.json")

    # The models: the examples, and the GPT-2 with weight tying.
    gpt2 = open(os.path.join(ROOT, "examples", "looped_gpt2_small.mlir")).read()
    tied = os.path.join(a.work, "looped_gpt2_small_tied.mlir")
    with open(tied, "w") as f:
        f.write(gpt2.replace("injection(add)", "injection(none)"))
    sources = {
        "gpt2_small": os.path.join(ROOT, "examples", "looped_gpt2_small.mlir"),
        "energy_add": os.path.join(ROOT, "examples", "energy_icl_add.mlir"),
        "gpt2_small_tied": tied,
    }
    libs = {}
    for name, src in sources.items():
        ll, so = os.path.join(a.work, name + ".ll"), os.path.join(a.work, name + ".so")
        run([bin_("unroll-opt"), src, "--lower-to-cpu", "-o", ll])
        run([bin_("unroll-translate"), "-O2", ll, "-o", so])
        libs[name] = so

    results = []
    plots = {}
    for model in ["gpt2_small", "energy_add", "gpt2_small_tied"]:
        runs = [(m, []) for m in (["bptt"] if model == "gpt2_small_tied" else MODES)]
        if model == "gpt2_small":
            # The training option that draws b per step (P2's b = 10 inside the range).
            runs.append(("bptt", ["--loops-random", "5:20"]))
        for mode, extra in runs:
            tag = model + "." + mode.split(":")[0] + ("_random" if extra else "")
            out = os.path.join(a.work, tag)
            text = run([bin_("unroll-run"), libs[model], "--config", config, "--steps", str(a.steps),
                        "--gradient", mode, "--out", out] + extra, log=out + ".train.log",
                       may_fail=True)
            if extra:
                mode = mode + " b~U[5,20]"
            if text is None:
                # A mode that diverges is a result: record where it stopped.
                log = open(out + ".train.log").read()
                rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
                stop = re.findall(r"unroll-run: error: (.*)", log)
                results.append({"model": model, "gradient": mode, "steps": a.steps,
                                "failed": stop[-1] if stop else "exit status != 0",
                                "steps_done": len(rows),
                                "ms_per_step": 1000 * rows[-1]["elapsed_s"] / len(rows) if rows else None})
                print(json.dumps(results[-1]), flush=True)
                continue
            kib = int(re.search(r"activations kept per prompt at b \d+, \d+ points: (\d+) KiB", text).group(1))
            rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl"))]
            ms = 1000 * rows[-1]["elapsed_s"] / len(rows)
            giters = [r["gradient_iterations"] for r in rows if "gradient_iterations" in r]
            ev = json.load(open(os.path.join(out, "eval.json")))
            d = ev["dims"]
            err2d = ev["model"][2 * d]
            # The loop study to 500 loops.
            ck = os.path.join(out, "checkpoint")
            study = out + ".loops"
            run([bin_("unroll-run"), libs[model], "--checkpoint", ck, "--eval-loops", LOOP_LIST,
                 "--out", study])
            loops = json.load(open(os.path.join(study, "loops.json")))
            curve = dict(zip(loops["loops"], loops["error_last_position"]))
            plots.setdefault(model, []).append((os.path.join(study, "loops.csv"), mode))
            r = {"model": model, "gradient": mode, "steps": a.steps, "ms_per_step": ms,
                 "activation_kib_per_prompt": kib, "error_2d": err2d,
                 "error_2d_at_500_loops": curve.get(500), "error_2d_at_100_loops": curve.get(100),
                 "mean_g_iterations": sum(giters) / len(giters) if giters else None,
                 "final_loss": sum(r["loss"] for r in rows[-100:]) / len(rows[-100:])}
            # Halting at several tolerances (models with input injection).
            if model != "gpt2_small_tied":
                halting = []
                for tol in TOLS:
                    hout = out + ".halt"
                    run([bin_("unroll-run"), libs[model], "--checkpoint", ck, "--loops", "auto",
                         "--tol", str(tol), "--max-loops", "500", "--out", hout])
                    h = json.load(open(os.path.join(hout, "eval.json")))
                    halting.append({"tol": tol, "loops_mean": h["loops_used"]["mean"],
                                    "loops_max": h["loops_used"]["max"],
                                    "at_max": h["loops_used"]["at_max"],
                                    "error_2d": h["model"][2 * d]})
                r["halting"] = halting
                csv = os.path.join(a.out, f"halting.{tag}.csv")
                with open(csv, "w") as f:
                    f.write("loops_mean,error_2d,tol\n")
                    for h in halting:
                        f.write(f"{h['loops_mean']:.3f},{h['error_2d']:.6g},{h['tol']:g}\n")
                plots.setdefault("halting", []).append((csv, f"{model} {mode.replace(':', ' ').replace('~', ' ')}"))
            results.append(r)
            print(json.dumps(r), flush=True)

    # Loop studies: one plot per model family (the tied GPT-2 beside the looped one).
    for model, series in [("gpt2_small", plots["gpt2_small"] + plots["gpt2_small_tied"]),
                          ("energy_add", plots["energy_add"])]:
        args = [bin_("unroll-plot"), os.path.join(a.out, f"loops.{model}.svg"), "--title",
                f"{model}: error at k = 2d against loops ({a.steps} steps each)", "--xlabel", "loops b",
                "--ylabel", "normalized squared error at k = 2d", "--log-y", "--y-floor", "1e-3"]
        for csv, mode in series:
            label = mode.replace(":", " ").replace("~", " ") + (" (weight tying)" if "tied" in csv else "")
            dst = os.path.join(a.out, os.path.basename(os.path.dirname(csv)) + ".csv")
            with open(csv) as f, open(dst, "w") as g:
                g.write(f.read())
            args.append(f"{dst}:error_last_position:{label}")
        run(args)
    args = [bin_("unroll-plot"), os.path.join(a.out, "halting.svg"), "--title",
            "halting: loops used against error at k = 2d (tol 0.1 .. 1e-4)", "--x", "loops_mean",
            "--xlabel", "mean loops used per prompt", "--ylabel", "normalized squared error at k = 2d"]
    for csv, label in plots["halting"]:
        args.append(f"{csv}:error_2d:{label}")
    run(args)

    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"steps": a.steps, "config": "examples/looped_gpt2_small.train.json",
                   "results": results}, f, indent=2)
    fmt = lambda v, p="%.3f": "" if v is None else p % v
    lines = ["| model | gradient | error k=2d (trained b) | at 100 loops | at 500 loops | ms/step | "
             "activations KiB/prompt | g iterations |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        if "failed" in r:
            lines.append(f"| {r['model']} | {r['gradient']} | stopped at step {r['steps_done']}: "
                         f"{r['failed']} | | | {fmt(r['ms_per_step'], '%.1f')} | | |")
            continue
        lines.append(f"| {r['model']} | {r['gradient']} | {fmt(r['error_2d'])} | "
                     f"{fmt(r['error_2d_at_100_loops'])} | {fmt(r['error_2d_at_500_loops'])} | "
                     f"{fmt(r['ms_per_step'], '%.1f')} | {r['activation_kib_per_prompt']} | "
                     f"{fmt(r['mean_g_iterations'], '%.1f')} |")
    lines += ["", "Halting (loops used mean / max, error at k = 2d):", "",
              "| model | gradient | " + " | ".join(f"tol {t:g}" for t in TOLS) + " |",
              "|---|---|" + "---|" * len(TOLS)]
    for r in results:
        if "halting" in r:
            cells = [f"{h['loops_mean']:.1f} / {h['loops_max']} → {h['error_2d']:.3f}" for h in r["halting"]]
            lines.append(f"| {r['model']} | {r['gradient']} | " + " | ".join(cells) + " |")
    with open(os.path.join(a.out, "summary.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
