#!/usr/bin/env python3
"""Tables, summary.json and plots of scripts/energy-icl-kernel-experiment.sh.

    scripts/energy-icl-kernel-summary.py OUT [--plot BUILD/bin/unroll-plot]

Reads OUT/{d5,d20,fixed}/<run>/{eval,loops,energy}.json, the runs' logs
(training seconds) and OUT/src/<model>.{info,bench}.json; prints Markdown
tables and writes OUT/summary.json and, with --plot, OUT/error_d5.svg,
OUT/loops_d5.svg, OUT/error_d20.svg and OUT/loops_d20.svg.
"""
import argparse
import json
import os
import re
import subprocess

D5 = ["gpt2", "cg", "cg_s1", "cg_s2", "cg_dense", "line_search", "nesterov", "gd"]
SRC = {"cg_s1": "cg", "cg_s2": "cg", "cg_noisy": "cg", "cg_sparse": "cg"}
LABEL = {"gpt2": "looped GPT-2 (P2)", "cg": "cg", "cg_s1": "cg, seed 1", "cg_s2": "cg, seed 2",
         "cg_dense": "cg, kernel on x and y", "line_search": "line search",
         "nesterov": "Nesterov", "gd": "gd (von Oswald)", "cg_noisy": "cg, noisy (std 0.1)",
         "cg_sparse": "cg, sparse w (3 of 5)"}


def load(path):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return None


def seconds(log):
    try:
        m = re.search(r"trained \d+ steps in (\d+)m(\d+)s", open(log).read())
        return int(m.group(1)) * 60 + int(m.group(2)) if m else None
    except OSError:
        return None


def run(out, group, name, model):
    d = os.path.join(out, group, name)
    ev, lp, en = (load(os.path.join(d, f)) for f in ("eval.json", "loops.json", "energy.json"))
    if not ev:
        return None
    info = load(os.path.join(out, "src", model + ".info.json")) or {}
    params = info.get("models", [{}])[0].get("num_params")
    bench = load(os.path.join(out, "src", model + ".bench.json")) or {}
    r = {"params": params, "k": ev["k"], "error": ev["model"],
         "least_squares": ev.get("least_squares"), "averaging": ev.get("averaging"),
         "train_seconds": seconds(os.path.join(out, group, name + ".log")),
         "step_seconds_2_threads": bench.get("train_step_median_s")}
    if lp:
        r["loops"] = lp["loops"]
        r["error_by_loops"] = lp["error_last_position"]
        r["trained_loops"] = lp["trained_loops"]
    if en:
        r["energy_steps_increasing"] = en["steps_increasing_total"]
        r["energy_steps_total"] = en["steps_total"]
    if "loops_used" in ev:
        r["loops_used"] = ev["loops_used"]
    return r


def fmt(v):
    if v is None:
        return "–"
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.2g}" if v >= 1e-3 else f"{v:.1e}"


def at(r, k):
    return r["error"][k] if r and k < len(r["error"]) else None


