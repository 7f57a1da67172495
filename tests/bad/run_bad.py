#!/usr/bin/env python3
"""Run the malformed-input corpus (tests/bad/cases, made by make_bad.py) through the bpcc CLI.

Every case must give the exit status and the message `FILE:LOCATION: error: ...MESSAGE...` that
tests/bad/expect.txt records for it, with no crash, no sanitizer report, no output file and no
temporary file left behind; an existing output file must stay untouched. With --record the
observed results are written to expect.txt instead (to review before committing).

usage: run_bad.py BPCC FIXTURES_DIR [--record]
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")
EXPECT = os.path.join(HERE, "expect.txt")
SANITIZER = re.compile(r"ERROR: (Address|Leak|Memory)Sanitizer|runtime error:|AddressSanitizer")
ERROR = re.compile(r"^(?P<file>[^\n]*?)(?P<loc>:\d+:\d+|: offset \d+|:\d+|)(: | )error: (?P<msg>.*)$", re.M)
PREFIX = {"m": "model", "w": "model", "c": "config", "q": "qconfig", "b": "calibrate", "r": "run", "x": "quantize"}


def command(bpcc, fix, case, work, prepared):
    out = os.path.join(work, "out.bpcc" if not case.endswith(".safetensors") else "out.safetensors")
    kind = PREFIX[os.path.basename(case)[0]]
    if kind == "model":
        return [bpcc, "fmt", case, "-o", out], out
    if kind == "config":
        return [bpcc, "config", "check", case], None
    if kind == "qconfig":
        return [bpcc, "qconfig", "check", case], None
    if kind == "calibrate":
        return [bpcc, "calibrate", prepared, "--data", case, "-o", out], out
    if kind == "run":
        return [bpcc, "run", os.path.join(fix, "torch", "tiny_resnet.bpcc"), "--data", case, "-o", out], out
    return [bpcc, "quantize", case, "-b", "fbgemm", "-q", "fbgemm", "--data", os.path.join(work, "batch.safetensors"),
            "-o", out], out


def is_case(name):
    return name[0] in PREFIX and name[1] == "_" and (name.endswith(".bpcc") or name.endswith(".yaml") or
                                                    (name[0] in "br" and name.endswith(".safetensors")))


def main():
    bpcc, fix = os.path.abspath(sys.argv[1]), sys.argv[2]
    record = "--record" in sys.argv
    cases = sorted(f for f in os.listdir(CASES) if is_case(f))
    want = {}
    if not record:
        for line in open(EXPECT, encoding="utf-8"):
            if line.strip() and not line.startswith("#"):
                name, status, where, msg = line.rstrip("\n").split("\t")
                want[name] = (int(status), where, msg)
    env = dict(os.environ)
    for var, opt in (("ASAN_OPTIONS", "exitcode=86"), ("UBSAN_OPTIONS", "exitcode=87")):
        env[var] = (env[var] + ":" if env.get(var) else "") + opt
    passed, failed, rows = 0, 0, []
    with tempfile.TemporaryDirectory() as work:
        # the inputs the batch and quantize cases are fed with
        prepared = os.path.join(work, "prepared.bpcc")
        subprocess.run([bpcc, "prepare", os.path.join(fix, "torch", "tiny_resnet.bpcc"), "-b", "fbgemm", "-q", "fbgemm",
                        "-o", prepared], check=True, capture_output=True, env=env)
        shutil.copy(os.path.join(CASES, "b_wrong_shape.safetensors"), os.path.join(work, "batch.safetensors"))
        import struct
        import json
        n = 1 * 3 * 8 * 8
        data = struct.pack("<%df" % n, *[((i * 7919) % 23 - 11) / 8.0 for i in range(n)])
        h = json.dumps({"x": {"dtype": "F32", "shape": [1, 3, 8, 8], "data_offsets": [0, len(data)]}}).encode()
        h += b" " * (-len(h) % 8)
        open(os.path.join(work, "batch.safetensors"), "wb").write(struct.pack("<Q", len(h)) + h + data)
        for name in cases:
            case = os.path.join(CASES, name)
            cmd, out = command(bpcc, fix, case, work, prepared)
            sentinel = b"an existing output that a failed run must not touch\n"
            if out:
                with open(out, "wb") as f:
                    f.write(sentinel)
            try:
                r = subprocess.run(cmd, capture_output=True, env=env, timeout=120)
                status, err = r.returncode, r.stderr.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                status, err = -999, "timed out (a hang)"
            for path, tag in ((work, "<work>"), (CASES, "<cases>"), (os.path.abspath(fix), "<fixtures>"), (fix, "<fixtures>")):
                err = err.replace(path, tag)
            m = ERROR.search(err)
            where = "-"
            msg = err.strip().splitlines()[0] if err.strip() else ""
            if m:
                where = os.path.basename(m.group("file")) + m.group("loc")
                msg = m.group("msg")
            problems = []
            if status < 0 or status >= 64 or SANITIZER.search(err):
                problems.append("crashed or sanitizer report (status %d): %s" % (status, err[-2000:]))
            if out and open(out, "rb").read() != sentinel:
                problems.append("the existing output file was changed")
            stray = [f for f in os.listdir(work) if ".tmp" in f]
            if stray:
                problems.append("temporary files left: %s" % stray)
                for f in stray:
                    os.unlink(os.path.join(work, f))
            if status == 0:
                problems.append("accepted")
            if record:
                rows.append("%s\t%d\t%s\t%s" % (name, status, where, msg.replace("\t", " ")))
            elif name not in want:
                problems.append("not in expect.txt")
            else:
                ws, ww, wm = want[name]
                if status != ws:
                    problems.append("exit status %d, want %d" % (status, ws))
                if where != ww:
                    problems.append("location %s, want %s" % (where, ww))
                if wm not in msg:
                    problems.append("message %r lacks %r" % (msg, wm))
            if problems:
                failed += 1
                print("FAIL %s: %s\n  %s" % (name, "; ".join(problems), " ".join(cmd)))
            else:
                passed += 1
    for name in sorted(set(want) - set(cases)):
        failed += 1
        print("FAIL %s: listed in expect.txt but not in cases/" % name)
    if record:
        with open(EXPECT, "w", encoding="utf-8") as f:
            f.write("# case\texit status\twhere (file:line:col, file: offset N, or -)\tmessage (substring)\n")
            f.write("\n".join(rows) + "\n")
        print("recorded %d cases in %s" % (len(rows), EXPECT))
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
