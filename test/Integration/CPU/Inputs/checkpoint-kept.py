"""Compares two evaluations of one shipped checkpoint (the JSON reports of
unroll-run --task sparse_coding --checkpoint, on two seeds' samples):

  checkpoint-kept.py A.json B.json LAYER BOUND

Neither trained (steps 0); the NMSE at LAYER within 1 dB between the seeds;
the NMSE at the last layer below BOUND dB on both. (Deep layers' NMSE near
-60 dB and beyond is set by a few codes whose support the selection misses, so it
varies by several dB between small sample sets; the middle layers' does not.)"""
import json
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
layer, bound = int(sys.argv[3]), float(sys.argv[4])
x, y = a["nmse_db"][layer], b["nmse_db"][layer]
lx, ly = a["nmse_db"][-1], b["nmse_db"][-1]
ok = a["steps"] == 0 and b["steps"] == 0 and abs(x - y) <= 1.0 and max(lx, ly) < bound
print("kept" if ok else "NOT kept",
      f"layer {layer}: {x:.2f} dB (seed {a['seed']}) vs {y:.2f} dB (seed {b['seed']}); "
      f"last layer {lx:.2f} / {ly:.2f} dB, bound {bound} dB")
