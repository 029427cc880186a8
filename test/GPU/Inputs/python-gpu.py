# python-gpu.py LIB: open a GPU library with python/unroll, run a Model forward
# without gradient, then ask for one (python-gpu.test).
import sys, torch
import unroll, unroll.torch as ut
try:
    lib = unroll.Library(sys.argv[1])
except unroll.UnrollError as e:
    print("UnrollError:", e); sys.exit(0)
print(repr(lib))
m = ut.Model(lib)
print("threads", m.threads)
xs, ys = torch.randn(2, 3, 3), torch.randn(2, 3)
with torch.no_grad():
    p = m(xs, ys)
print("forward shape", tuple(p.shape))
try:
    m(xs, ys)
except unroll.UnrollError as e:
    print("UnrollError:", e)
