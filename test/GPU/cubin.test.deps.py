"""Prints what a compiled.so needs from the dynamic linker (readelf)."""
import re
import subprocess
import sys

so = sys.argv[1]
dyn = subprocess.run(["readelf", "-d", so], capture_output=True, text=True).stdout
needed = sorted(re.findall(r"Shared library: \[(.*?)\]", dyn))
syms = subprocess.run(["readelf", "--dyn-syms", "-W", so], capture_output=True, text=True).stdout
defined, undefined = set(), set()
for line in syms.splitlines():
    f = line.split()
    if len(f) >= 8 and f[4] in ("GLOBAL", "WEAK"):
        (undefined if f[6] == "UND" else defined).add(f[7].split("@")[0])
print("needed:", " ".join(needed))
allowed = ("libc.so", "libm.so", "ld-linux", "libdl.so", "libpthread.so")
print("beyond libc:", " ".join(n for n in needed if not n.startswith(allowed)) or "none")
print("exports", " ".join(s for s in sorted(defined) if s in ("unroll_abi_version", "unroll_gpu_init", "unroll_model_info")))
print("undefined cu*:", " ".join(sorted(s for s in undefined if s.startswith("cu"))) or "none")
