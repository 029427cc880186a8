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
import json
import struct

import numpy as np
from sklearn.datasets import load_digits

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

tensors = {"X": x, "labels": labels}
header, offset, blobs = {}, 0, []
for name, t in tensors.items():
    raw = np.ascontiguousarray(t).tobytes()
    header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
    offset += len(raw)
    blobs.append(raw)
header["__metadata__"] = {"source": "sklearn.datasets.load_digits (UCI optdigits test set)",
                          "layout": "X[s, row, column] = pixel / 16"}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(a.out, "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for b in blobs:
        f.write(b)
print(f"wrote {a.out}: X {list(x.shape)}, labels of digits {sorted(set(digits.target[pick].tolist()))}")
