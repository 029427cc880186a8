#!/usr/bin/env python3
"""Converts scikit-learn's bundled digits data set (1,797 8x8 images of
handwritten digits, UCI; shipped by Debian's python3-sklearn, no download)
into safetensors for `unroll-run --task energy --input`.

Each image becomes one sample of n = 8 tokens (its rows) with d = 8 features
(the row's pixels scaled from 0..16 to 0..1, so X >= 0 and the non-negativity
indicator of P1's energy is finite at Y_0 = X).

  scripts/digits-to-safetensors.py OUT.safetensors [--samples 200] [--seed 0]

Writes 'X' [samples, 8, 8] (F64) and 'labels' [samples] (F64), samples drawn
without replacement with a fixed seed.
"""
import argparse
import os
import sys

import numpy as np
from sklearn.datasets import load_digits

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_f64 import write_f64  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--samples", type=int, default=200)
ap.add_argument("--seed", type=int, default=0)
a = ap.parse_args()

digits = load_digits()
rng = np.random.default_rng(a.seed)
pick = rng.choice(len(digits.images), size=a.samples, replace=False)
x = (digits.images[pick] / 16.0).astype("<f8")
labels = digits.target[pick].astype("<f8")

write_f64(a.out, {"X": x, "labels": labels},
          {"source": "sklearn.datasets.load_digits (UCI optdigits test set)",
           "layout": "X[s, row, column] = pixel / 16"})
print(f"wrote {a.out}: X {list(x.shape)}, labels of digits {sorted(set(digits.target[pick].tolist()))}")
