#!/usr/bin/env python3
"""Would Anderson acceleration help halting? A NumPy probe, not part of unroll.

  anderson-probe.py CKPT_DIR PROMPTS.safetensors

On a trained examples/energy_icl.mlir checkpoint (the forward of
scripts/energy_icl_numpy.py), counts the iterations each prompt needs until
||f(Y) - Y|| <= tol ||Y|| with the plain iteration Y <- f(Y) and with
Anderson acceleration (type II, memory m, least squares over the last m
residual differences), for tol 1e-3, 1e-4, 1e-6 (cap 500), and prints the
means. Prompts: energy_icl_numpy.py make PROMPTS B K D.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import energy_icl_numpy as E  # noqa: E402


def main():
    th, pr = E.checkpoint(sys.argv[1]), E.read(sys.argv[2])
    B = pr["xs"].shape[0]
    P, step = E.iteration(th, pr["xs"], pr["ys"])

    def f(Y, b):  # one prompt's step: the batched one on a batch of one
        return step_one[b](Y[None])[0][0]

    step_one = [E.iteration(th, pr["xs"][b:b + 1], pr["ys"][b:b + 1])[1] for b in range(B)]

    def loops(tol, m, cap=500):
        used = []
        for b in range(B):
            X, dF, dG, Fp, Gp = P[b].copy(), [], [], None, None
            for t in range(1, cap + 1):
                G = f(X, b)
                F = G - X
                if np.linalg.norm(F) <= tol * np.linalg.norm(X):
                    break
                if m and Fp is not None:
                    dF, dG = (dF + [(F - Fp).ravel()])[-m:], (dG + [(G - Gp).ravel()])[-m:]
                Fp, Gp = F, G
                if m and dF:
                    g = np.linalg.lstsq(np.array(dF).T, F.ravel(), rcond=None)[0]
                    X = G - (np.array(dG).T @ g).reshape(G.shape)
                else:
                    X = G
            used.append(t)
        return np.mean(used)

    print("mean iterations to halt (cap 500): plain / Anderson m = 1, 3, 5")
    for tol in [1e-3, 1e-4, 1e-6]:
        print(f"tol {tol:g}: {loops(tol, 0):.1f} / {loops(tol, 1):.1f}, {loops(tol, 3):.1f}, "
              f"{loops(tol, 5):.1f}")


if __name__ == "__main__":
    main()
