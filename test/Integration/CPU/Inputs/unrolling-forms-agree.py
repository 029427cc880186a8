"""A learned unrolling's model form against its energy form: the example
compiles once (its energy @V and its model @V_model), trains end to end
through each form (3 steps at all 16 layers, from the same draws, on one
thread), and the two final checkpoints are compared entry by entry
(unroll-model-check --compare-checkpoints: max relative error, PASS/FAIL).

  unrolling-forms-agree.py BIN_DIR EXAMPLES_DIR WORK_DIR NAME...

BIN_DIR holds unroll-opt, unroll-translate, unroll-run and unroll-model-check.
"""
import os
import subprocess
import sys

bin_dir, examples, work, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]


def tool(name):
    return os.path.join(bin_dir, name)


os.makedirs(work, exist_ok=True)
env = dict(os.environ, UNROLL_THREADS="1")
train = ["--task", "sparse_coding", "--training", "end-to-end", "--steps", "3",
         "--samples", "20"]
status = 0
for v in names:
    lowered, lib = os.path.join(work, v + ".mlir"), os.path.join(work, v + ".so")
    subprocess.run([tool("unroll-opt"), os.path.join(examples, v + ".mlir"), "--lower-to-cpu",
                    "-o", lowered], check=True)
    subprocess.run([tool("unroll-translate"), lowered, "-o", lib], check=True)
    ckpt = {}
    for form, extra in (("model", []), ("energy", ["--energy", v])):
        out = os.path.join(work, v + "-" + form)
        run = subprocess.run([tool("unroll-run"), lib] + train + extra + ["--out", out], env=env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"{v}, {form} form: unroll-run failed:\n{run.stderr}")
        latest = open(os.path.join(out, "checkpoint", "latest")).read().strip()
        ckpt[form] = (os.path.join(out, "checkpoint", latest), latest)
    if ckpt["model"][1] != ckpt["energy"][1]:
        print(f"{v}: the forms stopped at different steps: {ckpt['model'][1]} and "
              f"{ckpt['energy'][1]}")
        status = 1
        continue
    cmp = subprocess.run([tool("unroll-model-check"), "--compare-checkpoints", ckpt["model"][0],
                          ckpt["energy"][0]], capture_output=True, text=True)
    lines = cmp.stdout.strip().splitlines()
    verdict = lines[-2].split(": ", 1)[-1] if len(lines) >= 2 else cmp.stdout
    steps = int(ckpt["model"][1].split("-")[-1])
    print(f"{v}: model and energy form, {steps} steps: {verdict} {lines[-1] if lines else ''}")
    status |= cmp.returncode
sys.exit(status)
