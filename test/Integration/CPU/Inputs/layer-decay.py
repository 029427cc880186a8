# layer-decay.py CUT FROZEN FREE: --layer-decay scales layer j's learning
# rate in layer t's stages by R^(t - j). CUT is the run stopped after layer
# 1's stages; FROZEN and FREE went on through layer 4's at R = 1e-12 and at
# R = 1. Layer 1's parameters must stay where CUT left them in FROZEN (to
# R times the steps' size) and move in FREE.
import sys
import numpy as np

sys.path.insert(0, sys.argv[4])
from safetensors_f64 import read_f64


def layer1(ckpt):
    latest = open(ckpt + "/latest").read().strip()
    t = read_f64(ckpt + "/" + latest + "/model.safetensors")
    return np.concatenate([t["W"][0].ravel(), t["gamma"][:1], t["theta"][:1]])


cut, frozen, free = (layer1(d + "/checkpoint") for d in sys.argv[1:4])
df = np.abs(frozen - cut).max()
dm = np.abs(free - cut).max()
print("layer 1 frozen" if df <= 1e-9 else "layer 1 MOVED", "%.1e" % df)
print("layer 1 trained" if dm >= 1e-4 else "layer 1 STILL", "%.1e" % dm)
