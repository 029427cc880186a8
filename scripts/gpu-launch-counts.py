#!/usr/bin/env python3
"""Kernel launches per loop of each entry point of a --lower-to-gpu module.

Reads the IR after unroll-gpu-map-loops (or any IR with gpu.launch /
gpu.launch_func ops and scf.for / scf.while loops) and prints, for every function, the
launches (and calls of the GEMM ABI, unroll_gpu_gemm_*) outside loops and
directly inside each scf.for (one execution of that loop's body). A GEMM
whose operand strides are only known at run time is guarded
(`scf.if contiguous { call } else { kernel }`): the fallback kernels of
such else branches are counted apart, as they run only when the check
fails (never for the examples). Usage:

  unroll-opt m.mlir --lower-to-gpu --mlir-print-ir-after=unroll-gpu-map-loops \
      -o /dev/null 2>&1 | scripts/gpu-launch-counts.py [--json]
"""
import json
import re
import sys


def main():
    as_json = "--json" in sys.argv[1:]
    func, stack, rows = None, [], []
    depth = 0
    kernel_end = None  # brace depth at which the current gpu.launch body closes
    ifs = []  # open host scf.if: [depth of its body, GEMM in then?, in else?]
    for line in sys.stdin:
        m = re.match(r"\s*func\.func (?:public |private )?@(\w+)", line)
        if m:
            func, stack = m.group(1), []
            rows.append({"function": func, "loop": "(outside loops)", "launches": 0, "gemms": 0,
                         "fallbacks": 0})
            depth = 0
        if func is None:
            continue
        opens, closes = line.count("{"), line.count("}")
        if kernel_end is not None:  # loops inside a kernel run in its threads
            depth += opens - closes
            if depth < kernel_end:
                kernel_end = None
            continue
        if re.search(r"\bscf\.(for|while)\b", line):
            rows.append({"function": func, "loop": "scf.for", "launches": 0, "gemms": 0,
                         "fallbacks": 0})
            stack.append((depth + 1, len(rows) - 1))
        if re.search(r"\bscf\.if\b", line) and opens > closes:
            ifs.append([depth + 1, False, False])
        if ifs and re.match(r"\s*\} else \{", line) and depth == ifs[-1][0]:
            ifs[-1][2] = True
        if re.search(r"call @unroll_gpu_gemm_f(32|64)\(", line):
            if ifs and not ifs[-1][2]:
                ifs[-1][1] = True
            target = stack[-1][1] if stack else next(
                i for i in range(len(rows) - 1, -1, -1)
                if rows[i]["function"] == func and rows[i]["loop"] == "(outside loops)")
            rows[target]["gemms"] += 1
        if re.search(r"\bgpu\.launch(_func)?\b", line):
            target = stack[-1][1] if stack else next(
                i for i in range(len(rows) - 1, -1, -1)
                if rows[i]["function"] == func and rows[i]["loop"] == "(outside loops)")
            fallback = any(f[1] and f[2] for f in ifs)
            rows[target]["fallbacks" if fallback else "launches"] += 1
            if opens > closes:
                kernel_end = depth + 1
        depth += opens - closes
        while stack and depth < stack[-1][0]:
            stack.pop()
        while ifs and depth < ifs[-1][0]:
            ifs.pop()
    rows = [r for r in rows if r["launches"] or r["gemms"] or r["loop"] == "(outside loops)"]
    # Host loops that launch kernels, numbered per function in program order.
    counter = {}
    for r in rows:
        if r["loop"] != "(outside loops)":
            counter[r["function"]] = counter.get(r["function"], 0) + 1
            r["loop"] = "loop %d" % counter[r["function"]]
    if as_json:
        json.dump(rows, sys.stdout, indent=1)
        print()
        return
    print("%-36s %-16s %s" % ("function", "loop",
                              "launches, GEMM calls per execution (GEMM fallback kernels)"))
    for r in rows:
        if r["function"] != "dealloc_helper" and not r["function"].startswith("unroll_"):
            print("%-36s %-16s %d %d (%d)" % (r["function"], r["loop"], r["launches"], r["gemms"],
                                             r["fallbacks"]))


if __name__ == "__main__":
    main()
