#!/usr/bin/env python3
"""Conformance: bpcc's qconfig mappings against PyTorch 1.13. The built-in mappings equal
get_default_qconfig_mapping(name) (and the <name>_qat ones get_default_qat_qconfig_mapping(name),
fake quantizes and their observers) rule for rule, with every observer's settings as PyTorch's
constructed observers hold them (dtype, qscheme, reduce_range, effective quant_min/quant_max, eps,
class-specific arguments); a hand-written YAML equals the QConfigMapping built from the same
settings in Python; patterns/qconfig/*.yaml are what the generator makes from this torch.

usage: test_qconfigs.py BPCC      (exit 77 when torch is not installed)
"""
import json
import os
import subprocess
import sys
import unittest
import warnings

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch(torchvision=False)
import torch
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization import observer as ob

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
from bpcc_torch import qconfig as bq  # noqa: E402

warnings.simplefilter("ignore")
BPCC = None
NAMES = ("fbgemm", "qnnpack", "x86", "onednn", "fbgemm_qat", "qnnpack_qat", "x86_qat", "onednn_qat")


def bpcc_json(spec):
    r = subprocess.run([BPCC, "qconfig", "dump", spec], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("bpcc qconfig dump %s failed: %s" % (spec, r.stderr))
    return json.loads(r.stdout)


def close(a, b):
    """JSON equality, floats compared as float32 where PyTorch stores them so (eps)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return float(torch.tensor(float(a), dtype=torch.float32)) == float(torch.tensor(float(b), dtype=torch.float32))
    return a == b


class QConfigs(unittest.TestCase):
    def check(self, got, want, what):
        for key in want:
            self.assertTrue(close(got.get(key), want[key]), "%s: '%s' differs:\n bpcc  %s\n torch %s"
                            % (what, key, json.dumps(got.get(key))[:600], json.dumps(want[key])[:600]))

    def test_builtins_equal_get_default_qconfig_mapping(self):
        # and the QAT ones (<backend>_qat) get_default_qat_qconfig_mapping: fake quantizes with
        # their observers' settings
        for name in NAMES:
            self.check(bpcc_json(name), bq.mapping_effective(bq.default_mapping(name)[0], name), name)
        self.assertEqual(bpcc_json("x86_qat")["global"]["activation"]["fake_quantize"], "FusedMovingAvgObsFakeQuantize")

    def test_shipped_yaml_is_what_the_generator_makes(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools", "python"))
        for name in NAMES:
            r = subprocess.run([sys.executable, "-m", "bpcc_torch.qconfig", name], capture_output=True,
                               text=True, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(ROOT, "patterns", "qconfig", name + ".yaml")) as f:
                self.assertEqual(r.stdout, f.read(), name)

    def test_hand_written_yaml_equals_the_python_mapping(self):
        int8 = QConfig(activation=ob.MinMaxObserver.with_args(dtype=torch.quint8, qscheme=torch.per_tensor_affine,
                                                             quant_min=0, quant_max=127),
                       weight=ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric,
                                                                    ch_axis=0))
        sym_w = ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
        m = (QConfigMapping().set_global(int8)
             .set_object_type(torch.nn.Linear, QConfig(
                 activation=ob.HistogramObserver.with_args(bins=1024, upsample_rate=64, reduce_range=True),
                 weight=sym_w))
             .set_object_type(torch.nn.functional.linear, None)
             .set_object_type(torch.sigmoid, QConfig(
                 activation=ob.FixedQParamsObserver.with_args(scale=0.00390625, zero_point=0), weight=sym_w))
             .set_object_type(torch.nn.LSTM, QConfig(
                 activation=ob.PlaceholderObserver.with_args(dtype=torch.quint8, compute_dtype=torch.quint8),
                 weight=sym_w))
             .set_module_name_regex(r"features\.[0-9]+\.conv", QConfig(
                 activation=ob.MovingAverageMinMaxObserver.with_args(averaging_constant=0.1, reduce_range=True,
                                                                     eps=0.000244140625),
                 weight=ob.MovingAveragePerChannelMinMaxObserver.with_args(
                     averaging_constant=0.5, ch_axis=1, dtype=torch.qint8, qscheme=torch.per_channel_affine,
                     quant_min=-127, quant_max=127)))
             .set_module_name("classifier.1", None)
             .set_module_name("", int8)
             .set_module_name_object_type_order("features", torch.add, 0, QConfig(
                 activation=ob.ReuseInputObserver, weight=ob.NoopObserver)))
        self.check(bpcc_json(os.path.join(ROOT, "tests", "qconfigs", "good", "custom.yaml")),
                   bq.mapping_effective(m, "custom"), "custom.yaml")


    def test_hand_written_qat_yaml_equals_the_python_mapping(self):
        from torch.ao.quantization import fake_quantize as fq
        from torch.ao.quantization.qconfig import default_embedding_qat_qconfig
        m = (QConfigMapping()
             .set_global(QConfig(
                 activation=fq.FakeQuantize.with_args(observer=ob.MovingAverageMinMaxObserver, quant_min=0, quant_max=127),
                 weight=fq.FusedMovingAvgObsFakeQuantize.with_args(
                     observer=ob.MovingAveragePerChannelMinMaxObserver, dtype=torch.qint8,
                     qscheme=torch.per_channel_symmetric, quant_min=-128, quant_max=127)))
             .set_object_type(torch.nn.Embedding, default_embedding_qat_qconfig)
             .set_object_type(torch.sigmoid, QConfig(
                 activation=fq.default_fixed_qparams_range_0to1_fake_quant, weight=fq.FakeQuantize)))
        got = bpcc_json(os.path.join(ROOT, "tests", "qconfigs", "good", "qat.yaml"))
        self.check(got, bq.mapping_effective(m, "qat"), "qat.yaml")
        # and bpcc's prepare, which makes no fake quantizes, says so
        r = subprocess.run([BPCC, "prepare", os.path.join(ROOT, "tests", "fixtures", "torch", "tiny_resnet.bpcc"), "-b", "x86",
                            "-q", "x86_qat", "-o", os.path.join(HERE, "never_written.bpcc")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("QAT prepare (prepare_qat_fx) is not supported", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(HERE, "never_written.bpcc")))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(QConfigs)
