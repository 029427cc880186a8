#!/usr/bin/env python3
"""Checks that the file paths a doc names in `backticks` exist.

usage: check-doc-paths.py ROOT DOC.md[#SECTION] ...

A token counts as a path when it contains '/' or ends in a source or doc
extension. Braces expand (`test/{a,b}.mlir` is two paths). A path is found
when it exists under ROOT, or when exactly one or more files in the tree end
with it (a short name such as `ModelOps.cpp`). With #SECTION only the
section under the heading of that name is read. Prints each missing path
with its doc and line; exits 1 if any is missing.
"""
import itertools
import os
import re
import sys

EXTS = (".cpp", ".h", ".td", ".mlir", ".test", ".md", ".py", ".sh", ".json", ".c", ".txt")
SKIP_DIRS = {".git", "build", "build-asan", "out", "node_modules"}


def expand(tok):
    m = re.search(r"\{([^{}]*)\}", tok)
    if not m:
        return [tok]
    return list(itertools.chain.from_iterable(
        expand(tok[:m.start()] + alt + tok[m.end():]) for alt in m.group(1).split(",")))


def looks_like_path(tok):
    if " " in tok or tok.startswith(("-", "$", "%", "http")) or "=" in tok or "*" in tok:
        return False
    if tok.startswith("unroll/") and tok.endswith(".h"):
        return True  # an include path
    return "/" in tok or tok.endswith(EXTS)


def main():
    root = sys.argv[1]
    files = []
    for d, dirs, names in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        files += [os.path.relpath(os.path.join(d, x), root) for x in dirs]
    missing = 0
    checked = 0
    for arg in sys.argv[2:]:
        doc, _, section = arg.partition("#")
        lines = open(os.path.join(root, doc), encoding="utf-8").read().split("\n")
        inside = not section
        fence = False
        for no, line in enumerate(lines, 1):
            if line.startswith("```"):
                fence = not fence
            if not fence and line.startswith("#"):
                if section:
                    inside = line.lstrip("#").strip().lower() == section.replace("-", " ").lower()
                continue
            if not inside or fence:
                continue
            for tok in re.findall(r"`([^`]+)`", line):
                tok = tok.strip().rstrip("/")
                if not looks_like_path(tok):
                    continue
                for path in expand(tok):
                    checked += 1
                    if os.path.exists(os.path.join(root, path)):
                        continue
                    if any(f == path or f.endswith("/" + path) for f in files):
                        continue
                    print(f"{doc}:{no}: `{path}` names no file or folder")
                    missing += 1
    print(f"checked {checked} paths, {missing} missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
