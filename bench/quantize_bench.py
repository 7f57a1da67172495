#!/usr/bin/env python3
"""Whole-process quantization with one calibration batch, bpcc against PyTorch in one run.

bpcc: the `bpcc quantize ... --no-sqnr --threads 1 --time` process (start, load, fuse, prepare, the
batch, convert, save), with the medians of the step times it prints. PyTorch 1.13, one thread: prepare_fx + the batch + convert_to_reference_fx
(1) in this already running Python with the model in memory (import excluded) and (2) as a
process of its own that imports torch, loads the model saved with torch.save and the batch, and
runs the same flow (import included). Medians of RUNS, with min and max.

usage: quantize_bench.py BPCC NAME... [--runs N] [--size S] [--json FILE]
"""
import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
import torch  # noqa: E402
from torch.ao.quantization import get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.backend_config import get_fbgemm_backend_config  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx  # noqa: E402

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)

FLOW = """
import sys, warnings
import torch
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_fbgemm_backend_config
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
warnings.simplefilter("ignore")
torch.set_num_threads(1)
model = torch.load(sys.argv[1])
x = torch.load(sys.argv[2])
with torch.no_grad():
    p = prepare_fx(model, get_default_qconfig_mapping("fbgemm"), (x,), backend_config=get_fbgemm_backend_config())
    p(x)
    q = convert_to_reference_fx(p, backend_config=get_fbgemm_backend_config())
torch.save(q.state_dict(), sys.argv[3])
with open("/proc/self/status") as f:
    print("peak %.0f MB" % (int([l for l in f if l.startswith("VmHWM:")][0].split()[1]) / 1024))
"""


def stats(xs):
    return [statistics.median(xs), min(xs), max(xs)]


def wall(cmd, env=None, steps=None, peaks=None):
    """the command's wall clock; with `steps` (a dict of lists), the step times `bpcc quantize --time`
    printed are appended to it; with `peaks` (a list), the peak resident memory in MB the process
    printed ("peak N MB": its own VmHWM; a child's getrusage maxrss would carry this Python's peak
    from before its exec)"""
    t0 = time.perf_counter()
    r = subprocess.run(cmd, check=True, env=env, stdout=subprocess.PIPE, text=True)
    t = time.perf_counter() - t0
    if peaks is not None:
        peaks.append(float(re.findall(r"peak ([0-9.]+) MB", r.stdout)[-1]))
    if steps is not None:
        line = [l for l in r.stdout.splitlines() if l.startswith("time: ")][-1]
        for part in line[len("time: "):].split("; ")[0].split(", "):
            step, ms, _ = part.split(" ")
            steps.setdefault(step, []).append(float(ms))
    return t


def bench(bpcc, name, runs, size):
    model = torchvision_model(name, 0)
    torch.manual_seed(0)
    x = torch.randn(1, 3, size, size)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "m.bpcc")
        bpcc_torch.export(model, (x,), src)
        batch = os.path.join(tmp, "b.safetensors")
        st.write(batch, [("x", x)])
        torch.save(model, os.path.join(tmp, "m.pt"))
        torch.save(x, os.path.join(tmp, "x.pt"))
        with open(os.path.join(tmp, "flow.py"), "w") as f:
            f.write(FLOW)
        env = dict(os.environ)
        env.pop("OPENBLAS_CORETYPE", None)  # set by importing torch; let bpcc choose
        env.pop("OPENBLAS_NUM_THREADS", None)
        steps, bpeak, tpeak = {}, [], []
        tb = [wall([bpcc, "quantize", src, "-b", "fbgemm", "-q", "fbgemm", "--data", batch, "-o",
                    os.path.join(tmp, "q.bpcc"), "--no-sqnr", "--threads", "1", "--time"], env, steps, bpeak)
              for _ in range(runs)]
        tp = [wall([sys.executable, os.path.join(tmp, "flow.py"), os.path.join(tmp, "m.pt"), os.path.join(tmp, "x.pt"),
                    os.path.join(tmp, "q.pt")], peaks=tpeak) for _ in range(runs)]
    tt = []
    with torch.no_grad():
        for _ in range(runs):
            m = copy.deepcopy(model)
            t0 = time.perf_counter()
            p = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), (x,), backend_config=get_fbgemm_backend_config())
            p(x)
            convert_to_reference_fx(p, backend_config=get_fbgemm_backend_config())
            tt.append(time.perf_counter() - t0)
    r = {"model": name, "bpcc_process": stats(tb), "torch_in_process": stats(tt), "torch_process": stats(tp),
         "bpcc_steps_ms": {k: statistics.median(v) for k, v in steps.items()},
         "bpcc_peak_mb": statistics.median(bpeak), "torch_process_peak_mb": statistics.median(tpeak)}
    r["ratio_import_excluded"] = r["torch_in_process"][0] / r["bpcc_process"][0]
    r["ratio_import_included"] = r["torch_process"][0] / r["bpcc_process"][0]
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bpcc")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--json")
    a = ap.parse_args()
    out = []
    for name in a.names:
        r = bench(a.bpcc, name, a.runs, a.size)
        out.append(r)
        print("quantize %-16s bpcc %.3f s  torch %.3f s in process (ratio %.1fx), %.3f s as a process with its import "
              "(ratio %.1fx); peak memory bpcc %.0f MB, torch's process %.0f MB"
              % (name, r["bpcc_process"][0], r["torch_in_process"][0], r["ratio_import_excluded"],
                 r["torch_process"][0], r["ratio_import_included"], r["bpcc_peak_mb"], r["torch_process_peak_mb"]),
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
