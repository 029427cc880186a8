"""Writes small (and deliberately broken) .safetensors files for the tests.

Plain Python (struct + json) so that the tests need no numpy.
usage: make-safetensors.py KIND OUT
"""
import json
import struct
import sys


def write(path, tensors, header_override=None, data_override=None, hlen=None):
    header, data, off = {}, b"", 0
    for name, (dtype, shape, values) in tensors.items():
        fmt = "<%d%s" % (len(values), "f" if dtype == "F32" else "d")
        raw = struct.pack(fmt, *values)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        data += raw
        off += len(raw)
    if header_override:
        header.update(header_override)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h) if hlen is None else hlen) + h)
        f.write(data if data_override is None else data_override)


# Three tokens in R^2 for examples/softmax_attention.mlir; E(X) in closed
# form: Σ_ij −exp(−½‖x_i − x_j‖²) + ½‖X‖² = −1.6129901990159485.
X3 = ("F64", [3, 2], [1.0, 0.0, 0.0, 2.0, 1.0, 1.0])

kind, out = sys.argv[1], sys.argv[2]
if kind == "x3":
    write(out, {"X": X3})
elif kind == "x3-f32":
    write(out, {"X": ("F32", [3, 2], X3[2])})
elif kind == "truncated":
    write(out, {"X": X3}, data_override=struct.pack("<3d", 1, 0, 0))
elif kind == "header-too-long":
    write(out, {"X": X3}, hlen=1 << 40)
elif kind == "overlap":
    write(out, {"X": X3, "Z": ("F64", [1], [0.0])},
          header_override={"Z": {"dtype": "F64", "shape": [1], "data_offsets": [8, 16]}})
elif kind == "bad-dtype":
    write(out, {"X": X3}, header_override={"X": {"dtype": "I64", "shape": [3, 2], "data_offsets": [0, 48]}})
elif kind == "not-json":
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", 5) + b"{oops")
elif kind == "x-rank1":
    write(out, {"X": ("F64", [6], X3[2])})
elif kind == "param-shape":  # for examples/custom_rho_energy.mlir: W_f is 8x8
    write(out, {"X": ("F64", [2, 8], [0.5] * 16), "W_f": ("F64", [4, 4], [0.0] * 16)})
elif kind == "param-nan":
    write(out, {"X": ("F64", [2, 8], [0.5] * 16), "W_f": ("F64", [8, 8], [float("nan")] * 64)})
elif kind in ("prompts", "prompts-nan"):  # 2 prompts of 7 points in R^3
    xs = [((7 * i + 3) % 11 - 5) / 5.0 for i in range(2 * 7 * 3)]
    ys = [((5 * i + 2) % 9 - 4) / 4.0 for i in range(2 * 7)]
    if kind == "prompts-nan":
        xs[(1 * 7 + 4) * 3 + 2] = float("nan")  # xs[1, 4, 2]
    write(out, {"xs": ("F32", [2, 7, 3], xs), "ys": ("F32", [2, 7], ys)})
else:
    sys.exit("unknown kind " + kind)
