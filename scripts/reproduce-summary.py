#!/usr/bin/env python3
"""The tables of scripts/reproduce-small.sh's results (markdown on stdout):
per task, the error at k = 2d of the looped and the 12-layer model (with
5-95% bands) beside the task's baselines; the weight-tying ablation and the
loop studies; every model trained at twice the steps beside its
STEPS-step run, with a verdict on whether it still improves; and where each
chain ended (the looped block at the small config's b = 10 and, where
trained, at P2's b = 20, and the 12-layer model), each looped model
compared with the 12-layer one at the most steps both reached.

  scripts/reproduce-summary.py OUT STEPS
  scripts/reproduce-summary.py --improving SHORTER/eval.json LONGER/eval.json
      (exit status 0 when the longer run still improves on the shorter)
  scripts/reproduce-summary.py --convergence OUT STEPS
      (writes OUT/<task>.convergence.csv: each chain's error at k = 2d with
      its band against the training steps, and the task's reference
      baseline, for the plot of whether and where each chain stopped)
  scripts/reproduce-summary.py --label NAME
      (prints a chain's or a baseline's name as the tables and the plots'
      legends write it: looped_b20 -> "looped, b = 20"; NAME when unknown)
"""
import json
import math
import os
import sys

def at(e, key, k):
    v = e[key][k] if key in e and k < len(e[key]) else None
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def improving(one, two, k):
    """Whether the longer run `two` still improves on the shorter `one` at k:
    its 5-95% band lies wholly below the other's. (Both are evaluated on the
    same prompts, so overlapping bands are a conservative test.)"""
    lo1, hi2 = at(one, "model_p05", k), at(two, "model_p95", k)
    return None if lo1 is None or hi2 is None else hi2 < lo1


if len(sys.argv) == 4 and sys.argv[1] == "--improving":
    # Exit status 0 when the second evaluation still improves on the first
    # at the last k (reproduce-small.sh doubles the steps while it does).
    one, two = (json.load(open(p)) for p in sys.argv[2:])
    sys.exit(0 if improving(one, two, len(one["k"]) - 1) else 1)

TASKS = ["icl_linear", "icl_noisy_linear", "icl_sparse_linear", "icl_relu2nn", "icl_decision_tree"]
BASELINES = {
    "least_squares": "least squares", "averaging": "averaging", "nearest_neighbors_3": "3-NN",
    "lasso_0.01": "Lasso (α 0.01)", "tree_depth4": "tree, depth 4", "tree_unlimited": "tree, unlimited",
    "boosted_trees": "boosted trees", "relu_net_adam": "2-layer ReLU net (Adam)",
}


# The chains of reproduce-small.sh: run-directory name, row label.
MODELS = [("looped", "looped, b = 10"), ("looped_b20", "looped, b = 20"), ("gpt2_L12", "L = 12")]

if len(sys.argv) == 3 and sys.argv[1] == "--label":
    print(dict(MODELS).get(sys.argv[2], BASELINES.get(sys.argv[2], sys.argv[2])))
    sys.exit(0)

convergence = len(sys.argv) == 4 and sys.argv[1] == "--convergence"
if convergence:
    del sys.argv[1]
out, steps = sys.argv[1], int(sys.argv[2])


def load(*parts):
    p = os.path.join(out, *parts)
    return json.load(open(p)) if os.path.exists(p) else None


def chain(task, model, name="eval.json"):
    """The runs of reproduce-small.sh's chain for (task, model), shortest
    first: (steps, run directory, the loaded `name`), while they exist."""
    runs, m = [], 1
    while True:
        d = model + (f"_x{m}" if m > 1 else "")
        j = load(task, d, name)
        if not j:
            return runs
        runs.append((steps * m, d, j))
        m *= 2

# The baseline each task's convergence plot shows beside the models (least
# squares is exact on the noiseless tasks, so it has no place on a log axis).
REFERENCE = {"icl_noisy_linear": "least_squares", "icl_sparse_linear": "lasso_0.01",
             "icl_relu2nn": "relu_net_adam", "icl_decision_tree": "nearest_neighbors_3"}


def write_convergence(task):
    """OUT/<task>.convergence.csv: a row per step count any chain reached,
    a column (and its 5-95% band) per chain, empty where a chain has no run."""
    chains = [(model, chain(task, model)) for model, _ in MODELS]
    chains = [(model, runs) for model, runs in chains if runs]
    if not chains:
        return None
    by_steps = {}
    for model, runs in chains:
        for n, _, e in runs:
            k = len(e["k"]) - 1
            by_steps.setdefault(n, {})[model] = [at(e, key, k) for key in ("model", "model_p05", "model_p95")]
    first = chains[0][1][0][2]
    ref = REFERENCE.get(task)
    ref_value = at(first, ref, len(first["k"]) - 1) if ref else None
    header = ["steps"] + [f"{m}{sfx}" for m, _ in chains for sfx in ("", "_p05", "_p95")]
    header += [ref] if ref_value is not None else []
    path = os.path.join(out, f"{task}.convergence.csv")
    with open(path + ".tmp", "w") as f:
        f.write(",".join(header) + "\n")
        for n in sorted(by_steps):
            row = [str(n)]
            for model, _ in chains:
                row += ["" if v is None else repr(v) for v in by_steps[n].get(model, [None] * 3)]
            row += [repr(ref_value)] if ref_value is not None else []
            f.write(",".join(row) + "\n")
    os.replace(path + ".tmp", path)
    return path


