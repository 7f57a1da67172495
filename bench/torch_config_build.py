#!/usr/bin/env python3
"""PyTorch's side of the config-load benchmark: time to build each 1.13 BackendConfig object.
usage: torch_config_build.py [RUNS]"""
import statistics
import sys
import time

import torch  # noqa: F401
from torch.ao.quantization.backend_config import (get_fbgemm_backend_config,
                                                  get_native_backend_config,
                                                  get_qnnpack_backend_config,
                                                  get_tensorrt_backend_config)
from torch.ao.quantization.backend_config.x86 import get_x86_backend_config

runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
getters = [("native", get_native_backend_config), ("fbgemm", get_fbgemm_backend_config),
           ("qnnpack", get_qnnpack_backend_config), ("x86", get_x86_backend_config),
           ("tensorrt", get_tensorrt_backend_config)]
total = [0.0] * runs
for name, get in getters:
    get()
    ts = []
    for r in range(runs):
        t0 = time.perf_counter()
        get()
        dt = (time.perf_counter() - t0) * 1e6
        ts.append(dt)
        total[r] += dt
    print("%-12s median %8.1f us  min %8.1f us  max %8.1f us" % (name, statistics.median(ts), min(ts), max(ts)))
print("%-12s median %8.1f us  min %8.1f us  max %8.1f us" % ("all five", statistics.median(total), min(total), max(total)))
