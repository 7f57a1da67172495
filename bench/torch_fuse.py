#!/usr/bin/env python3
"""PyTorch's side of the fusion benchmark: _fuse_fx (what prepare_fx runs first) on the same
traced model, native backend config. usage: torch_fuse.py NAME [RUNS]"""
import copy
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
import torch  # noqa: E402
from torch.ao.quantization.backend_config import get_native_backend_config  # noqa: E402
from torch.ao.quantization.quantize_fx import _fuse_fx  # noqa: E402

import bpcc_torch  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

torch.set_num_threads(1)
name = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
gm = bpcc_torch.trace(torchvision_model(name, 0))
bc = get_native_backend_config()
ts = []
for _ in range(runs):
    m = copy.deepcopy(gm)
    t0 = time.perf_counter()
    _fuse_fx(m, False, backend_config=bc)
    ts.append((time.perf_counter() - t0) * 1e3)
print("torch _fuse_fx %-25s median %7.3f ms  min %7.3f ms  max %7.3f ms" % (name, statistics.median(ts), min(ts), max(ts)))
