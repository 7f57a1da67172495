#!/usr/bin/env python3
"""PyTorch's side of the prepare benchmark: torch.ao.quantization.fx.prepare.prepare (qconfig
map, matching, observer insertion: what prepare_fx runs after fusing) on the model fused for the
native backend, with get_default_qconfig_mapping("fbgemm"). usage: torch_prepare.py NAME [RUNS]"""
import copy
import os
import statistics
import sys
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
import torch  # noqa: E402
from torch.ao.quantization import get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization.backend_config import get_native_backend_config  # noqa: E402
from torch.ao.quantization.fx.prepare import prepare  # noqa: E402
from torch.ao.quantization.fx.tracer import QuantizationTracer  # noqa: E402
from torch.ao.quantization.quantize_fx import _fuse_fx  # noqa: E402

from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)
name = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
model = torchvision_model(name, 0)
tracer = QuantizationTracer([], [])
gm = torch.fx.GraphModule(model, tracer.trace(model), name)
fused = _fuse_fx(gm, False, backend_config=get_native_backend_config())
inputs = (torch.randn(1, 3, 64, 64),)
ts = []
for _ in range(runs):
    m = copy.deepcopy(fused)
    mapping = get_default_qconfig_mapping("fbgemm")
    t0 = time.perf_counter()
    prepare(m, mapping, False, tracer.node_name_to_scope, inputs, backend_config=get_native_backend_config())
    ts.append((time.perf_counter() - t0) * 1e3)
print("torch prepare              %-13s median %7.3f ms  min %7.3f ms  max %7.3f ms"
      % (name, statistics.median(ts), min(ts), max(ts)))
