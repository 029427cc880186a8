"""Times P2's model in PyTorch (the peer of unroll-bench): one training step
(forward over b iterations, backward through the last T, Adam) and one
forward at b, batch 64, median of R repeats after a warm-up. Prints JSON.

usage: torch-bench.py d D H L positions loops window points batch repeats threads
                     [device [compile]]

device: cpu (default) or cuda; compile: 1 to wrap the model in torch.compile
(PyTorch >= 2). On cuda the timings synchronize the device; matmuls run in
full f32 (TF32 off), as unroll's kernels do.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import torch  # noqa: E402
from p2_torch import LoopedTransformer  # noqa: E402

d, D, H, L, positions, loops, window, points, batch, repeats, threads = map(int, sys.argv[1:12])
device = sys.argv[12] if len(sys.argv) > 12 else "cpu"
compiled = len(sys.argv) > 13 and sys.argv[13] == "1"
torch.set_num_threads(threads)
torch.manual_seed(0)
if device == "cuda":
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
model = LoopedTransformer(d, D, H, L, positions).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
xs = torch.randn(batch, points, d).to(device)
ys = xs @ torch.randn(d).to(device)
if compiled:
    model = torch.compile(model)


def step():
    opt.zero_grad()
    preds = model(xs, ys, loops, window)
    loss = sum(((p - ys) ** 2).mean() for p in preds) / len(preds)
    loss.backward()
    opt.step()


def forward():
    with torch.no_grad():
        model(xs, ys, loops, loops)


def sync():
    if device == "cuda":
        torch.cuda.synchronize()


def timed(fn):
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


step()
forward()
ts = [timed(step) for _ in range(repeats)]
fs = [timed(forward) for _ in range(repeats)]
med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                  "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                  "compiled": compiled,
                  "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
                  "train_step_s": ts, "forward_s": fs,
                  "train_step_median_s": med(ts), "forward_median_s": med(fs)}))
