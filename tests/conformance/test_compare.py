#!/usr/bin/env python3
"""Conformance: the numeric suite (`bpcc compare`) against PyTorch 1.13's.

For resnet18 and mobilenet_v2 with the fbgemm flow (fbgemm backend, fbgemm mapping), quantized by
`bpcc quantize` and by prepare_fx + the same batches + convert:
- weights: bpcc's SQNR per reference module equals torch.ao.ns.fx.utils.compute_sqnr(weight,
  get_weight()) on PyTorch's convert_to_reference_fx model within 0.1 dB;
- outputs: bpcc's per-node output SQNR ranks the nodes as PyTorch's numeric suite does
  (_numeric_suite_fx.add_loggers with OutputLogger on the float model and PyTorch's quantized
  model, extend_logger_results_with_comparison with compute_sqnr), on the nodes both name;
- shadow: every op's own (shadow) SQNR is at least its propagated one, but for rounding.

usage: test_compare.py BPCC      (exit 77 when torch is not installed)
"""
import copy
import json
import os
import subprocess
import sys
import unittest
import warnings

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch()
import torch
import torchvision  # noqa: F401
import torch.ao.ns._numeric_suite_fx as ns
from torch.ao.ns.fx.utils import compute_sqnr
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_fbgemm_backend_config
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(2)
BPCC = None


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0] * len(values)
    for k, i in enumerate(order):
        r[i] = k
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


class Compare(conftools.TmpCase):
    def bpcc(self, *args):
        r = subprocess.run([BPCC, *args], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "%s: %s" % (args, r.stderr))
        return r.stdout

    def check(self, name):
        torch.manual_seed(0)
        model = torchvision_model(name, 0).eval()
        batches = [torch.randn(1, 3, 96, 96) for _ in range(3)]
        src = self.path(name + ".bpcc")
        bpcc_torch.export(model, (batches[0],), src)
        files = []
        for i, b in enumerate(batches):
            files.append(self.path("b%d.safetensors" % i))
            st.write(files[-1], [("x", b)])
        q = self.path("q.bpcc")
        self.bpcc("quantize", src, "-b", "fbgemm", "-q", "fbgemm", "--data", *files, "-o", q, "--no-sqnr")
        bc = get_fbgemm_backend_config()
        p = prepare_fx(copy.deepcopy(model), get_default_qconfig_mapping("fbgemm"), (batches[0],), backend_config=bc)
        with torch.no_grad():
            for b in batches:
                p(b)
        ref = convert_to_reference_fx(copy.deepcopy(p), backend_config=bc)
        lowered = convert_fx(copy.deepcopy(p), backend_config=bc)

        # weights: compute_sqnr(weight, get_weight()) on PyTorch's reference modules
        mine = json.loads(self.bpcc("compare", "weights", src, q, "-b", "fbgemm", "--json"))
        got = {r["name"]: r for r in mine["rows"]}
        want = {}
        for mname, m in ref.named_modules():
            if type(m).__module__.startswith("torch.ao.nn.quantized.reference"):
                want[mname] = float(compute_sqnr(m.weight.detach(), m.get_weight().detach()))
        self.assertEqual(sorted(got), sorted(want), "%s: compared modules" % name)
        self.assertEqual(mine["unmatched"], 0)
        for k, v in want.items():
            self.assertLess(abs(float(got[k]["sqnr_db"]) - v), 0.1, "%s %s: weight SQNR %s vs torch %.3f" %
                            (name, k, got[k]["sqnr_db"], v))
            self.assertLessEqual(float(got[k]["min_channel_sqnr_db"]), float(got[k]["sqnr_db"]) + 1e-9)

        # outputs: PyTorch's numeric suite on the float model and its quantized model, same batches
        a, b = ns.add_loggers("fp32", copy.deepcopy(model), "int8", lowered, ns.OutputLogger)
        with torch.no_grad():
            for x in batches:
                a(x)
                b(x)
        res = ns.extract_logger_info(a, b, ns.OutputLogger, "int8")
        ns.extend_logger_results_with_comparison(res, "fp32", "int8", compute_sqnr, "sqnr")
        theirs = {}
        for key, v in res.items():
            e = v["node_output"]["int8"][0]
            theirs[e["prev_node_name"]] = sum(float(s) for s in e["sqnr"]) / len(e["sqnr"])
        out = json.loads(self.bpcc("compare", "shadow", src, q, "-b", "fbgemm", "--data", *files, "--json"))
        ours = {r["name"]: r for r in out["rows"]}
        common = sorted(set(theirs) & set(ours))
        self.assertGreaterEqual(len(common), 0.6 * len(theirs), "%s: nodes in common: %s" % (name, common))
        x = [float(ours[k]["sqnr_db"]) for k in common]
        y = [theirs[k] for k in common]
        rho = spearman(x, y)
        self.assertGreaterEqual(rho, 0.9, "%s: rank correlation %.3f\n%s" % (name, rho, "\n".join(
            "%-28s bpcc %7.2f  torch %7.2f" % (k, u, v) for k, u, v in zip(common, x, y))))
        worst_theirs = min(common, key=lambda k: theirs[k])
        worst_ours = sorted(common, key=lambda k: float(ours[k]["sqnr_db"]))[:3]
        self.assertIn(worst_theirs, worst_ours, "%s: PyTorch's worst node" % name)
        for k in common:
            self.assertLess(abs(float(ours[k]["sqnr_db"]) - theirs[k]), 2.0, "%s %s: %s vs torch %.2f" %
                            (name, k, ours[k]["sqnr_db"], theirs[k]))
        # shadow: an op on exact inputs is not worse than with the upstream error
        for r in out["rows"]:
            if r["what"] != "placeholder":
                self.assertGreaterEqual(float(r["shadow_sqnr_db"]), float(r["sqnr_db"]) - 1.0, "%s %s" % (name, r["name"]))
        print("%s: %d weights within 0.1 dB; %d nodes in common, rank correlation %.3f" %
              (name, len(want), len(common), rho), flush=True)

    def test_resnet18(self):
        self.check("resnet18")

    def test_mobilenet_v2(self):
        self.check("mobilenet_v2")


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(Compare)
