"""Compares unroll's in-context baselines (tooling/Baselines.cpp, through
unroll-baseline-check) with scikit-learn on the same data.

  python3 baselines-vs-sklearn.py TOOL WORKDIR

Trees and boosting must agree to rounding (same greedy rule) on the training
inputs: there every node's partition and leaf value is compared. On fresh
inputs they may differ where several features split a small node's examples
the same way (equal gain; scikit-learn breaks such ties by a random feature
order), so fresh inputs are compared only for shallow trees. The data are
float32-representable because scikit-learn's trees compare in float32. Lasso
must agree to 1e-6. The network has no exact peer (its own init and full-batch
Adam): it must fit its training data and generalize on a planted 2-layer ReLU
target better than least squares does. Prints one line per case and PASS.
"""
import json
import os
import subprocess
import sys

import numpy as np
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import Lasso
from sklearn.tree import DecisionTreeRegressor

tool, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)
rng = np.random.default_rng(0)
failures = 0


def ours(method, x, y, test, **params):
    path = os.path.join(work, f"{method}.json")
    with open(path, "w") as f:
        json.dump({"x": x.tolist(), "y": y.tolist(), "test": test.tolist(), **params}, f)
    out = subprocess.run([tool, method, path], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def report(name, err, tol):
    global failures
    ok = err <= tol
    failures += not ok
    print(f"{name:40s} max |ours - sklearn| = {err:.3g} (tolerance {tol:g}) {'ok' if ok else 'FAIL'}")


def f32(a):
    return a.astype(np.float32).astype(np.float64)


# P2's tree task: depth-4 trees on sign splits, N(0,1) leaves; d = 20.
for n, d, depth in [(40, 20, 4), (100, 20, 4), (100, 20, None), (60, 5, 2), (100, 20, 3), (30, 3, None)]:
    x, test = f32(rng.standard_normal((n, d))), f32(rng.standard_normal((200, d)))
    y = f32(rng.standard_normal(n) + 2 * (x[:, 0] > 0) - (x[:, 1] > 0))
    params = {} if depth is None else {"max_depth": depth}
    fresh = depth is not None and depth <= 3
    at = test if fresh else x
    r = ours("tree", x, y, at, **params)
    sk = DecisionTreeRegressor(max_depth=depth, random_state=0).fit(x, y)
    report(f"tree n={n} d={d} depth={depth or 'unlimited'} ({'fresh' if fresh else 'training'} x)",
           np.max(np.abs(np.array(r["pred"]) - sk.predict(at))), 1e-9)
    if r["depth"] != sk.get_depth() or r["leaves"] != sk.get_n_leaves():
        failures += 1
        print(f"  tree shape differs: depth {r['depth']} vs {sk.get_depth()}, leaves {r['leaves']} vs {sk.get_n_leaves()} FAIL")

for n, d in [(50, 20), (100, 20), (26, 8)]:
    x, test = f32(rng.standard_normal((n, d))), f32(rng.standard_normal((200, d)))
    y = f32(np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.1 * rng.standard_normal(n))
    r = ours("boost", x, y, x, trees=50, max_depth=4, lr=0.1)
    sk = GradientBoostingRegressor(n_estimators=50, max_depth=4, learning_rate=0.1,
                                   criterion="squared_error", random_state=0).fit(x, y)
    report(f"boosted trees n={n} d={d} (50, depth 4, lr 0.1)", np.max(np.abs(np.array(r["pred"]) - sk.predict(x))), 1e-7)

for n, d in [(10, 20), (40, 20)]:
    w = np.zeros(d)
    w[rng.choice(d, 3, replace=False)] = rng.standard_normal(3)
    x, test = rng.standard_normal((n, d)), rng.standard_normal((50, d))
    y = x @ w
    r = ours("lasso", x, y, test, alpha=0.01)
    sk = Lasso(alpha=0.01, fit_intercept=False, tol=1e-12, max_iter=100000).fit(x, y)
    report(f"lasso n={n} d={d} (alpha 0.01)", np.max(np.abs(np.array(r["coef"]) - sk.coef_)), 1e-6)

# The network on a planted 2-layer ReLU target (P2's relu2nn task, hidden 100).
d, n = 20, 100
w1, w2 = rng.standard_normal((d, 100)), rng.standard_normal(100)
target = lambda x: np.sqrt(2 / 100) * np.maximum(x @ w1, 0) @ w2
x, test = rng.standard_normal((n, d)), rng.standard_normal((500, d))
y, yt = target(x), target(test)
r = ours("net", x, y, test, hidden=100, steps=300, lr=5e-3)
ls = np.linalg.lstsq(x, y, rcond=None)[0]
net_err = np.mean((np.array(r["pred"]) - yt) ** 2) / np.mean(yt ** 2)
ls_err = np.mean((test @ ls - yt) ** 2) / np.mean(yt ** 2)
train_rel = r["train_mse"] / np.mean(y ** 2)
ok = train_rel < 0.05 and net_err < ls_err
failures += not ok
print(f"2-layer net (Adam 5e-3, 300 steps): train {train_rel:.3g}, test {net_err:.3g} vs least squares {ls_err:.3g} {'ok' if ok else 'FAIL'}")

print("PASS" if failures == 0 else f"FAIL ({failures})")
sys.exit(1 if failures else 0)
