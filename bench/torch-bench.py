"""Times P2's model in PyTorch (the peer of unroll-bench): one training step
(forward over b iterations, backward through the last T, Adam) and one
forward at b, batch 64, median of R repeats after a warm-up. Prints JSON.

usage: torch-bench.py d D H L positions loops window points batch repeats threads
                     [device [compile [precision]]]

device: cpu (default) or cuda. compile: 0 (eager, the default), 1 (the model
in torch.compile, PyTorch >= 2) or max-autotune (torch.compile(mode=
"max-autotune"): Inductor times GEMM and fused-kernel variants and keeps the
fastest, and uses CUDA graphs). precision: fp32 (the default: matmuls in full
f32, TF32 off, as unroll's FP32 kernels), tf32 (TF32 matmuls allowed,
torch.backends.cuda.matmul.allow_tf32 = True, as unroll's precision=tf32)
or bf16 (the forward and loss under torch.autocast(bfloat16): bf16 matmul
operands, f32 accumulation, f32 parameters and Adam). On cuda the timings
synchronize the device.
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
mode = sys.argv[13] if len(sys.argv) > 13 else "0"
precision = sys.argv[14] if len(sys.argv) > 14 else "fp32"
if mode not in ("0", "1", "max-autotune") or precision not in ("fp32", "tf32", "bf16"):
    sys.exit(f"torch-bench.py: compile must be 0, 1 or max-autotune (got {mode!r}); "
             f"precision fp32, tf32 or bf16 (got {precision!r})")
compiled = mode != "0"
torch.set_num_threads(threads)
torch.manual_seed(0)
tf32 = precision == "tf32"
torch.backends.cuda.matmul.allow_tf32 = tf32
torch.backends.cudnn.allow_tf32 = tf32
torch.set_float32_matmul_precision("high" if tf32 else "highest")
model = LoopedTransformer(d, D, H, L, positions).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
xs = torch.randn(batch, points, d).to(device)
ys = xs @ torch.randn(d).to(device)
if mode == "1":
    model = torch.compile(model)
elif mode == "max-autotune":
    model = torch.compile(model, mode="max-autotune")


def autocast():
    return torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=precision == "bf16")


def step():
    opt.zero_grad()
    with autocast():
        preds = model(xs, ys, loops, window)
        loss = sum(((p.float() - ys) ** 2).mean() for p in preds) / len(preds)
    loss.backward()
    opt.step()


def forward():
    with torch.no_grad(), autocast():
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
                  "compiled": compiled, "compile_mode": mode, "precision": precision,
                  "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3"),
                  "train_step_s": ts, "forward_s": fs,
                  "train_step_median_s": med(ts), "forward_median_s": med(fs)}))
