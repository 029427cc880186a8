"""Prints name and shape of every tensor of a checkpoint's model.safetensors
(read from its JSON header, independently of unroll's reader), and for a
tensor named alpha whether it moved from 0.5."""
import json, os, struct, sys

d = sys.argv[1]
step = open(os.path.join(d, "latest")).read().strip()
path = os.path.join(d, step, "model.safetensors")
with open(path, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    base = 8 + n
    for name, t in sorted(header.items()):
        if name == "__metadata__":
            continue
        line = f"{name} {t['shape']}"
        if name == "alpha":
            f.seek(base + t["data_offsets"][0])
            fmt = {"F32": "<f", "F64": "<d"}[t["dtype"]]
            v = struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            line += " moved" if abs(v - 0.5) > 1e-6 else " unchanged"
        print(line)
