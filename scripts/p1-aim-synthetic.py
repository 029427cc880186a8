#!/usr/bin/env python3
"""P1's synthetic pair for alternating inexact minimization (Alg. 1, Fig. 2-3).

  f(Y) = ||S Y||^2 + ||Y - B1||^2   (left transform: mixes tokens, like attention)
  g(Y) = ||Y W||^2 + ||Y - B2||^2   (right transform: mixes features, like the FFN)
  h = f + g

AIM takes one gradient step on f, then one on g, from the same variable, with
fixed step sizes. The minimizer of h solves the Sylvester equation
(S^T S + I) Y + Y (W W^T + I) = B1 + B2, solved here in closed form (Kronecker
form), so the distance to the optimum and h - h* are exact. Writes, into OUT:
  aim.csv       t (in half steps), h, h - h*, ||Y - Y*||, the step taken (f | g)
  pca.csv       the trajectory Y_t projected on its first two principal
                components, and Y* in the same coordinates
  summary.json  n, d, steps, seed, h*, the first increase of h, the last 50
                half steps' range of h - h*
  aim.svg, pca.svg (through unroll-plot when --plot BIN/unroll-plot is given)

  scripts/p1-aim-synthetic.py OUT [--n 6] [--d 4] [--steps 60] [--alpha 0.2]
                              [--seed 0] [--plot build/bin/unroll-plot]
"""
import argparse
import json
import os
import subprocess

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--n", type=int, default=6)
ap.add_argument("--d", type=int, default=4)
ap.add_argument("--steps", type=int, default=60, help="AIM iterations (each: a step on f, then on g)")
ap.add_argument("--alpha", type=float, default=0.2, help="step size of both half steps")
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--plot", default="", help="unroll-plot binary for the SVGs")
a = ap.parse_args()
os.makedirs(a.out, exist_ok=True)

rng = np.random.default_rng(a.seed)
n, d = a.n, a.d
S, W = rng.standard_normal((n, n)) / np.sqrt(n), rng.standard_normal((d, d)) / np.sqrt(d)
B1, B2 = rng.standard_normal((n, d)), rng.standard_normal((n, d))

f = lambda Y: np.sum((S @ Y) ** 2) + np.sum((Y - B1) ** 2)
g = lambda Y: np.sum((Y @ W) ** 2) + np.sum((Y - B2) ** 2)
h = lambda Y: f(Y) + g(Y)
grad_f = lambda Y: 2 * S.T @ S @ Y + 2 * (Y - B1)
grad_g = lambda Y: 2 * Y @ W @ W.T + 2 * (Y - B2)

# Y* from (S^T S + I) Y + Y (W W^T + I) = B1 + B2, row-major vec(Y):
# vec(A Y) = (A kron I) vec(Y), vec(Y C) = (I kron C^T) vec(Y).
A, C = S.T @ S + np.eye(n), W @ W.T + np.eye(d)
K = np.kron(A, np.eye(d)) + np.kron(np.eye(n), C.T)
Ystar = np.linalg.solve(K, (B1 + B2).reshape(-1)).reshape(n, d)
assert np.allclose(grad_f(Ystar) + grad_g(Ystar), 0, atol=1e-9)
hstar = h(Ystar)

Y = 5 * rng.standard_normal((n, d))  # start far from the optimum
traj, rows = [Y.copy()], [(0, h(Y), h(Y) - hstar, np.linalg.norm(Y - Ystar), "start")]
for t in range(a.steps):
    for name, grad in (("f", grad_f), ("g", grad_g)):
        Y = Y - a.alpha * grad(Y)
        traj.append(Y.copy())
        rows.append((len(rows), h(Y), h(Y) - hstar, np.linalg.norm(Y - Ystar), name))

with open(os.path.join(a.out, "aim.csv"), "w") as fh:
    fh.write("half_step,h,h_minus_hstar,dist_to_optimum,step\n")
    for r in rows:
        fh.write(f"{r[0]},{r[1]:.10g},{r[2]:.10g},{r[3]:.10g},{r[4]}\n")

# PCA of the trajectory (flattened iterates), the optimum in the same frame.
X = np.array([y.reshape(-1) for y in traj])
mean = X.mean(axis=0)
_, _, vt = np.linalg.svd(X - mean, full_matrices=False)
pc = (X - mean) @ vt[:2].T
ps = (Ystar.reshape(-1) - mean) @ vt[:2].T
with open(os.path.join(a.out, "pca.csv"), "w") as fh:
    fh.write("pc1,pc2,optimum_pc2\n")
    for i, (x, y) in enumerate(pc):
        fh.write(f"{x:.10g},{y:.10g},\n")
    fh.write(f"{ps[0]:.10g},,{ps[1]:.10g}\n")

hs = np.array([r[1] for r in rows])
incr = [i for i in range(1, len(hs)) if hs[i] > hs[i - 1] * (1 + 1e-12)]
tail = np.array([r[2] for r in rows[-50:]])
summary = {
    "n": n, "d": d, "steps": a.steps, "alpha": a.alpha, "seed": a.seed,
    "h_start": hs[0], "h_star": hstar, "h_end": hs[-1],
    "first_increase_half_step": incr[0] if incr else None,
    "increases": len(incr),
    "h_minus_hstar_first_increase": (hs[incr[0]] - hstar) if incr else None,
    "last50_h_minus_hstar": [float(tail.min()), float(tail.max())],
    "dist_end": rows[-1][3],
}
json.dump(summary, open(os.path.join(a.out, "summary.json"), "w"), indent=2)
print(json.dumps(summary, indent=2), flush=True)
if a.plot:
    subprocess.run([a.plot, os.path.join(a.out, "aim.svg"), "--log-y",
                    "--title", f"AIM on h = f + g (n = {n}, d = {d}, step {a.alpha}): h - h* per half step",
                    "--xlabel", "half step (f, g, f, g, ...)", "--ylabel", "h - h* and distance to Y*",
                    os.path.join(a.out, "aim.csv") + ":h_minus_hstar:h - h*",
                    os.path.join(a.out, "aim.csv") + ":dist_to_optimum:||Y - Y*||"], check=True)
    subprocess.run([a.plot, os.path.join(a.out, "pca.svg"),
                    "--title", "AIM trajectory, first two principal components",
                    "--xlabel", "PC 1", "--ylabel", "PC 2",
                    os.path.join(a.out, "pca.csv") + ":pc2:Y_t",
                    os.path.join(a.out, "pca.csv") + ":optimum_pc2:Y* (optimum of h)"], check=True)
