#!/usr/bin/env python3
"""Calibration throughput, bpcc against PyTorch in one run: the same torchvision model, prepared
for fbgemm with a MinMax mapping (MinMax activations, per-channel MinMax weights, the
fixed-qparams entries), fed the same batches. PyTorch: the prepare_fx model's forward (eager, its
observers in place); bpcc: `bpcc calibrate` (the reference interpreter, OpenBLAS). One thread each,
both timed warm (one batch first, not counted), in REPEATS pairs of runs taken in turn (this
shared machine's speed drifts within a minute): medians, [min-max], and the ratio of each pair.
With --histogram, the default fbgemm mapping instead (HistogramObserver activations, per-channel
MinMax weights: what `bpcc quantize -q fbgemm` and get_default_qconfig_mapping("fbgemm") use).
usage: calibrate_bench.py BPCC NAME [BATCHES] [BATCH_SIZE] [SIZE] [REPEATS] [--histogram]"""
import copy
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "python"))
import torch  # noqa: E402
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping  # noqa: E402
from torch.ao.quantization import observer as ob  # noqa: E402
from torch.ao.quantization.qconfig_mapping import _FIXED_QPARAMS_OP_TO_OBSERVER  # noqa: E402
from torch.ao.quantization.quantize_fx import prepare_fx  # noqa: E402

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)
histogram = "--histogram" in sys.argv
args = [a for a in sys.argv if a != "--histogram"]
bpcc, name = args[1], args[2]
n = int(args[3]) if len(args) > 3 else 5
bs = int(args[4]) if len(args) > 4 else 1
size = int(args[5]) if len(args) > 5 else 224
repeats = int(args[6]) if len(args) > 6 else 3
mapping = QConfigMapping().set_global(QConfig(
    activation=ob.MinMaxObserver.with_args(dtype=torch.quint8),
    weight=ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)))
for op, obs in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
    mapping.set_object_type(op, QConfig(activation=obs, weight=ob.default_weight_observer))
if histogram:
    mapping = get_default_qconfig_mapping("fbgemm")
model = torchvision_model(name, 0)
torch.manual_seed(0)
batches = [torch.randn(bs, 3, size, size) for _ in range(n)]
with tempfile.TemporaryDirectory() as tmp:
    src = os.path.join(tmp, "m.bpcc")
    bpcc_torch.export(model, (batches[0],), src)
    spec = "fbgemm" if histogram else os.path.join(tmp, "q.yaml")
    if not histogram:
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(mapping, "minmax"))
    subprocess.run([bpcc, "prepare", src, "-b", "fbgemm", "-q", spec, "-o", os.path.join(tmp, "p.bpcc")], check=True)
    files = []
    for i, b in enumerate(batches):
        files.append(os.path.join(tmp, "b%d.safetensors" % i))
        st.write(files[-1], [("x", b)])
    # the calibration run alone (bench_calibrate: the model loaded before, not saved after)
    inner = os.path.join(os.path.dirname(bpcc), "bench", "bench_calibrate")
    # importing numpy/torch may leave OPENBLAS_CORETYPE in this process's environment: the children
    # get what the bpcc CLI would choose by itself
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_NUM_THREADS", None)
    cli_env = dict(env)
    env["OPENBLAS_NUM_THREADS"] = "1"  # what the bpcc CLI asks OpenBLAS for (--threads 1)
    if "avx512f" in open("/proc/cpuinfo").read():
        env["OPENBLAS_CORETYPE"] = "SKYLAKEX"  # ... and on such CPUs
    gm = prepare_fx(copy.deepcopy(model), mapping, (batches[0],), backend_config=bcfg.get_backend_config("fbgemm"))

    def torch_run():
        with torch.no_grad():
            gm(batches[0])  # warm-up (not counted)
            t0 = time.perf_counter()
            for b in batches:
                gm(b)
            return time.perf_counter() - t0

    tr, tt = [], []
    for _ in range(repeats):  # in turn, so that both sides see the same drift
        r = subprocess.run([inner, os.path.join(tmp, "p.bpcc"), *files], check=True, capture_output=True, text=True,
                           env=env)
        tr.append(float(r.stdout.split()[0]))
        tt.append(torch_run())
    # then the CLI (writing the calibrated model: after the timing above, not to compete with it)
    t0 = time.perf_counter()
    subprocess.run([bpcc, "calibrate", os.path.join(tmp, "p.bpcc"), "--data", *files, "-o", os.path.join(tmp, "c.bpcc")],
                   check=True, env=cli_env)
    tb = time.perf_counter() - t0
pairs = sorted(t / b for b, t in zip(tr, tt))
print("calibrate %-13s %d x [%d, 3, %d, %d]: bpcc %6.2f batches/s [%.2f-%.2f] (run alone; %6.2f with process start, "
      "load and save), torch %6.2f batches/s [%.2f-%.2f], ratio %.2f [%.2f-%.2f]" % (
          name, n, bs, size, size, n / statistics.median(tr), n / max(tr), n / min(tr), n / tb,
          n / statistics.median(tt), n / max(tt), n / min(tt), statistics.median(pairs), pairs[0], pairs[-1]))
