#!/usr/bin/env bash
# Runs every test suite of a configured, built tree: lit (FileCheck,
# -verify-diagnostics, CPU integration) and the GoogleTest unit tests, then
# prints one closing line "N passed, M failed".
set -uo pipefail
BUILD=${1:-build}
LIT=/usr/lib/llvm-19/build/utils/lit/lit.py

python3 "$LIT" -sv "$BUILD/test" --xunit-xml-output "$BUILD/lit-results.xml"
lit_rc=$?
ctest --test-dir "$BUILD" --output-on-failure
ctest_rc=$?

python3 - "$BUILD" <<'PY'
import sys, xml.etree.ElementTree as ET, glob, os
build = sys.argv[1]
passed = failed = skipped = 0
root = ET.parse(os.path.join(build, "lit-results.xml")).getroot()
for case in root.iter("testcase"):
    if case.find("failure") is not None: failed += 1
    elif case.find("skipped") is not None: skipped += 1
    else: passed += 1
# ctest writes its own log; count unit tests from it.
log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
if os.path.exists(log):
    text = open(log, errors="replace").read()
    passed += text.count("Test Passed.")
    failed += text.count("Test Failed.")
line = f"{passed} passed, {failed} failed"
if skipped: line += f", {skipped} skipped"
print(line)
PY
if [ $lit_rc -ne 0 ] || [ $ctest_rc -ne 0 ]; then exit 1; fi
