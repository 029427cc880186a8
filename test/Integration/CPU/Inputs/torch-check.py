"""Loads an unroll checkpoint into the PyTorch peer of P2's model with
load_state_dict(strict=True) and compares its predictions with unroll-run's.

usage: torch-check.py make-prompts OUT d k B | compare CKPT PROMPTS PREDS d D H L positions loops
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../../../../bench"))
import torch  # noqa: E402
from p2_torch import LoopedTransformer, read_safetensors, write_safetensors  # noqa: E402

torch.manual_seed(0)
if sys.argv[1] == "make-prompts":
    out, d, k, B = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    xs = torch.randn(B, k, d)
    ys = xs @ torch.randn(d)
    write_safetensors(out, {"xs": xs, "ys": ys})
    sys.exit(0)

ckpt, prompts, preds = sys.argv[2:5]
d, D, H, L, positions, loops = map(int, sys.argv[5:11])
m = LoopedTransformer(d, D, H, L, positions)
state = read_safetensors(ckpt)
missing = m.load_state_dict(state, strict=True)  # raises on any mismatch
print("load_state_dict(strict=True): %d tensors" % len(state))
p = read_safetensors(prompts)
with torch.no_grad():
    ours = m(p["xs"], p["ys"], loops, window=1)[-1]
theirs = read_safetensors(preds)["preds"]
err = float((ours - theirs).abs().max() / ours.abs().max())
print("max |torch - unroll| / max |torch| = %.3g" % err)
print("PASS" if err < 1e-4 else "FAIL")
sys.exit(0 if err < 1e-4 else 1)
