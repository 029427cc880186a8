#!/usr/bin/env python3
"""Where a trained learned unrolling's NMSE comes from, sample by sample:
draws N fresh codes (Bernoulli(0.1) x N(0, 1)) for the dictionary a
checkpoint was trained for, predicts their codes with
`unroll-run --task sparse_coding --checkpoint DIR --predict`, and prints
the NMSE over all samples and over those with at most 55/60/65 nonzeros,
per-sample percentiles, and the share of the error from the worst 1%.

usage: sparse-coding-tail.py UNROLL_RUN LIB CHECKPOINT [N] [SEED]
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_f64 import read_f64 as read, write_f64  # noqa: E402


run, lib, ckpt = sys.argv[1:4]
N = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
seed = int(sys.argv[5]) if len(sys.argv) > 5 else 5
tmp = tempfile.mkdtemp()


def predict(b):
    write_f64(os.path.join(tmp, "b.safetensors"), {"b": b})
    subprocess.run([run, lib, "--task", "sparse_coding", "--checkpoint", ckpt, "--predict", "--input",
                    os.path.join(tmp, "b.safetensors"), "--output", os.path.join(tmp, "x.safetensors")],
                   check=True, capture_output=True)
    return read(os.path.join(tmp, "x.safetensors"))


A = predict(np.zeros((1, 250)))["A"]  # the checkpoint's dictionary
m, n = A.shape
r = np.random.default_rng(seed)
x = r.standard_normal((N, n)) * (r.random((N, n)) < 0.1)
xh = predict(x @ A.T)["x"]
err, norm, nnz = ((xh - x) ** 2).sum(1), (x ** 2).sum(1), (x != 0).sum(1)
db = lambda e, s: 10 * np.log10(e.sum() / s.sum())  # noqa: E731
print("%s on %d fresh samples (seed %d): NMSE %.2f dB" % (ckpt, N, seed, db(err, norm)))
for cap in (55, 60, 65):
    keep = nnz <= cap
    print("  samples with <= %d nonzeros (%.1f%%): %.2f dB" % (cap, 100 * keep.mean(), db(err[keep], norm[keep])))
per = 10 * np.log10(err / norm)
worst = np.argsort(-err)[:N // 100]
print("  per sample: median %.1f dB, 99th percentile %.1f dB, worst %.1f dB" % (
    np.median(per), np.percentile(per, 99), per.max()))
print("  the worst 1%% of samples hold %.1f%% of the error (mean %.1f nonzeros; the support "
      "selection keeps at most %d)" % (100 * err[worst].sum() / err.sum(), nnz[worst].mean(), round(0.13 * n)))
