#!/usr/bin/env bash
# Compares two training runs' loss curves step by step: the "loss" of each
# row of their metrics.jsonl (unroll-run --out DIR writes DIR/metrics.jsonl),
# matched by "step". Prints the largest relative difference |a - b| / |b|
# over the steps both hold, and PASS when it is at most TOL (exit 0), else
# FAIL (exit 1). Needs only awk, so that it runs on a bare GPU machine.
#
#   compare-loss-curves.sh A.jsonl B.jsonl TOL
set -euo pipefail
a=${1:?usage: compare-loss-curves.sh A.jsonl B.jsonl TOL}
b=${2:?usage: compare-loss-curves.sh A.jsonl B.jsonl TOL}
tol=${3:?usage: compare-loss-curves.sh A.jsonl B.jsonl TOL}
for f in "$a" "$b"; do [ -r "$f" ] || { echo "compare-loss-curves.sh: cannot read $f" >&2; exit 2; }; done
awk -v tol="$tol" -v A="$a" -v B="$b" '
  function field(line, key,   m) {
    if (match(line, "\"" key "\": *-?[0-9.eE+-]+")) {
      m = substr(line, RSTART, RLENGTH); sub(/^[^:]*: */, "", m); return m
    }
    return ""
  }
  FNR == 1 { file++ }
  {
    s = field($0, "step"); l = field($0, "loss")
    if (s == "" || l == "") next
    if (file == 1) loss[s] = l
    else if (s in loss) {
      d = loss[s] - l; if (d < 0) d = -d
      r = l < 0 ? -l : l; rel = r > 0 ? d / r : d
      if (rel > worst) { worst = rel; at = s }
      n++
    }
  }
  END {
    if (n == 0) { print "no common steps in " A " and " B; exit 2 }
    printf "loss curves: max relative difference %.3g (step %s) over %d steps (tolerance %s)\n", worst, at, n, tol
    if (worst <= tol) { print "PASS"; exit 0 }
    print "FAIL"; exit 1
  }' "$a" "$b"
