#!/usr/bin/env python3
"""Conformance of the conv+add fusions (PyTorch 2.x's ConvAdd2d and ConvAddReLU2d, which bpcc's
onednn config carries) against PyTorch 1.13's own machinery. 1.13 has no onednn config, but its
fusion, prepare and convert run patterns with root-node and extra-input getters: 2.x's patterns and
fuser methods, written here from 2.x's definitions and added to 1.13's fbgemm config, are the
oracle for the same entries, as patterns/onednn.yaml writes them, added to bpcc's fbgemm config.
Checked: the fused graph (nodes, arguments, module types, outputs) and the whole quantize flow
(quantize points, qparams, reference modules, outputs) on residual models: torchvision's resnet18
(left adds after batch norms, the addend a relu fused just before) and hand-written blocks with
the addend on either side, torch.add and operator.add, with and without batch norm and relu.

usage: test_conv_add.py BPCC      (exit 77 when torch is not installed)
"""
import copy
import os
import re
import sys
import tempfile
import unittest
import warnings

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch()
import torch
import torch.nn as nn
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig, ObservationType
from torch.ao.quantization.backend_config import get_fbgemm_backend_config
from torch.ao.quantization.quantize_fx import _fuse_fx
from torch.ao.quantization.utils import MatchAllNode
import torch.ao.nn.quantized.reference as nnqr

import bpcc_torch  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch._names import resolve  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402
import test_convert  # noqa: E402
import test_fuse  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(2)
ConvAdd2d = resolve("torch.ao.nn.intrinsic.ConvAdd2d")  # 2.x's, or the bridge's stand-in
ConvAddReLU2d = resolve("torch.ao.nn.intrinsic.ConvAddReLU2d")
ADDS = {"torch.add": torch.add, "operator.add": __import__("operator").add}


def fold(conv_or_bn_conv):
    """the conv of a (bn, conv) pair with the batch norm folded in, or the conv itself"""
    if isinstance(conv_or_bn_conv, tuple):
        bn, conv = conv_or_bn_conv
        return nn.utils.fusion.fuse_conv_bn_eval(conv, bn)
    return conv_or_bn_conv


def fuser(side, relu):
    """2.x's _fuse_conv[_bn]_add[_relu]_{left,right}: the modules come in the pattern's nested
    order, (add, conv_part, extra) on the left, (add, extra, conv_part) on the right"""
    def conv_part(add_pattern):
        return add_pattern[1] if side == "left" else add_pattern[2]
    if relu:
        return lambda is_qat, relu_mod, add_pattern: ConvAddReLU2d(fold(conv_part(add_pattern)), add_pattern[0], relu_mod)
    return lambda is_qat, *add_pattern: ConvAdd2d(fold(conv_part(add_pattern)), add_pattern[0])


def getters(side, relu):
    """2.x's root node and extra inputs getters: the conv node, and the other addend"""
    def add_of(p):
        return p[1] if relu else p

    def root(p):
        part = add_of(p)[1 if side == "left" else 2]
        return part[1] if isinstance(part, tuple) else part

    def extra(p):
        return [add_of(p)[2 if side == "left" else 1]]
    return root, extra


def combos():
    for relu in (False, True):
        for side in ("left", "right"):
            for bn in (True, False):
                for add in ("torch.add", "operator.add"):
                    yield relu, side, bn, add


def torch_config():
    weighted = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8, weight_dtype=torch.qint8,
                           bias_dtype=torch.float)
    c = get_fbgemm_backend_config()
    for relu, side, bn, add in combos():
        conv = (nn.BatchNorm2d, nn.Conv2d) if bn else nn.Conv2d
        p = (ADDS[add], conv, MatchAllNode) if side == "left" else (ADDS[add], MatchAllNode, conv)
        root, extra = getters(side, relu)
        c.set_backend_pattern_config(
            BackendPatternConfig((nn.ReLU, p) if relu else p)
            .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
            .set_dtype_configs([weighted]).set_fuser_method(fuser(side, relu))
            ._set_root_node_getter(root)._set_extra_inputs_getter(extra)
            .set_fused_module(ConvAddReLU2d if relu else ConvAdd2d))
    for fused in (ConvAdd2d, ConvAddReLU2d):
        c.set_backend_pattern_config(
            BackendPatternConfig(fused).set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
            .set_dtype_configs([weighted]).set_root_module(nn.Conv2d).set_reference_quantized_module(nnqr.Conv2d))
    return c


