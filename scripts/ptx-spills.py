#!/usr/bin/env python3
"""Register spills of the kernels in a --lower-to-gpu="format=isa" module.

Extracts the PTX of every gpu.binary (the `assembly = "..."` string, with
MLIR's \\XX escapes undone), assembles it with `ptxas -v` for its target and
sums what ptxas reports per kernel:

  scripts/ptx-spills.py LOWERED.mlir [--ptxas PATH] [--verbose]

prints "kernels: N, spill stores: S, spill loads: L" (bytes) and exits 1
when any kernel spills.
"""
import argparse, re, subprocess, sys, tempfile, os


def unescape(s):
    out, i = bytearray(), 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 2 < len(s) + 1 and re.match(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]):
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
        elif c == "\\" and i + 1 < len(s):
            out += s[i + 1].encode()
            i += 2
        else:
            out += c.encode()
            i += 1
    return out.decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mlir")
    ap.add_argument("--ptxas", default=os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas"))
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    text = open(a.mlir).read()
    kernels = stores = loads = 0
    for m in re.finditer(r'chip = "(sm_[0-9a-z]+)".*?assembly = "((?:[^"\\]|\\.)*)"', text, re.S):
        chip, ptx = m.group(1), unescape(m.group(2)).rstrip("\0")
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        r = subprocess.run([a.ptxas, "-v", f"-arch={chip}", f.name, "-o", os.devnull],
                           capture_output=True, text=True)
        os.unlink(f.name)
        if r.returncode != 0:
            sys.exit("ptxas failed: " + r.stderr)
        for line in r.stderr.splitlines():
            if "Compiling entry function" in line:
                kernels += 1
            s = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if s:
                stores += int(s.group(1))
                loads += int(s.group(2))
                if a.verbose and (int(s.group(1)) or int(s.group(2))):
                    print(line)
    print(f"kernels: {kernels}, spill stores: {stores}, spill loads: {loads}")
    sys.exit(1 if stores or loads or kernels == 0 else 0)


main()
