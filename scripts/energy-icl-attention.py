#!/usr/bin/env python3
"""Where the attention of a trained energy model (examples/energy_icl.mlir:
the reweighted softmax of P1's eq. 20 step with a causal mask) goes, from
its checkpoint and fresh linear-regression prompts, in plain NumPy:

  scripts/energy-icl-attention.py CHECKPOINT_DIR [--prompts 256] [--loops 10]

For every loop iteration: the attention mass of x tokens on themselves, on
other x tokens and on y tokens; and of each y_j token on its own x_j (the
token before it) against another x token. Learning y = w·x in context
needs y_j to take in x_j (a pairing by position).
"""
import argparse, os, sys
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from energy_icl_numpy import checkpoint, forward  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("checkpoint")
ap.add_argument("--prompts", type=int, default=256)
ap.add_argument("--points", type=int, default=11)
ap.add_argument("--loops", type=int, default=10)
a = ap.parse_args()
th = checkpoint(a.checkpoint)
d = th["_read_in.weight"].shape[1]
rng = np.random.default_rng(3)
B, K = a.prompts, a.points
xs = rng.standard_normal((B, K, d))
ys = np.einsum("bkd,bd->bk", xs, rng.standard_normal((B, d)))
n = 2 * K
isx = np.arange(n) % 2 == 0
xr = [i for i in range(2, n) if isx[i]]
yr = [i for i in range(3, n) if not isx[i]]
print(f"{B} prompts of {K} points, d = {d}, learned alpha = {th['alpha'][0]:.3f}")
print(f"{'t':>3} {'x on itself':>12} {'x on other x':>13} {'x on y':>8} | {'y_j on x_j':>11} {'y_j on other x (each)':>22}")


def report(t, A):
    xs_self = np.mean([A[:, i, i].mean() for i in xr])
    xs_y = np.mean([A[:, i, ~isx].sum(-1).mean() for i in xr])
    xs_ox = np.mean([(A[:, i, isx].sum(-1) - A[:, i, i]).mean() for i in xr])
    y_own = np.mean([A[:, i, i - 1].mean() for i in yr])
    y_other = np.mean([((A[:, i, isx].sum(-1) - A[:, i, i - 1]) / ((i + 1) // 2 - 1)).mean() for i in yr])
    print(f"{t:>3} {xs_self:>12.3f} {xs_ox:>13.3f} {xs_y:>8.3f} | {y_own:>11.3f} {y_other:>22.3f}")


forward(th, xs, ys, a.loops, report)
