"""P2's looped transformer in PyTorch, as a peer for unroll.

Written for unroll from P2's description (nanoGPT layout, pre-LN blocks,
tanh GELU, learned positions added every iteration, final LayerNorm every
iteration, input injection); module names follow P2's public model so that
state_dict keys are P2's: _read_in.*, _backbone.transformer.wpe.weight,
_backbone.transformer.h.N.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj}.*,
_backbone.transformer.ln_f.*, _read_out.*.

Also: a tiny safetensors reader/writer (no extra package needed).
"""
import json
import math
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


class Attention(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.H = H

    def forward(self, x):
        B, n, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q, k, v = (t.view(B, n, self.H, D // self.H).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(D // self.H)
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
        y = F.softmax(s, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).reshape(B, n, D))


class MLP(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.c_fc = nn.Linear(D, 4 * D)
        self.c_proj = nn.Linear(4 * D, D)

    def forward(self, x):
        return self.c_proj(gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, D, H):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D, eps=1e-5)
        self.attn = Attention(D, H)
        self.ln_2 = nn.LayerNorm(D, eps=1e-5)
        self.mlp = MLP(D)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Backbone(nn.Module):
    def __init__(self, D, H, L, positions):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wpe=nn.Embedding(positions, D),
            h=nn.ModuleList([Block(D, H) for _ in range(L)]),
            ln_f=nn.LayerNorm(D, eps=1e-5)))

    def forward(self, u):
        x = u + self.transformer.wpe.weight[: u.shape[1]]
        for blk in self.transformer.h:
            x = blk(x)
        return self.transformer.ln_f(x)


class LoopedTransformer(nn.Module):
    def __init__(self, d, D, H, L, positions, injection="add"):
        super().__init__()
        self._read_in = nn.Linear(d, D)
        self._backbone = Backbone(D, H, L, positions)
        self._read_out = nn.Linear(D, 1)
        self.injection = injection

    @staticmethod
    def combine(xs, ys):
        B, k, d = xs.shape
        yw = torch.cat([ys.view(B, k, 1), torch.zeros(B, k, d - 1, dtype=xs.dtype, device=xs.device)], dim=2)
        return torch.stack([xs, yw], dim=2).view(B, 2 * k, d)

    def forward(self, xs, ys, loops, window=None):
        """Predictions at the x positions for the last `window` iterations."""
        window = loops if window is None else min(window, loops)
        p = self._read_in(self.combine(xs, ys))
        y = {"add": torch.zeros_like(p), "mul": torch.ones_like(p), "none": p}[self.injection]
        out = []
        for t in range(loops):
            u = y + p if self.injection == "add" else y * p if self.injection == "mul" else y
            if t < loops - window:
                with torch.no_grad():
                    y = self._backbone(u)
            else:
                y = self._backbone(u)
                out.append(self._read_out(y)[:, ::2, 0])
        return out


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        dt = {"F32": torch.float32, "F64": torch.float64}[t["dtype"]]
        b, e = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[base + b:base + e]), dtype=dt).view(*t["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.numpy().tobytes()
        header[name] = {"dtype": {torch.float32: "F32", torch.float64: "F64"}[t.dtype],
                        "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - (len(h) + 8) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
