#!/usr/bin/env python3
"""Conformance: `bpcc qconfig assign` against the qconfig map PyTorch 1.13's prepare_fx builds
(update_qconfig_for_fusion + generate_qconfig_map, captured from a real prepare_fx run). For
torchvision models and hand-written models with nested modules, functional ops and methods in
submodules, get_attr weights and repeated calls, with the built-in mappings and a custom mapping
using every rule kind (null included), after fusion for the same backend: every node of the fused
graph gets the same qconfig (None = float, else the same constructed observers).

usage: test_qconfig_assign.py BPCC      (exit 77 when torch is not installed)
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
import torch.nn as nn
import torch.nn.functional as F
import torchvision  # noqa: F401
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization import observer as ob
from torch.ao.quantization.quantize_fx import prepare_fx

import bpcc_torch  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402
from test_qconfigs import close  # noqa: E402
import importlib  # noqa: E402
tprepare = importlib.import_module("torch.ao.quantization.fx.prepare")

warnings.simplefilter("ignore")
torch.set_num_threads(2)
BPCC = None


class Block(nn.Module):
    """A residual block: a fused conv+relu, two functional adds (the order rule counts them),
    a method inside the module, a get_attr weight for F.linear."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(c, c, 1)
        self.w = nn.Parameter(torch.randn(c, c))

    def forward(self, x):
        y = self.relu(self.conv(x))
        y = y + x
        y = torch.add(y, self.conv2(y))
        y = F.relu(y)
        z = y.mean((2, 3))
        z = F.linear(z, self.w)
        return y * z.reshape(z.shape[0], -1, 1, 1).sigmoid()


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.features = nn.Sequential(Block(8), Block(8))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 8 * 8, 10), nn.ReLU())
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        x = self.features(self.stem(x))
        x = x * self.scale
        x = torch.sigmoid(x)
        return self.head(x).softmax(-1)


def custom_mapping():
    """Every rule kind, on the Nested model's names."""
    mm = QConfig(activation=ob.MinMaxObserver.with_args(dtype=torch.quint8),
                 weight=ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    mavg = QConfig(activation=ob.MovingAverageMinMaxObserver.with_args(averaging_constant=0.1),
                   weight=ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric))
    hist = QConfig(activation=ob.HistogramObserver.with_args(reduce_range=True),
                   weight=ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    fixed = QConfig(activation=ob.FixedQParamsObserver.with_args(scale=1.0 / 256.0, zero_point=0),
                    weight=ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric))
    return (QConfigMapping().set_global(mm)
            .set_object_type(nn.Conv2d, hist)
            .set_object_type(nn.ReLU, hist)          # same as Conv2d and Linear: fused modules take it
            .set_object_type(nn.Linear, hist)
            .set_object_type(F.linear, mavg)
            .set_object_type(torch.sigmoid, fixed)
            .set_object_type("sigmoid", fixed)
            .set_object_type("softmax", fixed)
            .set_object_type("mean", None)
            .set_object_type(Block, mavg)            # a scope type: functions inside Block
            .set_module_name_regex(r"features\.1\.conv", mavg)
            .set_module_name_regex(r"head", None)
            .set_module_name("features.1", hist)
            .set_module_name("stem", None)
            .set_module_name_object_type_order("features.0", torch.add, 0, None)
            .set_module_name_object_type_order("features.0", operator_add(), 0, hist)
            .set_module_name_object_type_order("features", Block, 1, None)
            # a fused module (stem.0: Conv2d+BN+ReLU) is counted as the Conv2d it was traced as
            .set_module_name_object_type_order("stem", nn.Conv2d, 0, hist)
            .set_module_name_object_type_order("features.1", nn.Conv2d, 1, None))


def operator_add():
    import operator
    return operator.add