def loops_at(r, n):
    if not r or "loops" not in r or n not in r["loops"]:
        return None
    return r["error_by_loops"][r["loops"].index(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--plot")
    a = ap.parse_args()
    out = a.out
    s = {"d5": {}, "d20": {}, "fixed": {}}
    for n in D5 + ["cg_noisy", "cg_sparse"]:
        s["d5"][n] = run(out, "d5", n, SRC.get(n, n))
    for n, m in (("cg", "cg20"), ("cg_24k", "cg20"), ("line_search", "line_search20")):
        s["d20"][n] = run(out, "d20", n, m)
    for g in ("bptt", "implicit", "phantom", "jfb"):
        for m in ("cg", "line_search"):
            s["fixed"][f"{m}_{g}"] = run(out, "fixed", f"{m}_{g}", m)
    s["fixed"]["cg_halting"] = run(out, "fixed", "cg_halting", "cg")
    json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1)

    print("d = 5 (12,000 steps; error at k = 5 and k = 2d = 10; loops: b and 10b)\n")
    print("| model | parameters | k = 5 | k = 10 | 10b loops | train (s, 1 thread) | step (ms, 2 threads) | steps increasing E |")
    print("|---|---|---|---|---|---|---|---|")
    for n in D5:
        r = s["d5"][n]
        if not r:
            continue
        b = r.get("trained_loops", 10)
        inc = (f"{r['energy_steps_increasing']} of {r['energy_steps_total']}"
               if "energy_steps_total" in r else "–")
        step = r["step_seconds_2_threads"]
        print(f"| {LABEL[n]} | {fmt(r['params'])} | {fmt(at(r, 5))} | {fmt(at(r, 10))} | "
              f"{fmt(loops_at(r, 10 * b))} | {fmt(r['train_seconds'])} | "
              f"{'–' if step is None else f'{1e3 * step:.1f}'} | {inc} |")
    base = s["d5"].get("cg") or s["d5"].get("gpt2")
    if base:
        print(f"| least squares | | {fmt(base['least_squares'][5])} | {fmt(base['least_squares'][10])} | | | | |")
        print(f"| averaging | | {fmt(base['averaging'][5])} | {fmt(base['averaging'][10])} | | | | |")
    print("\nerror against k (d = 5)\n")
    ks = list(range(11))
    print("| k | " + " | ".join(str(k) for k in ks) + " |")
    print("|---" * (len(ks) + 1) + "|")
    for n in ["gpt2", "cg", "line_search", "nesterov", "gd"]:
        r = s["d5"][n]
        if r:
            print(f"| {LABEL[n]} | " + " | ".join(fmt(at(r, k)) for k in ks) + " |")
    print("\nerror against loops (d = 5, k = 10)\n")
    ls = [1, 2, 3, 4, 5, 10, 20, 50, 100]
    print("| model | " + " | ".join(str(n) for n in ls) + " |")
    print("|---" * (len(ls) + 1) + "|")
    for n in ["gpt2", "cg", "line_search", "nesterov", "gd"]:
        r = s["d5"][n]
        if r:
            print(f"| {LABEL[n]} | " + " | ".join(fmt(loops_at(r, v)) for v in ls) + " |")
    print("\nother tasks (cg, d = 5, k = 10)\n")
    for n in ("cg_noisy", "cg_sparse"):
        r = s["d5"][n]
        if r:
            print(f"| {LABEL[n]} | {fmt(at(r, 10))} | least squares {fmt(r['least_squares'][10])} |")
    print("\nd = 20 (k = 20 and k = 2d = 40)\n")
    for n, r in s["d20"].items():
        if r:
            b = r.get("trained_loops", 25)
            print(f"| {n} | {fmt(r['params'])} | {fmt(at(r, 20))} | {fmt(at(r, 40))} | "
                  f"{fmt(loops_at(r, 10 * b))} | {fmt(r['train_seconds'])} |")
    print("\nfixed points (3000 steps, k = 10)\n")
    for n, r in s["fixed"].items():
        if r:
            extra = ""
            if "loops_used" in r:
                u = r["loops_used"]
                extra = f" loops used mean {u['mean']:.1f}, max {u['max']}"
            print(f"| {n} | {fmt(at(r, 10))} |{extra}")

    if a.plot:
        def plot(svg, title, xlabel, series, logx=False):
            cmd = [a.plot, os.path.join(out, svg), "--log-y", "--title", title, "--xlabel",
                   xlabel, "--ylabel", "normalized squared error", "--y-floor", "1e-6"]
            if logx:
                cmd.append("--log-x")
            subprocess.run(cmd + series, check=True)
        d5 = lambda n: os.path.join(out, "d5", n)
        plot("error_d5.svg", "icl_linear, d = 5, 12,000 steps: kernel energies vs the looped GPT-2",
             "in-context examples k",
             [f"{d5(n)}/eval.csv:model:{LABEL[n]}" for n in ["gpt2", "cg", "line_search", "nesterov", "gd"]
              if s["d5"][n]] + [f"{d5('cg')}/eval.csv:least_squares:least squares",
                                f"{d5('cg')}/eval.csv:averaging:averaging"])
        plot("loops_d5.svg", "error at k = 10 against test-time loops (trained at b = 10)",
             "loop iterations",
             [f"{d5(n)}/loops.csv:error_last_position:{LABEL[n]}"
              for n in ["gpt2", "cg", "line_search", "nesterov", "gd"] if s["d5"][n]], logx=True)
        d20 = lambda n: os.path.join(out, "d20", n)
        if s["d20"]["cg"]:
            plot("error_d20.svg", "icl_linear, d = 20, 12,000 steps", "in-context examples k",
                 [f"{d20(n)}/eval.csv:model:{n}" for n in ("cg", "cg_24k", "line_search")
                  if s["d20"][n]]
                 + [f"{d20('cg')}/eval.csv:least_squares:least squares",
                    f"{d20('cg')}/eval.csv:averaging:averaging"])
            plot("loops_d20.svg", "d = 20: error at k = 40 against loops (trained at b = 25)",
                 "loop iterations",
                 [f"{d20(n)}/loops.csv:error_last_position:{n}"
                  for n in ("cg", "cg_24k", "line_search") if s["d20"][n]], logx=True)


if __name__ == "__main__":
    main()
