#!/usr/bin/env python3
"""Add up the results of meson test runs: each Check suite counts its checks, each script
its own 'N passed, N failed' line, anything else counts as one test. Prints the closing line
'N passed, N failed, N skipped' and exits 1 if anything failed or nothing ran."""
import json
import re
import sys

passed = failed = skipped = 0
for path in sys.argv[1:]:
    try:
        lines = open(path).read().splitlines()
    except OSError:
        print("missing test log: %s" % path)
        failed += 1
        continue
    for line in lines:
        if not line.strip():
            continue
        t = json.loads(line)
        out = t.get("stdout") or ""
        result = t.get("result")
        if result == "SKIP":
            skipped += 1
            continue
        m = re.findall(r"Checks: (\d+), Failures: (\d+), Errors: (\d+)", out)
        s = re.findall(r"^(\d+) passed, (\d+) failed", out, re.M)
        if m:
            n, f, e = map(int, m[-1])
            p, bad = n - f - e, f + e
        elif s:
            p, bad = map(int, s[-1])
        else:
            p, bad = (1, 0) if result == "OK" else (0, 1)
        if result != "OK" and bad == 0:
            bad = 1  # crashed or timed out after reporting
        passed += p
        failed += bad
        if result != "OK":
            print("failed: %s (%s) in %s" % (t.get("name"), result, path))
print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed or passed == 0 else 0)