def torch_qconfig_map(model, inputs, mapping, backend):
    """The node name -> qconfig dict that prepare_fx builds for the model (fused for backend)."""
    calls = []
    real = tprepare.generate_qconfig_map

    def spy(*args, **kwargs):
        r = real(*args, **kwargs)
        calls.append(r)
        return r
    tprepare.generate_qconfig_map = spy
    try:
        try:
            prepare_fx(copy.deepcopy(model), mapping, inputs, backend_config=bcfg.get_backend_config(backend))
        except Exception:
            if len(calls) < 2:
                raise
    finally:
        tprepare.generate_qconfig_map = real
    return calls[1]  # the first call is for the (empty) equalization mapping


def effective(qc):
    if qc is None:
        return None
    return {"activation": bq.observer_effective(qc.activation), "weight": bq.observer_effective(qc.weight)}


class Assign(conftools.TmpCase):
    def check(self, model, inputs, name, mappings, backends=("fbgemm",)):
        path = os.path.join(self.tmp.name, name + ".bpcc")
        bpcc_torch.export(model, inputs, path)
        for mname, mapping in mappings:
            if isinstance(mapping, str):
                spec, tmap = mapping, get_default_qconfig_mapping(mapping)
            else:
                spec = os.path.join(self.tmp.name, mname + ".yaml")
                with open(spec, "w") as f:
                    f.write(bq.mapping_yaml(mapping, mname))
                tmap = mapping
            for b in backends:
                what = "%s / %s / %s" % (name, mname, b)
                r = subprocess.run([BPCC, "qconfig", "assign", path, "-q", spec, "-b", b, "--json"],
                                   capture_output=True, text=True)
                try:
                    want = torch_qconfig_map(model, inputs, tmap, b)
                except LookupError as e:  # update_qconfig_for_fusion refuses the mapping
                    self.assertEqual(r.returncode, 1, "%s: PyTorch refuses (%s), bpcc does not" % (what, e))
                    self.assertIn("different object_type qconfigs", r.stderr, what)
                    continue
                self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr))
                got = {n["name"]: n["qconfig"] for n in json.loads(r.stdout)["nodes"]}
                self.assertEqual(sorted(got), sorted(want), "%s: node names differ" % what)
                for n, qc in want.items():
                    w = effective(qc)
                    self.assertTrue(close(got[n], w), "%s: node '%s':\n bpcc  %s\n torch %s"
                                    % (what, n, json.dumps(got[n])[:400], json.dumps(w)[:400]))

    def test_nested_model_every_rule_kind(self):
        torch.manual_seed(0)
        model = Nested().eval()
        self.check(model, (torch.randn(2, 3, 8, 8),), "nested",
                   [("custom", custom_mapping()), ("fbgemm", "fbgemm"), ("qnnpack", "qnnpack")],
                   backends=("fbgemm", "qnnpack", "native"))

    def test_fused_parts_with_different_qconfigs_is_an_error(self):
        m = (QConfigMapping().set_global(get_default_qconfig_mapping("fbgemm").global_qconfig)
             .set_object_type(nn.Conv2d, get_default_qconfig_mapping("fbgemm").global_qconfig)
             .set_object_type(nn.ReLU, None))
        model = Nested().eval()
        inputs = (torch.randn(2, 3, 8, 8),)
        with self.assertRaises(LookupError):
            prepare_fx(copy.deepcopy(model), m, inputs, backend_config=bcfg.get_backend_config("fbgemm"))
        path = os.path.join(self.tmp.name, "n.bpcc")
        bpcc_torch.export(model, inputs, path)
        spec = os.path.join(self.tmp.name, "bad.yaml")
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(m, "bad"))
        r = subprocess.run([BPCC, "qconfig", "assign", path, "-q", spec, "-b", "fbgemm"],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("different object_type qconfigs", r.stderr)


def make_test(name):
    def test(self):
        model = torchvision_model(name, 0)
        self.check(model, (torch.randn(1, 3, 64, 64),), name,
                   [("fbgemm", "fbgemm"), ("custom", custom_mapping())])
    return test


# the fusion conformance list (the bridge's torchvision models that prepare_fx traces)
for _n in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0",
           "densenet121", "squeezenet1_1", "mnasnet0_5"):
    setattr(Assign, "test_torchvision_" + _n, make_test(_n))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(Assign)