def onednn_entries():
    """patterns/onednn.yaml's conv+add entries, as written there (its anchors resolved)"""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "patterns", "onednn.yaml")) as f:
        text = f.read()
    dc1 = re.search(r"dtype_configs: &dc1\n((?:      - .*\n)+)", text).group(1)
    entries = re.findall(r"(  - pattern(?:_complex_format)?: (?:\[[^\n]*MatchAllNode[^\n]*\]|"
                         r"torch\.ao\.nn\.intrinsic\.ConvAdd(?:ReLU)?2d)\n(?:    .*\n)+)", text)
    assert len(entries) == 18, "onednn.yaml's conv+add entries: %d, want 16 patterns and 2 modules" % len(entries)
    return "".join(e.replace("dtype_configs: *dc1\n", "dtype_configs:\n" + dc1) for e in entries)


class Residual(nn.Module):
    """every conv+add shape: the addend left and right, torch.add and operator.add, with and
    without batch norm, with and without the relu after"""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.convs = nn.ModuleList(nn.Conv2d(8, 8, 3, padding=1) for _ in range(8))
        self.bns = nn.ModuleList(nn.BatchNorm2d(8) for _ in range(8))
        self.relus = nn.ModuleList(nn.ReLU() for _ in range(8))
        for m in self.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        y = self.stem(x)
        for i, (relu, side, bn, add) in enumerate(combos()):
            z = self.convs[i % 8](y)
            if bn:
                z = self.bns[i % 8](z)
            f = ADDS[add]
            z = f(z, y) if side == "left" else f(y, z)
            y = self.relus[i % 8](z) if relu else z
        return y


class ConvAdd(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cwd = os.getcwd()
        os.chdir(self.tmp.name)  # the config by a relative path: the fuse check names files after it
        self.yaml = "conv_add.yaml"
        with open(self.yaml, "w") as f:
            f.write("name: conv_add\nextends: fbgemm\nconfigs:\n" + onednn_entries())
        self.want_config = torch_config()
        # the oracle's config where the tests ask the bridge for the YAML's
        self.saved = bcfg.get_backend_config
        bcfg.get_backend_config = lambda spec: self.want_config if spec == self.yaml else self.saved(spec)

    def tearDown(self):
        bcfg.get_backend_config = self.saved
        os.chdir(self.cwd)
        self.tmp.cleanup()

    def fuse(self, model, inputs, name):
        f = test_fuse.Fuse("test_fusable_model")
        f.tmp = self.tmp
        f.check(model, inputs, name, backends=[self.yaml])
        # every conv+add shape was fused: no add is left in the fused graph
        got = bpcc_torch.load(os.path.join(self.tmp.name, "%s_%s.bpcc" % (name, self.yaml)))
        adds = [n for n in got.graph.nodes if n.op == "call_function" and n.target in ADDS.values()]
        self.assertEqual(adds, [], "%s: adds left unfused" % name)

    def quantize(self, model, name):
        c = test_convert.Convert("test_torchvision_resnet18")
        c.tmp = self.tmp
        for mname, mapping in (("minmax", test_convert.minmax_mapping()), ("fbgemm", "fbgemm")):
            c.check(model, (1, 3, 32, 32), name, mname, mapping, self.yaml)

    def test_every_shape_fuses_as_pytorch(self):
        torch.manual_seed(4)
        self.fuse(Residual().eval(), (torch.randn(1, 3, 16, 16),), "residual")

    def test_every_shape_quantizes_as_pytorch(self):
        torch.manual_seed(5)
        self.quantize(Residual().eval(), "residual")

    def test_resnet18_fuses_and_quantizes_as_pytorch(self):
        m = torchvision_model("resnet18", 0)
        self.fuse(copy.deepcopy(m), (torch.randn(1, 3, 64, 64),), "resnet18")
        self.quantize(m, "resnet18")


if __name__ == "__main__":
    test_fuse.BPCC = test_convert.BPCC = os.path.abspath(sys.argv[1])
    conftools.run(ConvAdd)
