"""Times a compiled model's training step three ways in one run, on the same
machine: unroll-bench (the C++ runner: @M_loss_grad over the batch split
across threads, then Adam), the same library as a PyTorch op from
python/unroll (forward, P2's windowed loss, backward through @M_vjp,
torch.optim.Adam), and PyTorch eager running P2's own model
(bench/torch-bench.py). Prints a table and writes OUT/python-op.json.

usage: python-op-bench.py BUILD OUT [CONFIG] [REPEATS] [THREADS]
       CONFIG: small (default) or paper
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import torch  # noqa: E402

import unroll.torch as ut  # noqa: E402

build, out = sys.argv[1], sys.argv[2]
config = sys.argv[3] if len(sys.argv) > 3 else "small"
repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 5
threads = int(sys.argv[5]) if len(sys.argv) > 5 else 1
# name, d, D, heads, layers, positions, loops, window, points
CONFIGS = {"small": ("looped_gpt2_small", 5, 64, 4, 1, 23, 10, 5, 11),
           "paper": ("looped_gpt2", 20, 256, 8, 1, 203, 20, 15, 41)}
name, d, D, H, L, positions, loops, window, points = CONFIGS[config]
batch = 64
os.makedirs(out, exist_ok=True)
tmp = tempfile.mkdtemp()
src = os.path.join(HERE, "..", "examples", name + ".mlir")
lib = os.path.join(tmp, name + ".so")
subprocess.run([os.path.join(build, "bin", "unroll-opt"), src, "--lower-to-cpu", "-o", lib + ".mlir"],
               check=True)
subprocess.run([os.path.join(build, "bin", "unroll-translate"), lib + ".mlir", "-o", lib], check=True)
env = dict(os.environ, UNROLL_THREADS=str(threads))
med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731

bench = json.loads(subprocess.run(
    [os.path.join(build, "bin", "unroll-bench"), lib, "--batch", str(batch), "--points", str(points),
     "--repeats", str(repeats), "--threads", str(threads), "--only", "train"],
    check=True, capture_output=True, text=True, env=env).stdout)

torch.set_num_threads(threads)
torch.manual_seed(0)
model = ut.Model(lib)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
xs = torch.randn(batch, points, d)
ys = xs @ torch.randn(d)


def step():
    opt.zero_grad()
    loss = ((model.iterates(xs, ys) - ys) ** 2).mean()
    loss.backward()
    opt.step()


step()
op = []
for _ in range(repeats):
    t0 = time.perf_counter()
    step()
    op.append(time.perf_counter() - t0)

peer = json.loads(subprocess.run(
    [sys.executable, os.path.join(HERE, "torch-bench.py"), *map(str, (d, D, H, L, positions, loops,
                                                                      window, points, batch, repeats,
                                                                      threads))],
    check=True, capture_output=True, text=True).stdout)

rows = [("unroll-bench (C++ runner)", bench["train_step_median_s"]),
        ("unroll.torch.Model op", med(op)),
        ("PyTorch eager, P2's model", peer["train_step_median_s"])]
base = rows[0][1]
print("training step, %s config (b %d, T %d, batch %d, %d points), %d thread(s), median of %d"
      % (config, loops, window, batch, points, threads, repeats))
print("%-28s %12s %10s" % ("", "ms", "x runner"))
for label, t in rows:
    print("%-28s %12.2f %10.2f" % (label, 1e3 * t, t / base))
json.dump({"config": config, "threads": threads, "repeats": repeats, "batch": batch,
           "points": points, "loops": loops, "window": window,
           "unroll_bench_s": bench["train_step_s"], "op_s": op,
           "torch_eager_s": peer["train_step_s"], "torch": torch.__version__,
           "medians_s": {label: t for label, t in rows}},
          open(os.path.join(out, "python-op.json"), "w"), indent=2)
print("wrote", os.path.join(out, "python-op.json"))
