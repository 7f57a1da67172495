#!/usr/bin/env python3
"""Conformance: `bpcc prepare` against PyTorch 1.13's prepare_fx. The same model (exported by the
bridge, fused by bpcc), backend config and qconfig mapping must give the same observers: every
observer described by the value it observes (original node name, and how many observers deep),
its class, dtype and quantization range, and the original nodes that consume it; and the same
sharing groups (observers that are one module instance). Hand-written models cover residual adds,
cat of differently observed inputs, fixed-qparams ops, functional linear, a null qconfig on some
module names and a qnnpack qconfig that violates a backend constraint; then torchvision models.

usage: test_prepare.py BPCC      (exit 77 when torch is not installed)
"""
import collections
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
from torch.ao.quantization.qconfig import float16_dynamic_qconfig, float16_static_qconfig
from torch.ao.quantization import observer as ob
from torch.ao.quantization.quantize_fx import prepare_fx
from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
from torch.ao.quantization.quantize import is_activation_post_process
from torch.ao.quantization.qconfig_mapping import _FIXED_QPARAMS_OP_TO_OBSERVER

import bpcc_torch  # noqa: E402
from bpcc_torch import _format as fmt  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(2)
BPCC = None


def minmax_mapping():
    """MinMax activations, per-channel MinMax weights, PyTorch's fixed-qparams entries."""
    qc = QConfig(activation=ob.MinMaxObserver.with_args(dtype=torch.quint8),
                 weight=ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric))
    m = QConfigMapping().set_global(qc)
    for op, obs in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
        m.set_object_type(op, QConfig(activation=obs, weight=ob.default_weight_observer))
    return m


