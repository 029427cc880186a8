"""The mean trace unroll-run reports for X [samples, n, d] must equal the mean
of the traces of each sample run alone (X [n, d]).

  python3 energy-batch-mean.py UNROLL_RUN LIB.so BATCH.safetensors WORKDIR
"""
import json
import struct
import subprocess
import sys

import numpy as np

run, lib, batch, work = sys.argv[1:5]
raw = open(batch, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header["X"]
s, rows, cols = meta["shape"]
b0, b1 = meta["data_offsets"]
x = np.frombuffer(raw[8 + n + b0:8 + n + b1], dtype="<f8").reshape(s, rows, cols)


def trace(path):
    out = subprocess.run([run, lib, "--task", "energy", "--input", path, "--json"],
                         capture_output=True, text=True, check=True)
    return np.array(json.loads(out.stdout)["energies"])


singles = []
for i in range(s):
    h = json.dumps({"X": {"dtype": "F64", "shape": [rows, cols], "data_offsets": [0, rows * cols * 8]}}).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    path = f"{work}/sample{i}.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + x[i].astype("<f8").tobytes())
    singles.append(trace(path))
err = np.max(np.abs(np.mean(singles, axis=0) - trace(batch)))
print(f"batch mean vs mean of {s} single runs: max abs difference {err:.3g}")
print("PASS" if err <= 1e-12 * max(1, np.max(np.abs(singles))) else "FAIL")