if convergence:
    for task in TASKS:
        path = write_convergence(task)
        if path:
            print(f"wrote {path}")
    sys.exit(0)


def seconds(task, model):
    p = os.path.join(out, task, model, "seconds")
    return int(open(p).read()) if os.path.exists(p) else None


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) >= 1e-3 else f"{v:.1e}"


def model_cell(e, k):
    return f"{fmt(at(e, 'model', k))} [{fmt(at(e, 'model_p05', k))}, {fmt(at(e, 'model_p95', k))}]"


print(f"Error at k = 2d = 10 (normalized squared error, zero predictor = 1), 1280 prompts; "
      f"{steps} steps each.\n")
print("| task | looped, L = 1 [5-95%] | standard, L = 12 [5-95%] | baselines | time looped / L = 12 |")
print("|---|---|---|---|---|")
for task in TASKS:
    lo, st = load(task, "looped", "eval.json"), load(task, "gpt2_L12", "eval.json")
    if not lo:
        continue
    k = len(lo["k"]) - 1
    bl = ", ".join(f"{name} {fmt(at(lo, key, k))}" for key, name in BASELINES.items()
                   if at(lo, key, k) is not None)
    t = f"{seconds(task, 'looped')} s / {seconds(task, 'gpt2_L12')} s"
    print(f"| {task} | {model_cell(lo, k)} | {model_cell(st, k) if st else '-'} | {bl} | {t} |")

print("\nError against k (looped / standard):\n")
lo = load("icl_linear", "looped", "eval.json")
if lo:
    ks = lo["k"]
    print("| task | model | " + " | ".join(f"k={k}" for k in ks) + " |")
    print("|---|---|" + "---|" * len(ks))
    for task in TASKS:
        for model, name in (("looped", "looped"), ("gpt2_L12", "L = 12")):
            e = load(task, model, "eval.json")
            if e:
                print(f"| {task} | {name} | " + " | ".join(fmt(at(e, "model", k)) for k in ks) + " |")


def verdict(one, two, k, stopped="stopped (bands overlap)"):
    still = improving(one, two, k)
    return "-" if still is None else "still improving" if still else stopped


def ratio_cell(one, two, k):
    """one's error at k over two's, as '2.00x' ('-' when either is missing)."""
    a, b = at(one, "model", k), at(two, "model", k)
    return f"{a / b:.2f}x" if a and b else "-"


print("\nDoes the error at k = 10 still improve when the steps double? A model still improves "
      "when the longer run's 5-95% band lies wholly below the shorter run's.\n")
print("| task | model | steps | error before | error after | ratio | verdict | time of the longer run |")
print("|---|---|---|---|---|---|---|---|")
for task in TASKS:
    for model, name in MODELS:
        runs = chain(task, model)
        for (n1, _, one), (n2, dir2, two) in zip(runs, runs[1:]):
            k = len(one["k"]) - 1
            print(f"| {task} | {name} | {n1} → {n2} | {model_cell(one, k)} | {model_cell(two, k)} | "
                  f"{ratio_cell(one, two, k)} | {verdict(one, two, k)} | {seconds(task, dir2)} s |")

ty = load("icl_linear", "tying", "eval.json")
if lo and ty:
    k = len(lo["k"]) - 1
    print(f"\nWeight tying without injection, icl_linear, k = 10: {model_cell(ty, k)} "
          f"(input injection: {model_cell(lo, k)})")

print("\nLoop study (icl_linear, 640 prompts, error at the last position):\n")
want = [1, 5, 10, 20, 50, 100, 200, 500]
print("| loops | " + " | ".join(str(l) for l in want) + " |")
print("|---|" + "---|" * len(want))
studies = [(f"input injection, b = 10, {n} steps", j) for n, _, j in chain("icl_linear", "looped", "loops.json")]
studies += [(f"input injection, b = 20, {n} steps", j) for n, _, j in chain("icl_linear", "looped_b20", "loops.json")]
studies += [(f"weight tying, no injection, {n} steps", j) for n, _, j in chain("icl_linear", "tying", "loops.json")]
for name, j in studies:
    by = dict(zip(j["loops"], j["error_last_position"]))
    print(f"| {name} | " + " | ".join(fmt(by.get(l)) for l in want) + " |")


def chain_end(runs):
    """The last run of a chain and how the chain ended: 'stopped' when the
    last doubling no longer improved, 'still improving' when it did (the
    chain hit MAX_STEPS or is still training), '-' for a single run."""
    n, _, e = runs[-1]
    if len(runs) < 2:
        return n, e, "-"
    return n, e, verdict(runs[-2][2], e, len(e["k"]) - 1, f"stopped (no better than {n // 2})")


print("\nWhere each chain ended, and each looped model against the 12-layer one at the most "
      "steps both were trained for:\n")
print("| task | model | last run: steps, error | ended | at equal steps: / L = 12 |")
print("|---|---|---|---|---|")
for task in TASKS:
    l12 = chain(task, "gpt2_L12")
    for model, name in MODELS:
        runs = chain(task, model)
        if not runs:
            continue
        n, e, how = chain_end(runs)
        vs = "-"
        if model != "gpt2_L12" and l12:
            common = min(len(runs), len(l12)) - 1
            a = runs[common][2]
            vs = f"{ratio_cell(a, l12[common][2], len(a['k']) - 1)} at {runs[common][0]}"
        print(f"| {task} | {name} | {n}: {model_cell(e, len(e['k']) - 1)} | {how} | {vs} |")