class Residual(nn.Module):
    """Residual adds, cat of differently observed inputs, fixed-qparams ops, functional linear,
    reshape-like ops, a method on a size, submodules to name in a mapping."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.branch = nn.Sequential(nn.Conv2d(8, 8, 1), nn.ReLU())
        self.side = nn.Conv2d(8, 8, 1)
        self.pool = nn.MaxPool2d(2)
        self.sig = nn.Sigmoid()
        self.w = nn.Parameter(torch.randn(10, 16))
        self.b = nn.Parameter(torch.randn(10))
        self.head = nn.Linear(10, 4)

    def forward(self, x):
        x = self.stem(x)
        y = self.branch(x) + x            # residual add
        z = torch.cat([y, self.side(x).tanh()], 1)   # cat of differently observed inputs
        z = self.pool(z)
        z = z * self.sig(z)
        n = z.size(0)
        z = torch.flatten(F.adaptive_avg_pool2d(z, 1), 1)
        z = z.reshape(n, -1)
        z = F.linear(z, self.w, self.b)   # functional linear with get_attr weights
        z = F.relu(z)
        return self.head(z).softmax(-1), torch.sigmoid(z)


def null_names_mapping(base):
    m = copy.deepcopy(base)
    m.set_module_name("side", None).set_module_name("head", None)
    return m


def violating_qnnpack_mapping():
    """qnnpack accepts qint8 activations only with scale >= 2**-12: the default eps (float32 eps) of
    a qint8 MinMaxObserver violates scale_min_lower_bound, so those nodes stay float."""
    qc = QConfig(activation=ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
                 weight=ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric,
                                                    quant_min=-127, quant_max=127))
    m = QConfigMapping().set_global(get_default_qconfig_mapping("qnnpack").global_qconfig)
    m.set_module_name("branch", qc).set_object_type(torch.cat, qc)
    for op, obs in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
        m.set_object_type(op, QConfig(activation=obs, weight=ob.default_weight_observer))
    return m


def _dtype(v):
    return str(v)[len("torch."):] if isinstance(v, torch.dtype) else v


def torch_observers(gm):
    """[(key, module id)] for every observer node of a prepared GraphModule."""
    mods = dict(gm.named_modules(remove_duplicate=False))
    is_obs = {n.name: n.op == "call_module" and is_activation_post_process(mods[n.target]) for n in gm.graph.nodes}

    def base(n):
        depth = 0
        while is_obs.get(n.name):
            n, depth = n.args[0], depth + 1
        return n.name, depth

    out = []
    for n in gm.graph.nodes:
        if not is_obs[n.name]:
            continue
        m = mods[n.target]
        name, depth = base(n.args[0])
        users = tuple(sorted(u.name for u in n.users if not is_obs[u.name]))
        key = (name, depth + 1, type(m).__name__, _dtype(m.dtype), getattr(m, "quant_min", None),
               getattr(m, "quant_max", None), users)
        out.append((key, id(m)))
    return out


def bpcc_observers(plan):
    obs = {o["name"]: o for o in plan["observers"]}

    def base(name):
        depth = 0
        while name in obs:
            name, depth = obs[name]["observes"], depth + 1
        return name, depth

    out = []
    for o in plan["observers"]:
        s = o["observer"]
        name, depth = base(o["observes"])
        users = tuple(sorted(u for u in o["users"] if u not in obs))
        key = (name, depth + 1, s["observer"], s["dtype"], s.get("quant_min"), s.get("quant_max"), users)
        out.append((key, o["module"]))
    return out


def groups(pairs):
    g = collections.defaultdict(list)
    for key, ident in pairs:
        g[ident].append(key)
    return sorted(sorted(v) for v in g.values() if len(v) > 1)


class Prepare(conftools.TmpCase):
    def prepare(self, path, spec, backend, extra=()):
        out = os.path.join(self.tmp.name, "prepared.bpcc")
        plan = os.path.join(self.tmp.name, "plan.json")
        r = subprocess.run([BPCC, "prepare", path, "-b", backend, "-q", spec, "-o", out, "--plan", plan, *extra],
                           capture_output=True, text=True)
        return r, (json.load(open(plan)) if r.returncode == 0 else None), out

    def mapping_file(self, name, mapping):
        if isinstance(mapping, str):
            return mapping, get_default_qconfig_mapping(mapping)
        spec = os.path.join(self.tmp.name, name + ".yaml")
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(mapping, name))
        return spec, mapping

    def check(self, model, inputs, name, mappings, backends=("fbgemm", "qnnpack", "native"), quantized_io=None):
        """quantized_io: (input indexes, output quantized) for PrepareCustomConfig."""
        path = os.path.join(self.tmp.name, name + ".bpcc")
        bpcc_torch.export(model, inputs, path)
        extra, pcc = [], None
        if quantized_io:
            ins, out_q = quantized_io
            pcc = PrepareCustomConfig().set_input_quantized_indexes(list(ins))
            if ins:
                extra += ["--input-quantized", ",".join(map(str, ins))]
            if out_q:
                pcc.set_output_quantized_indexes([0])
                extra.append("--output-quantized")
        for mname, mapping in mappings:
            spec, tmap = self.mapping_file(mname, mapping)
            for b in backends:
                what = "%s / %s / %s%s" % (name, mname, b, " / %s" % (quantized_io,) if quantized_io else "")
                r, plan, out = self.prepare(path, spec, b, extra)
                try:
                    gm = prepare_fx(copy.deepcopy(model), tmap, inputs, prepare_custom_config=pcc,
                                    backend_config=bcfg.get_backend_config(b))
                except ValueError as e:
                    self.assertEqual(r.returncode, 1, "%s: PyTorch refuses (%s), bpcc does not" % (what, e))
                    continue
                self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr))
                want, got = torch_observers(gm), bpcc_observers(plan)
                wk = collections.Counter(k for k, _ in want)
                gk = collections.Counter(k for k, _ in got)
                self.assertEqual(gk, wk, "%s: observers differ\n only bpcc:  %s\n only torch: %s"
                                 % (what, sorted((gk - wk).elements()), sorted((wk - gk).elements())))
                self.assertEqual(groups(got), groups(want), "%s: sharing groups differ" % what)
                # the modules convert will swap for reference ones: prepare_fx's
                # observed_node_names, its call_module nodes, on the root module
                with open(out, encoding="utf-8") as f:
                    root = [e for e in fmt.parse_model(f.read(), out).modules if e.name == ""]
                self.assertEqual(len(root), 1, what)
                self.assertEqual(root[0].attrs.get("_observed_node_names"),
                                 [n.name for n in gm.graph.nodes if n.op == "call_module" and n.name in gm._observed_node_names],
                                 "%s: observed modules differ" % what)
                # the prepared model is a valid model file
                s = subprocess.run([BPCC, "show", out], capture_output=True, text=True)
                self.assertEqual(s.returncode, 0, "%s: prepared model does not load: %s" % (what, s.stderr))

    def test_residual_model(self):
        torch.manual_seed(0)
        model = Residual().eval()
        mm = minmax_mapping()
        self.check(model, (torch.randn(2, 3, 8, 8),), "residual",
                   [("minmax", mm), ("fbgemm", "fbgemm"), ("qnnpack", "qnnpack"), ("null_names", null_names_mapping(mm)),
                    ("violating", violating_qnnpack_mapping()),
                    # float16 placeholders are the other observer a fixed-qparams op may have
                    ("float16", QConfigMapping().set_global(float16_static_qconfig)),
                    ("float16_dynamic", QConfigMapping().set_global(float16_dynamic_qconfig))])

    def test_quantized_graph_inputs_and_output(self):
        torch.manual_seed(0)
        model = Residual().eval()
        for io in (([0], False), ([], True), ([0], True)):
            self.check(model, (torch.randn(2, 3, 8, 8),), "residual_io", [("minmax", minmax_mapping()), ("fbgemm", "fbgemm")],
                       backends=("fbgemm",), quantized_io=io)
        self.check(torchvision_model("resnet18", 0), (torch.randn(1, 3, 64, 64),), "resnet18_io", [("fbgemm", "fbgemm")],
                   backends=("fbgemm", "qnnpack"), quantized_io=([0], True))
        # convert_fx dequantizes the quantized inputs and leaves the quantized output quantized:
        # bpcc convert makes the same graph from the model PyTorch prepared and calibrated, and from
        # its own prepare and calibration (MinMax: the same qparams), and PyTorch runs the three to
        # the same bits on a quantized input
        from torch.ao.quantization.quantize_fx import convert_to_reference_fx
        from bpcc_torch import _safetensors as st
        x = torch.randn(2, 3, 8, 8)
        spec, _ = self.mapping_file("minmax", minmax_mapping())
        src = self.tmp.name + "/io_src.bpcc"
        bpcc_torch.export(model, (x,), src)
        st.write(self.tmp.name + "/io_x.safetensors", [("x", x)])
        nodes = lambda gm: [(n.op, n.name, str(n.target), str(n.args)) for n in gm.graph.nodes]
        xq = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
        for ins, outs in (([0], [0]), ([0], []), ([], [0])):
            what = "inputs %s, outputs %s" % (ins, outs)
            pcc = PrepareCustomConfig().set_input_quantized_indexes(ins).set_output_quantized_indexes(outs)
            gm = prepare_fx(copy.deepcopy(model), minmax_mapping(), (x,), prepare_custom_config=pcc)
            gm(x)
            theirs, bpccs = self.tmp.name + "/io_torch.bpcc", self.tmp.name + "/io_bpcc.bpcc"
            bpcc_torch.export(gm, (x,), theirs)
            want = convert_to_reference_fx(gm)
            r, _, prepared = self.prepare(src, spec, "fbgemm", (["--input-quantized", "0"] if ins else []) +
                                          (["--output-quantized"] if outs else []))
            self.assertEqual(r.returncode, 0, r.stderr)
            subprocess.run([BPCC, "calibrate", prepared, "--data", self.tmp.name + "/io_x.safetensors", "-o", bpccs],
                           check=True)
            given = xq if ins else x
            expect = want(given)
            self.assertEqual([t.dtype for t in expect], [torch.quint8 if outs else torch.float32, torch.float32], what)
            for path in (theirs, bpccs):
                out = self.tmp.name + "/io_q.bpcc"
                r = subprocess.run([BPCC, "convert", path, "-b", "fbgemm", "-q", spec, "-o", out], capture_output=True,
                                   text=True)
                self.assertEqual(r.returncode, 0, "%s, %s: %s" % (what, path, r.stderr))
                got = bpcc_torch.load(out)
                self.assertEqual(nodes(got), nodes(want), "%s, %s: converted graphs differ" % (what, path))
                self.assertFalse(hasattr(got, "_input_quantized_idxs") or hasattr(got, "_output_quantized_idxs"))
                # PyTorch's qparams give the same bits; bpcc's calibration, the same qparams but for
                # the last bit of a scale (its float ops are not PyTorch's), so a value a step off
                exact = path == theirs
                for a, b in zip(got(given), expect):
                    self.assertEqual(a.dtype, b.dtype, what)
                    if a.is_quantized:
                        self.assertEqual(a.q_zero_point(), b.q_zero_point(), what)
                        self.assertLessEqual(abs(a.q_scale() / b.q_scale() - 1), 0 if exact else 1e-6, what)
                        a, b = a.int_repr().int(), b.int_repr().int()
                        self.assertLessEqual((a - b).abs().max().item(), 0 if exact else 1, "%s, %s" % (what, path))
                    else:
                        self.assertTrue(exact and torch.equal(a, b) or torch.allclose(a, b, atol=1e-2),
                                        "%s, %s: outputs differ" % (what, path))
                # bpcc run takes the quantized input as a batch holds it (its integer values, its
                # qparams beside them), and writes a quantized output the same way
                st.write(self.tmp.name + "/io_xq.safetensors", [("x", given)])
                r = subprocess.run([BPCC, "run", out, "--data", self.tmp.name + "/io_xq.safetensors", "-o",
                                    self.tmp.name + "/io_o.safetensors"], capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                o = st.read(self.tmp.name + "/io_o.safetensors", quantized=True)["output.0"]
                ref = got(given)[0]
                self.assertEqual(o.is_quantized, ref.is_quantized, what)
                if ref.is_quantized:
                    self.assertEqual((o.q_scale(), o.q_zero_point()), (ref.q_scale(), ref.q_zero_point()), what)
                    o, ref = o.int_repr().int(), ref.int_repr().int()
                    self.assertLessEqual((o - ref).abs().max().item(), 1, what)
                else:
                    self.assertLessEqual((o - ref).abs().max().item(), 1e-2, what)
                # compare gives the float model a quantized batch dequantized (as any model that
                # does not dequantize the input itself): both models then see the same input
                # values, where a float batch is quantized by the model's own quantize point
                if ins:
                    r = subprocess.run([BPCC, "compare", "outputs", src, out, "--data",
                                        self.tmp.name + "/io_xq.safetensors", "-b", "fbgemm", "--json"],
                                       capture_output=True, text=True)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    rows = {e["name"]: e for e in json.loads(r.stdout)["rows"]}
                    self.assertEqual(rows["x"]["sqnr_db"], "inf", what)
                    self.assertNotEqual(rows["add"]["sqnr_db"], "inf", what)
        # positions past the model's inputs: PyTorch ignores them, bpcc refuses them by name
        os.remove(prepared)
        r, _, prepared = self.prepare(src, spec, "fbgemm", ["--input-quantized", "1"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("quantized input 1 named, and the model has 1 input", r.stderr)
        self.assertFalse(os.path.exists(prepared))

    def test_qnnpack_constraint_violation_stays_float_and_strict_refuses(self):
        torch.manual_seed(0)
        model = Residual().eval()
        inputs = (torch.randn(2, 3, 8, 8),)
        path = os.path.join(self.tmp.name, "r.bpcc")
        bpcc_torch.export(model, inputs, path)
        spec, _ = self.mapping_file("violating", violating_qnnpack_mapping())
        r = subprocess.run([BPCC, "explain", path, "-b", "qnnpack", "-q", spec, "--json"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        nodes = {n["name"]: n for n in json.loads(r.stdout)["nodes"]}
        self.assertEqual(nodes["cat"]["status"], "rejected")
        self.assertIn("eps", nodes["cat"]["reason"])
        self.assertIn("scale_min_lower_bound", nodes["cat"]["reason"])
        self.assertEqual(nodes["branch_0"]["status"], "rejected")
        self.assertIn("qnnpack.yaml:", nodes["cat"]["reason"])
        self.assertEqual(nodes["side"]["status"], "quantized")
        r, _, _ = self.prepare(path, spec, "qnnpack", ["--strict"])
        self.assertEqual(r.returncode, 1)
        self.assertIn("'cat' would stay float", r.stderr)

    def test_fixed_qparams_op_with_a_plain_observer_is_refused(self):
        model = Residual().eval()
        inputs = (torch.randn(2, 3, 8, 8),)
        bad = QConfigMapping().set_global(get_default_qconfig_mapping("fbgemm").global_qconfig)
        with self.assertRaises(ValueError):
            prepare_fx(copy.deepcopy(model), bad, inputs)
        path = os.path.join(self.tmp.name, "r.bpcc")
        bpcc_torch.export(model, inputs, path)
        spec, _ = self.mapping_file("bad", bad)
        r, _, _ = self.prepare(path, spec, "fbgemm")
        self.assertEqual(r.returncode, 1)
        self.assertIn("fixed-qparams op", r.stderr)
        self.assertIn("FixedQParamsObserver", r.stderr)


def make_test(name):
    def test(self):
        model = torchvision_model(name, 0)
        self.check(model, (torch.randn(1, 3, 64, 64),), name,
                   [("fbgemm", "fbgemm"), ("minmax", minmax_mapping())], backends=("fbgemm", "qnnpack", "native"))
    return test


for _n in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
           "densenet121", "squeezenet1_1", "mnasnet0_5"):
    setattr(Prepare, "test_torchvision_" + _n, make_test(_n))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(Prepare)
