#!/usr/bin/env python3
"""Merges the JSON reports of scripts/unrolled-optimization-study.sh into
sparse_coding_layers.csv, hopfield_beta.csv and summary.json (plain Python)."""
import glob
import json
import os
import sys

out = sys.argv[1]
ista = json.load(open(os.path.join(out, "ista", "sparse_coding.json")))
fista = json.load(open(os.path.join(out, "fista", "sparse_coding.json")))
fk = dict(zip(fista["iterations"], fista["nmse_db"]))
rows = {"ista": ista["nmse_db"], "fista": [fk[k] for k in range(17)]}
summary = {"ista_fista": {k: ista[k] for k in ("m", "n", "lambda", "samples", "lipschitz")}}
for k in (16, 128, 1024, 1000):
    if k < len(ista["nmse_db"]):
        summary["ista_fista"][f"ista_{k}"] = ista["nmse_db"][k]
    if k in fk:
        summary["ista_fista"][f"fista_{k}"] = fk[k]
summary["ista_fista"].update({"ista_energy_increases": ista["energy_increases"],
                              "ista_roundoff_increases": ista["roundoff_increases"],
                              "ista_largest_roundoff_increase": ista["largest_roundoff_increase"],
                              "fista_rate_constant": fista["rate_constant"],
                              "seconds": {"ista": ista["seconds"], "fista": fista["seconds"]}})
for v in ("alista", "tilista", "lista_cp", "lista_cpss", "lista", "lista_cpss_e2e"):
    p = os.path.join(out, v, "sparse_coding.json")
    if os.path.exists(p):
        j = json.load(open(p))
        rows[v] = j["nmse_db"]
        summary[v] = {"layer_16": j["nmse_db"][-1], "init_layer_16": j.get("init_nmse_db"), "steps": j["steps"],
                      "train_seconds": j["train_seconds"], "trained_parameters": j["trained_parameters"],
                      "training": j.get("training"), "stage_steps": j.get("stage_steps")}
        if j.get("analytic_w"):
            summary[v]["analytic_w"] = j["analytic_w"]
with open(os.path.join(out, "sparse_coding_layers.csv"), "w") as f:
    names = list(rows)
    f.write("k," + ",".join(names) + "\n")
    for k in range(17):
        f.write(f"{k}," + ",".join(f"{rows[n][k]:.4f}" if k < len(rows[n]) else "" for n in names) + "\n")
# The runs at 40 dB SNR (snr40/), where the study made them.
snr = {}
for v in ("ista", "fista", "alista", "tilista", "lista_cp", "lista_cpss", "lista"):
    p = os.path.join(out, "snr40", v, "sparse_coding.json")
    if os.path.exists(p):
        j = json.load(open(p))
        if v == "fista":
            k16 = dict(zip(j["iterations"], j["nmse_db"]))
            snr[v] = {"layer_16": k16.get(16), "layer_1000": k16.get(1000)}
        elif v == "ista":
            snr[v] = {"layer_16": j["nmse_db"][16], "layer_1000": j["nmse_db"][-1]}
        else:
            snr[v] = {"layer_16": j["nmse_db"][-1], "steps": j["steps"], "train_seconds": j["train_seconds"]}
if snr:
    summary["snr40"] = snr
hop = {}
for p in glob.glob(os.path.join(out, "hopfield", "beta_*_*", "hopfield.json")):
    j = json.load(open(p))
    hop.setdefault(j["beta"], {})[j["corrupt"]] = j
with open(os.path.join(out, "hopfield_beta.csv"), "w") as f:
    f.write("beta,mask_one_step,mask_converged,mask_steps,noise_one_step,noise_converged,noise_steps,energy_increases\n")
    for beta in sorted(hop):
        r = hop[beta]
        cells = [beta]
        for c in ("mask", "noise"):
            j = r.get(c)
            cells += [j["retrieval_error"]["one_step"], j["retrieval_error"]["converged"],
                      j["mean_steps_to_converge"]] if j else ["", "", ""]
        cells.append(sum(r[c]["energy_increases"] for c in r))
        f.write(",".join(str(x) for x in cells) + "\n")
summary["hopfield"] = {str(b): {c: {"one_step": hop[b][c]["retrieval_error"]["one_step"],
                                    "converged": hop[b][c]["retrieval_error"]["converged"],
                                    "steps": hop[b][c]["mean_steps_to_converge"],
                                    "energy_increases": hop[b][c]["energy_increases"],
                                    "descent_steps": hop[b][c]["descent_steps"]} for c in hop[b]}
                       for b in sorted(hop)}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print(json.dumps(summary, indent=2))
