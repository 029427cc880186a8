"""Runs a command, waits until a training run reaches a point, sends a signal.

usage: interrupt.py SIGNAL OUTDIR (--lines N | --checkpoint N) -- COMMAND...
  --lines N       wait until OUTDIR/metrics.jsonl has N lines
  --checkpoint N  wait until OUTDIR/checkpoint/latest names a step >= N
Prints "exit CODE" (negative: killed by that signal) and exits 0.
"""
import os
import signal
import subprocess
import sys
import time

sig = getattr(signal, sys.argv[1])
out, kind, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
cmd = sys.argv[sys.argv.index("--") + 1:]
p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def reached():
    try:
        if kind == "--lines":
            with open(os.path.join(out, "metrics.jsonl")) as f:
                return sum(1 for _ in f) >= n
        with open(os.path.join(out, "checkpoint", "latest")) as f:
            return int(f.read().strip().split("-")[1]) >= n
    except (OSError, ValueError, IndexError):
        return False


deadline = time.time() + 120
while not reached():
    if p.poll() is not None or time.time() > deadline:
        print("the run ended or stalled before the point:", p.returncode)
        sys.exit(1)
    time.sleep(0.02)
p.send_signal(sig)
_, err = p.communicate()
sys.stderr.write(err)
print("exit", p.returncode)
