#!/usr/bin/env python3
"""Conformance: `bpcc fuse` against PyTorch 1.13's fusion (_fuse_fx, what prepare_fx and
prepare_qat_fx run first) for the bridge's torchvision list and hand-written models, with the
native, fbgemm, qnnpack and tensorrt backends: the fused graph has the same nodes (names, ops,
targets, arguments), every call_module node the same module type (children included), and the
fused model loaded through the bridge gives PyTorch's outputs within 1e-5 relative.

usage: test_fuse.py BPCC [NAME ...]     (exit 77 when torch is not installed)
"""
import copy
import os
import subprocess
import sys
import unittest

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch()
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision  # noqa: F401

import bpcc_torch  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch.__main__ import torchvision_model, MIN_SIZE  # noqa: E402
from torch.ao.quantization.quantize_fx import _fuse_fx  # noqa: E402
import test_bridge  # noqa: E402  (its hand-written models)

BPCC = None
BACKENDS = ["native", "fbgemm", "qnnpack", "tensorrt"]
TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
               "densenet121", "squeezenet1_1", "mnasnet0_5"]
torch.set_num_threads(2)


class Fusable(nn.Module):
    """Every simple fusion: conv+bn+relu (module and functional relu), conv+bn, conv+relu,
    linear+relu (F.relu), linear+bn, bn+relu, conv1d/conv3d, convtranspose+bn, and the
    'not fused because' cases: a bn with two users, a conv feeding two ops."""

    def __init__(self, transpose=True):
        super().__init__()
        self.transpose = transpose
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.r1 = nn.ReLU()
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(8)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.r3 = nn.ReLU()
        self.b4 = nn.BatchNorm2d(8)
        self.r4 = nn.ReLU()
        self.c5 = nn.Conv2d(8, 8, 1)
        self.b5 = nn.BatchNorm2d(8)        # two users: not fused with c5
        self.ct = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.bt = nn.BatchNorm2d(4)
        self.c1d = nn.Conv1d(4, 4, 3)
        self.b1d = nn.BatchNorm1d(4)
        self.r1d = nn.ReLU()
        self.c3d = nn.Conv3d(1, 2, 1)
        self.b3d = nn.BatchNorm3d(2)
        self.l1 = nn.Linear(16, 12)
        self.lb = nn.BatchNorm1d(12)
        self.l2 = nn.Linear(12, 6)
        for m in self.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.3, 0.3)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)

    def forward(self, x):
        y = self.r1(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.r3(self.c3(y)) + self.b2(self.c2(y)) * 0  # conv2 again: a second use of c2's module
        y = self.r4(self.b4(y))
        z = self.b5(self.c5(y))
        y = z + torch.sigmoid(z)
        t = self.ct(y)                                      # (1, 4, 16, 16)
        if self.transpose:
            t = self.bt(t)
        s = t.mean(dim=2)                                   # (1, 4, 16)
        s = self.r1d(self.b1d(self.c1d(s)))                 # (1, 4, 14)
        v = self.b3d(self.c3d(t[:, :1].unsqueeze(2))).mean(dim=(1, 2, 3))  # (1, 16)
        w = F.relu(self.lb(self.l1(v)))
        return self.l2(w), s.sum()


def run_bpcc(*args):
    return subprocess.run([BPCC] + list(args), capture_output=True, text=True)


def module_types(gm):
    out = {}
    for n in gm.graph.nodes:
        if n.op == "call_module":
            m = gm.get_submodule(n.target)  # (named_modules() hides modules shared under two names)
            out[n.name] = (type(m).__name__, tuple(type(c).__name__ for c in m.children()),
                           m.training)
    return out


def node_list(gm):
    return [(n.name, n.op, str(n.target), str(n.args), str(n.kwargs)) for n in gm.graph.nodes]


class Fuse(conftools.TmpCase):
    def check(self, model, inputs, name, backends=BACKENDS, qat=False):
        path = os.path.join(self.tmp.name, name + ".bpcc")
        traced = bpcc_torch.export(model, inputs, path)
        for b in backends:
            want = _fuse_fx(copy.deepcopy(traced), qat, backend_config=bcfg.get_backend_config(b))
            out = os.path.join(self.tmp.name, "%s_%s.bpcc" % (name, b))
            args = ["fuse", path, "-b", b, "-o", out] + (["--qat"] if qat else [])
            r = run_bpcc(*args)
            self.assertEqual(r.returncode, 0, "%s/%s: %s" % (name, b, r.stderr))
            got = bpcc_torch.load(out)
            self.assertEqual(node_list(got), node_list(want), "%s/%s: graphs differ" % (name, b))
            self.assertEqual(module_types(got), module_types(want), "%s/%s: modules differ" % (name, b))
            if qat:
                got.eval()
                want.eval()
            with torch.no_grad():
                w = want(*inputs)
                g = got(*inputs)
            ws = w if isinstance(w, tuple) else (w,)
            gs = g if isinstance(g, tuple) else (g,)
            for a, c in zip(ws, gs):
                rel = float((a - c).abs().max() / a.abs().max().clamp_min(1e-12))
                self.assertLessEqual(rel, 1e-5, "%s/%s: outputs differ by %g relative" % (name, b, rel))

    def test_fusable_model(self):
        torch.manual_seed(11)
        self.check(Fusable().eval(), (torch.randn(1, 3, 8, 8),), "fusable")

    def test_functional_and_mixed_models(self):
        torch.manual_seed(12)
        self.check(test_bridge.FunctionalNet().eval(), (torch.randn(2, 3, 8, 8),), "functional")
        self.check(test_bridge.MixedNet().eval(), (torch.randn(2, 3, 17, 17),), "mixed")

    def test_qat_fusion_keeps_batch_norms(self):
        torch.manual_seed(13)
        m = Fusable(transpose=False).train()
        self.check(m, (torch.randn(2, 3, 8, 8),), "fusable_qat", backends=["native", "fbgemm"], qat=True)

    def test_qat_convtranspose_bn_is_refused_like_pytorch(self):
        torch.manual_seed(15)
        m = Fusable().train()
        path = os.path.join(self.tmp.name, "q.bpcc")
        traced = bpcc_torch.export(m, (torch.randn(2, 3, 8, 8),), path)
        with self.assertRaises(Exception) as cm:
            _fuse_fx(copy.deepcopy(traced), True, backend_config=bcfg.get_backend_config("native"))
        self.assertIn("ConvTranspose+BatchNorm", str(cm.exception))
        r = run_bpcc("fuse", path, "-b", "native", "--qat", "-o", os.path.join(self.tmp.name, "o.bpcc"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("ConvTranspose+BatchNorm is not supported in QAT", r.stderr)

    def test_train_mode_batch_norm_is_an_error_in_ptq(self):
        """PyTorch's fuse_conv_bn_eval asserts "Fusion only for eval!"; bpcc says why."""
        torch.manual_seed(14)
        m = Fusable().train()
        path = os.path.join(self.tmp.name, "t.bpcc")
        bpcc_torch.export(m, (torch.randn(2, 3, 8, 8),), path)
        r = run_bpcc("fuse", path, "-b", "native", "-o", os.path.join(self.tmp.name, "o.bpcc"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("eval mode only", r.stderr)
        self.assertIn("native.yaml:", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "o.bpcc")))


def make_test(name):
    def test(self):
        model = torchvision_model(name, seed=0)
        torch.manual_seed(1)
        size = MIN_SIZE.get(name, 224)
        self.check(model, (torch.randn(1, 3, size, size),), name)
    return test


for _n in TORCHVISION:
    setattr(Fuse, "test_torchvision_" + _n, make_test(_n))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    for n in sys.argv[2:]:
        setattr(Fuse, "test_torchvision_" + n, make_test(n))
    conftools.run(Fuse)
