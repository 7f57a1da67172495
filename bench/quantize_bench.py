#!/usr/bin/env python3
"""Whole-process quantization, bpcc against PyTorch in one run: `bpcc quantize` (process start,
load, fuse, prepare, one calibration batch, convert, SQNR check, save) against PyTorch's
prepare_fx + one batch + convert_to_reference_fx (in an already running Python, model in memory).
usage: quantize_bench.py BPCC NAME [SIZE]"""
import copy
import os
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
import torch  # noqa: E402
from torch.ao.quantization import get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx  # noqa: E402

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)
bpcc, name = sys.argv[1], sys.argv[2]
size = int(sys.argv[3]) if len(sys.argv) > 3 else 224
model = torchvision_model(name, 0)
torch.manual_seed(0)
x = torch.randn(1, 3, size, size)
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "m.bpcc")
    bpcc_torch.export(model, (x,), src)
    batch = os.path.join(tmp, "b.safetensors")
    st.write(batch, [("x", x)])
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)  # set by importing torch; let bpcc choose
    t0 = time.perf_counter()
    subprocess.run([bpcc, "quantize", src, "-b", "fbgemm", "-q", "fbgemm", "--data", batch, "-o",
                    os.path.join(tmp, "q.bpcc")], check=True, env=env, stdout=subprocess.DEVNULL)
    tb = time.perf_counter() - t0
t0 = time.perf_counter()
with torch.no_grad():
    p = prepare_fx(copy.deepcopy(model), get_default_qconfig_mapping("fbgemm"), (x,))
    p(x)
    convert_to_reference_fx(p)
tt = time.perf_counter() - t0
print("quantize %-13s [1, 3, %d, %d], fbgemm mapping, one batch: bpcc %.3f s (whole process), torch %.3f s, ratio %.2f"
      % (name, size, size, tb, tt, tt / tb))
