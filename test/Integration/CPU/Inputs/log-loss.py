# log-loss.py L2 LOG: the metrics.jsonl of two stage-wise runs of one
# unrolling from the same start and sample stream, with --loss l2 and with
# --loss log (and --finetune-steps). Their first step descends the same
# batch with the same parameters, so its log loss must be log(2 x l2 loss)
# and its batch NMSE the same; the gradients then differ by each batch's
# own error, so the runs must part. Prints the fine-tuning stages' steps,
# depth and learning rates.
import json
import math
import sys

l2, lg = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
a, b = l2[0], lg[0]
same = abs(b["loss"] - math.log(2 * a["loss"])) < 1e-9 * abs(b["loss"]) + 1e-12 and \
    b["batch_nmse_db"] == a["batch_nmse_db"]
print("first step: log loss = log(2 l2 loss), same batch NMSE" if same else
      "first step DIFFERS: %r %r" % (a, b))
part = next((x["step"] for x, y in zip(l2, lg) if x["batch_nmse_db"] != y["batch_nmse_db"]), None)
print("the runs part by step %s" % part if part else "the runs DO NOT PART")
ft = [r for r in lg if r["stage"].startswith("fine-tune")]
lrs = []
for r in ft:
    if not lrs or lrs[-1] != r["lr"]:
        lrs.append(r["lr"])
print("fine-tune: %d steps at depth %s, lr %s" %
      (len(ft), ",".join(sorted({str(r["depth"]) for r in ft})), " ".join("%g" % x for x in lrs)))
