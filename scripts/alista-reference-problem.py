#!/usr/bin/env python3
"""A trained ALISTA checkpoint on the ALISTA reference code's own test
problem: its dictionary (data/D.mat, 'D' [250, 500], unit columns) and its
1,000 test codes (data/xtest_n500_p10.npy, [500, 1000]), both in the public
VITA-Group/ALISTA repository, which this project does not ship. The
checkpoint's 32 numbers (gamma_k, theta_k) were trained on another
dictionary of the same distribution; W is the analytic weight for D
(min ||W^T D||_F subject to diag(W^T D) = 1, column by column from D D^T).

The layers are written here again in NumPy, apart from the compiled ones:
x <- eta_ss(x + gamma_k W^T (b - D x), theta_k), where the largest
min(1.2 (k + 1), 13)% magnitudes past theta_k skip the shrinkage, from
x_0 = 0, noiseless b = D x*. Prints the NMSE per layer (dB, over all test
codes), without the codes past 65 nonzeros, and the per-code median.

The dictionary may also be a .safetensors file ('A' [m, n], as
`unroll-run --predict` writes it) and the codes a .safetensors file ('x'
[N, n]). With --compiled X.safetensors (the codes `unroll-run LIB --task
sparse_coding --checkpoint CHECKPOINT --predict` gave for b = D x*), it also
prints how far the compiled layers' last codes are from these.

usage: alista-reference-problem.py CHECKPOINT DICTIONARY CODES [f32|f64] [--compiled X.safetensors]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_f64 import read_f64  # noqa: E402

args = sys.argv[1:]
compiled = None
if "--compiled" in args:
    i = args.index("--compiled")
    compiled = read_f64(args[i + 1])["x"]
    del args[i:i + 2]
ckpt, dmat, xtest = args[:3]
dtype = np.float64 if len(args) > 3 and args[3] == "f64" else np.float32
latest = open(os.path.join(ckpt, "latest")).read().strip()
params = read_f64(os.path.join(ckpt, latest, "model.safetensors"))
gamma, theta = params["gamma"], params["theta"]

if dmat.endswith(".safetensors"):
    D = read_f64(dmat)["A"]
else:
    import scipy.io
    D = scipy.io.loadmat(dmat)["D"].astype(np.float64)
m, n = D.shape
G = np.linalg.solve(D @ D.T, D)
W = G / (D * G).sum(0, keepdims=True)
if xtest.endswith(".safetensors"):
    x = read_f64(xtest)["x"]
else:
    x = np.load(xtest).T.astype(np.float64)  # the reference stores [n, codes]
if x.shape[1] != n:
    sys.exit(f"{xtest}: codes of size {x.shape[1]}, the dictionary has {n} columns")

Dt, Wt, xt = D.astype(dtype), W.astype(dtype), x.astype(dtype)
b = xt @ Dt.T
xh = np.zeros_like(xt)
total = (x ** 2).sum()
nnz = (x != 0).sum(1)
print(f"{ckpt} ({latest}) on {dmat} (m = {m}, n = {n}) and {xtest} ({len(x)} codes, "
      f"{(nnz > 65).sum()} with more than 65 nonzeros), {np.dtype(dtype).name}")
print(f"{'layer':>6}  {'NMSE dB':>8}")
for k in range(len(gamma)):
    z = xh + dtype(gamma[k]) * ((b - xh @ Dt.T) @ Wt)
    a = np.abs(z)
    p = min(1.2 * (k + 1), 13.0)
    cut = np.sort(a, axis=1)[:, int(round((1 - p / 100) * (n - 1)))][:, None]
    free = (a > theta[k]) & (a > cut)
    xh = np.where(free, z, np.sign(z) * np.maximum(a - dtype(theta[k]), 0))
    err = ((xh.astype(np.float64) - x) ** 2).sum(1)
    print(f"{k + 1:6d}  {10 * np.log10(err.sum() / total):8.2f}")
keep = nnz <= 65
print(f"layer {len(gamma)} without the codes past 65 nonzeros: "
      f"{10 * np.log10(err[keep].sum() / (x[keep] ** 2).sum()):.2f} dB; "
      f"per-code median {np.median(10 * np.log10(err / (x ** 2).sum(1))):.1f} dB")
if compiled is not None:
    ce = ((compiled - x) ** 2).sum()
    print(f"the compiled layers' codes: NMSE {10 * np.log10(ce / total):.2f} dB, "
          f"max |difference| from these {np.abs(compiled - xh).max():.1e}")
