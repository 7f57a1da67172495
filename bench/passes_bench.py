#!/usr/bin/env python3
"""Graph passes alone, bpcc against PyTorch in one run, on torchvision models.

bpcc: bench/bench_passes (library calls: fuse + prepare + qparams + convert, where qparams is the
end of bpcc_calibrate that turns observer statistics into scale and zero point, which PyTorch does
inside convert_fx; the load, the one calibration batch between prepare and convert and the print
are timed apart and not counted). PyTorch 1.13:
prepare_fx (its symbolic trace included, as a user calls it) + convert_to_reference_fx, with the
same batch run between them and not counted. Same backend (fbgemm) and qconfig mapping (fbgemm),
one thread, medians of RUNS with min and max.

usage: passes_bench.py BUILD_DIR [--runs N] [--json FILE] NAME...
"""
import argparse
import copy
import json
import os
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


def stats(xs):
    return [statistics.median(xs), min(xs), max(xs)]


def torch_passes(model, x, runs):
    mapping, bc = get_default_qconfig_mapping("fbgemm"), get_fbgemm_backend_config()
    prep, conv, total = [], [], []
    with torch.no_grad():
        for _ in range(runs):
            m = copy.deepcopy(model)
            t0 = time.perf_counter()
            p = prepare_fx(m, mapping, (x,), backend_config=bc)
            t1 = time.perf_counter()
            p(x)
            t2 = time.perf_counter()
            convert_to_reference_fx(p, backend_config=bc)
            t3 = time.perf_counter()
            prep.append((t1 - t0) * 1e3)
            conv.append((t3 - t2) * 1e3)
            total.append((t1 - t0 + t3 - t2) * 1e3)
    return {"prepare_fx": stats(prep), "convert_to_reference_fx": stats(conv), "passes": stats(total)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("names", nargs="+")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--json")
    a = ap.parse_args()
    results = []
    for name in a.names:
        model = torchvision_model(name, 0)
        torch.manual_seed(0)
        x = torch.randn(1, 3, a.size, a.size)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "m.bpcc")
            bpcc_torch.export(model, (x,), src)
            batch = os.path.join(tmp, "b.safetensors")
            st.write(batch, [("x", x)])
            env = dict(os.environ)
            env.pop("OPENBLAS_CORETYPE", None)  # set by importing torch
            env["OPENBLAS_NUM_THREADS"] = "1"
            out = subprocess.run([os.path.join(a.build, "bench", "bench_passes"), src, batch, str(a.runs), "-b", "fbgemm",
                                  "-q", "fbgemm"], check=True, capture_output=True, text=True, env=env).stdout
            b = json.loads(out)
        t = torch_passes(model, x, a.runs)
        r = {"model": name, "bpcc": b, "torch": t, "ratio": t["passes"][0] / b["passes"][0]}
        results.append(r)
        print("passes %-16s %4d nodes  bpcc %8.2f ms (fuse %.2f, prepare %.2f, qparams %.2f, convert %.2f; weights read "
              "once %.2f)  torch %8.1f ms (prepare_fx %.1f, convert %.1f)  ratio %6.1fx"
              % (name, b["nodes"], b["passes"][0], b["fuse"][0], b["prepare"][0], b["qparams"][0], b["convert"][0],
                 b["weights_read_ms"],
                 t["passes"][0], t["prepare_fx"][0], t["convert_to_reference_fx"][0], r["ratio"]), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
