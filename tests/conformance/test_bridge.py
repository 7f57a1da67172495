#!/usr/bin/env python3
"""Conformance: the PyTorch bridge. Every model exports, loads back as a GraphModule that gives
bit-identical outputs, keeps every node name, and is a file that bpcc's C side parses, shows and
prints back byte for byte.

usage: test_bridge.py BPCC [NAME ...]     (exit 77 when torch is not installed)
"""
import operator
import os
import subprocess
import sys
import tempfile
import unittest

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch()
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision  # noqa: F401

HERE = os.path.dirname(os.path.abspath(__file__))
import bpcc_torch  # noqa: E402
from bpcc_torch.__main__ import torchvision_model, MIN_SIZE  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402

BPCC = None
TORCHVISION = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0",
               "densenet121", "squeezenet1_1", "mnasnet0_5"]
torch.set_num_threads(2)


class FunctionalNet(nn.Module):
    """Functional forms: F.relu, F.linear, torch.add, operator.add, torch.cat, flatten, view,
    getitem with slices, mean with keepdim, sigmoid, hardswish."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.w = nn.Parameter(torch.randn(10, 8))
        self.b = nn.Parameter(torch.randn(10))
        self.register_buffer("shift", torch.randn(1, 8, 1, 1))

    def forward(self, x):
        y = F.relu(self.conv(x))
        y = torch.add(y, self.shift)
        z = torch.cat([y, y * 0.5], dim=1)[:, :8]
        z = z + y
        z = F.hardswish(z)
        s = torch.sigmoid(z.mean(dim=(2, 3), keepdim=True))
        z = z * s
        v = z.view(z.size(0), 8, -1).mean(-1)
        f = torch.flatten(z, 1)[..., 0:8]
        v = v + f
        return F.linear(v, self.w, self.b)


class MixedNet(nn.Module):
    """Modules and methods: BN, pooling, dropout, transposes, chunks (tuple outputs)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 6, 3, stride=2, bias=False), nn.BatchNorm2d(6), nn.ReLU6())
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(12, 4)
        self.ln = nn.LayerNorm(4)

    def forward(self, x):
        y = self.stem(x)
        c = torch.chunk(y, 2, dim=1)
        y = torch.cat((c[1], c[0]), 1)
        y = F.max_pool2d(y, 2, ceil_mode=True)
        y = self.pool(y).permute(0, 2, 3, 1).contiguous()
        y = y.reshape(y.shape[0], -1)[:, :12]
        return self.ln(self.fc(self.drop(y))).transpose(0, 1)


def run_bpcc(*args):
    return subprocess.run([BPCC] + list(args), capture_output=True, text=True)


class Bridge(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def round_trip(self, model, inputs, name):
        path = os.path.join(self.dir, name + ".bpcc")
        gm = bpcc_torch.export(model, inputs, path)
        back = bpcc_torch.load(path)
        self.assertEqual([n.name for n in back.graph.nodes], [n.name for n in gm.graph.nodes])
        self.assertEqual([n.op for n in back.graph.nodes], [n.op for n in gm.graph.nodes])
        with torch.no_grad():
            want = model(*inputs)
            got = back(*inputs)
        flat_w = want if isinstance(want, (tuple, list)) else (want,)
        flat_g = got if isinstance(got, (tuple, list)) else (got,)
        for w, g in zip(flat_w, flat_g):
            self.assertTrue(torch.equal(w, g), "%s: outputs differ (max %g)" % (name, (w - g).abs().max()))
        # the C side: parses, shows, and prints the same bytes
        r = run_bpcc("show", path)
        self.assertEqual(r.returncode, 0, r.stderr)
        copy = os.path.join(self.dir, name + "_fmt.bpcc")
        r = run_bpcc("fmt", path, "-o", copy)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(path) as f:
            text = f.read().replace('"%s.safetensors"' % name, '"%s_fmt.safetensors"' % name)
        with open(copy) as f:
            self.assertEqual(f.read(), text)
        with open(path[:-5] + ".safetensors", "rb") as a, open(copy[:-5] + ".safetensors", "rb") as b:
            self.assertEqual(a.read(), b.read())
        return path, back

    def test_functional_model(self):
        torch.manual_seed(3)
        self.round_trip(FunctionalNet().eval(), (torch.randn(2, 3, 8, 8),), "functional")

    def test_mixed_model(self):
        torch.manual_seed(4)
        self.round_trip(MixedNet().eval(), (torch.randn(2, 3, 17, 17),), "mixed")

    def test_train_mode_is_kept(self):
        torch.manual_seed(5)
        m = MixedNet().train()
        m.drop.p = 0.0  # deterministic, but the BN still normalizes with batch statistics
        path, back = self.round_trip(m, (torch.randn(3, 3, 17, 17),), "train")
        self.assertTrue(dict(back.named_modules())["stem.1"].training)

    def test_fused_modules_load(self):
        from torch.ao.quantization.quantize_fx import fuse_fx
        import torch.ao.nn.intrinsic as nni

        class Blocks(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
                self.bn = nn.BatchNorm2d(4)
                self.relu = nn.ReLU()
                self.fc = nn.Linear(4, 3)
                self.relu2 = nn.ReLU()

            def forward(self, x):
                y = self.relu(self.bn(self.conv(x))).mean((2, 3))
                return self.relu2(self.fc(y))

        torch.manual_seed(6)
        fused = fuse_fx(Blocks().eval())
        kinds = {type(m) for m in fused.modules()}
        self.assertIn(nni.ConvReLU2d, kinds)
        self.assertIn(nni.LinearReLU, kinds)
        path, back = self.round_trip(fused, (torch.randn(2, 3, 9, 9),), "fused")
        self.assertEqual(type(back.conv), nni.ConvReLU2d)
        self.assertEqual(type(back.conv[0]), nn.Conv2d)

    def test_qat_fused_modules_load(self):
        from torch.ao.quantization.quantize_fx import fuse_fx
        import torch.ao.nn.intrinsic as nni

        class CBR(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
                self.bn = nn.BatchNorm2d(4)
                self.relu = nn.ReLU()

            def forward(self, x):
                return self.relu(self.bn(self.conv(x)))

        torch.manual_seed(7)
        from torch.ao.quantization.fx.fuse import fuse as _fuse  # noqa: F401
        m = CBR().train()
        from torch.ao.quantization.quantize_fx import _fuse_fx
        fused = _fuse_fx(torch.fx.GraphModule(m, bpcc_torch.trace(m).graph), is_qat=True)
        kinds = {type(x) for x in fused.modules()}
        self.assertIn(nni.ConvBnReLU2d, kinds)
        fused.eval()
        self.round_trip(fused, (torch.randn(2, 3, 8, 8),), "qat_fused")

    def test_reference_quantized_model_loads(self):
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_fx, convert_to_reference_fx
        torch.manual_seed(8)
        m = MixedNet().eval()
        x = torch.randn(2, 3, 17, 17)
        prepared = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), (x,))
        prepared(x)
        ref = convert_to_reference_fx(prepared)
        ops = {n.target for n in ref.graph.nodes if n.op == "call_function"}
        self.assertIn(torch.quantize_per_tensor, ops)
        path, back = self.round_trip(ref, (x,), "reference")
        kinds = {type(x).__module__ for x in back.modules()}
        self.assertTrue(any("quantized.reference" in k for k in kinds))

    def test_a_model_bpcc_prepared_calibrates_in_pytorch(self):
        """bpcc prepare, the observers run by PyTorch on the loaded model (their statistics start
        as their constructors make them), the model exported again and converted by bpcc: the
        same quantize points, qparams and reference modules as bpcc's own calibration gives, with
        histogram observers (fbgemm's mapping); the record of observed modules goes both ways"""
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import test_convert
        torch.manual_seed(3)
        m = MixedNet().eval()
        x = torch.randn(2, 3, 17, 17)
        src, data = os.path.join(self.dir, "m.bpcc"), os.path.join(self.dir, "x.safetensors")
        bpcc_torch.export(m, (x,), src)
        st.write(data, [("x", x)])
        path = lambda n: os.path.join(self.dir, n)
        for args in (["prepare", src, "-b", "fbgemm", "-q", "fbgemm", "-o", path("p.bpcc")],
                     ["calibrate", path("p.bpcc"), "--data", data, "-o", path("c.bpcc")],
                     ["convert", path("c.bpcc"), "-b", "fbgemm", "-q", "fbgemm", "-o", path("q1.bpcc")]):
            r = subprocess.run([BPCC] + args, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
        gm = bpcc_torch.load(path("p.bpcc"))
        observers = [k for k, mod in gm.named_modules() if k.startswith("activation_post_process_")]
        self.assertTrue(observers)
        self.assertIn("HistogramObserver", type(gm.get_submodule(observers[0])).__name__)
        self.assertTrue(gm._observed_node_names)
        with torch.no_grad():
            gm(x)
        bpcc_torch.export(gm, (x,), path("pt.bpcc"))
        r = subprocess.run([BPCC, "convert", path("pt.bpcc"), "-b", "fbgemm", "-q", "fbgemm", "-o", path("q2.bpcc")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        a, b = bpcc_torch.load(path("q1.bpcc")), bpcc_torch.load(path("q2.bpcc"))
        qa, qb = test_convert.quantize_points(a), test_convert.quantize_points(b)
        self.assertEqual(sorted(qb), sorted(qa))
        for k in qa:
            self.assertEqual(qb[k][0], qa[k][0], k)
            self.assertLess(((qb[k][1] - qa[k][1]).abs() / qa[k][1]).max().item(), 1e-2, k)
        ra, rb = test_convert.reference_modules(a), test_convert.reference_modules(b)
        self.assertEqual(sorted(rb), sorted(ra))
        self.assertTrue(ra)

    def test_onednn_conv_add_model_loads_and_runs(self):
        """bpcc's onednn config (PyTorch 2.x's) fuses a residual block's conv, batch norm, add and
        relu into ConvAddReLU2d, which this torch may lack: the bridge builds 2.x's forward, and the
        quantized model runs in PyTorch as `bpcc run` runs it, to a step of the output, and exports
        back under 2.x's class name"""
        torch.manual_seed(3)
        m = torchvision_model("resnet18", 0)
        x = torch.randn(1, 3, 64, 64)
        src, batch = os.path.join(self.dir, "r.bpcc"), os.path.join(self.dir, "b.safetensors")
        bpcc_torch.export(m, (x,), src)
        st.write(batch, [("x", x)])
        q, out = os.path.join(self.dir, "q.bpcc"), os.path.join(self.dir, "o.safetensors")
        r = run_bpcc("quantize", src, "-b", "onednn", "-q", "onednn", "--data", batch, "-o", q)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_bpcc("run", q, "--data", batch, "-o", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        back = bpcc_torch.load(q)
        block = back.get_submodule("layer1.0.conv2")
        self.assertEqual(bpcc_torch._names.class_name(type(block)), "torch.ao.nn.intrinsic.ConvAddReLU2d")
        with torch.no_grad():
            got = back(x)
        last = [n for n in back.graph.nodes if n.op == "call_function" and n.target == torch.quantize_per_tensor][-1]
        step = float(getattr(back, last.args[1].target))
        d = (got - st.read(out)["output"]).abs() / step
        self.assertLessEqual(d.max().item(), 1 + 1e-3)
        again = os.path.join(self.dir, "again.bpcc")
        bpcc_torch.export(back, (x,), again)
        with open(again) as f:
            self.assertIn("torch.ao.nn.intrinsic.ConvAddReLU2d", f.read())

    def test_float_functionals_are_traced_as_prepare_fx_traces_them(self):
        """prepare_fx swaps each FloatFunctional for an FXFloatFunctional before tracing; the
        export does the same, so that the float model's activation_post_process (an Identity in
        every FloatFunctional) is no node, and puts the model back as it was"""
        import torchvision.models.quantization as tq
        m = tq.resnet18(weights=None, quantize=False).eval()
        before = [(n, type(x)) for n, x in m.named_modules()]
        gm = bpcc_torch.export(m, (torch.randn(1, 3, 32, 32),), os.path.join(self.dir, "q.bpcc"))
        self.assertEqual([n.target for n in gm.graph.nodes if "activation_post_process" in str(n.target)], [])
        self.assertEqual([(n, type(x)) for n, x in m.named_modules()], before)
        self.assertIsInstance(m.layer1[0].add_relu, torch.ao.nn.quantized.FloatFunctional)

    def test_tensors_made_while_tracing_are_left_out_of_the_model(self):
        """torch.fx stows a tensor made in forward (`torch.zeros(1)`) in the traced module as
        _tensor_constant<i>, the first i free: the export leaves the model as it was, so that
        prepare_fx tracing it afterwards names the constant as the export did"""
        class Consts(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 1)

            def forward(self, x):
                return self.conv(x) + torch.zeros(1) + torch.ones(1)

        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_fx
        m = Consts().eval()
        x = torch.randn(2, 3, 4, 4)
        gm = bpcc_torch.export(m, (x,), os.path.join(self.dir, "c.bpcc"))
        self.assertEqual(sorted(k for k in vars(m) if k.startswith("_tensor")), [])
        consts = [n.target for n in gm.graph.nodes if n.op == "get_attr"]
        self.assertEqual(consts, ["_tensor_constant0", "_tensor_constant1"])
        p = prepare_fx(m, get_default_qconfig_mapping("fbgemm"), (x,))
        self.assertEqual([n.target for n in p.graph.nodes if n.op == "get_attr"], consts)
        self.assertTrue(torch.equal(bpcc_torch.load(os.path.join(self.dir, "c.bpcc"))(x), gm(x)))

    def test_unsupported_construct_names_the_node(self):
        class Weird(nn.Module):
            def forward(self, x):
                return x + complex(1, 2)

        with self.assertRaises(bpcc_torch.BridgeError) as cm:
            bpcc_torch.export(Weird(), (torch.randn(2),), os.path.join(self.dir, "w.bpcc"))
        self.assertIn("node 'add'", str(cm.exception))
        self.assertIn("complex", str(cm.exception))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "w.bpcc")))

    def test_unpacking_a_traced_value_is_traced_as_on_python_3_10(self):
        """`a, b = t.unbind(0)`, `n, c = x.shape`: PyTorch 1.13 on Python 3.11 cannot trace them
        (its Proxy.__iter__ reads the bytecode as 3.10's); the bridge traces them as getitem nodes,
        as 3.10 does, and leaves torch.fx as it was after"""
        class Unpack(nn.Module):
            def forward(self, x):
                a, b = x.unbind(0)
                n, c = x.shape
                return a + b * c

        before = torch.fx.proxy.Proxy.__iter__
        path = os.path.join(self.dir, "u.bpcc")
        gm = bpcc_torch.export(Unpack(), (torch.randn(2, 3),), path)
        self.assertIs(torch.fx.proxy.Proxy.__iter__, before)
        got = [(n.op, str(n.target), n.args[1:]) for n in gm.graph.nodes if n.target in (operator.getitem,)]
        self.assertEqual(got, [("call_function", str(operator.getitem), (i,)) for i in (0, 1, 0, 1)])
        x = torch.randn(2, 3)
        self.assertTrue(torch.equal(bpcc_torch.load(path)(x), Unpack()(x)))
        st.write(os.path.join(self.dir, "x.safetensors"), [("x", x)])
        r = subprocess.run([BPCC, "run", path, "--data", os.path.join(self.dir, "x.safetensors"), "-o",
                            os.path.join(self.dir, "o.safetensors")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(torch.equal(st.read(os.path.join(self.dir, "o.safetensors"))["output"], Unpack()(x)))

    def test_looping_over_a_traced_value_names_the_line(self):
        """`for p in t.unbind(0)`: torch.fx cannot loop over a traced value (unpacking it is
        fine); the error names the user's line and the way out, and torch.fx is left as it was"""
        class Loop(nn.Module):
            def forward(self, x):
                s = 0
                for p in x.unbind(0):
                    s = s + p
                return s

        before = torch.fx.proxy.Proxy.__iter__
        with self.assertRaises(bpcc_torch.BridgeError) as cm:
            bpcc_torch.export(Loop(), (torch.randn(2, 3),), os.path.join(self.dir, "l.bpcc"))
        self.assertIs(torch.fx.proxy.Proxy.__iter__, before)
        msg = str(cm.exception)
        self.assertIn("test_bridge.py:", msg)
        self.assertIn("for p in x.unbind(0):", msg)
        self.assertIn("index it instead", msg)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "l.bpcc")))

    def test_a_fused_module_missing_a_part_is_refused(self):
        """a ConvReLU2d holding only its conv: its constructor's TypeError is reported, not hidden
        behind a container built as Sequential (that fallback is for reference roots and for
        PyTorch 2.x's fused modules, whose constructors take more than their parts)"""
        path = os.path.join(self.dir, "f.bpcc")
        with open(path, "w") as f:
            f.write("bpcc-model 1\n\nmodule c : torch.ao.nn.intrinsic.ConvReLU2d {}\n"
                    "module c.0 : torch.nn.Conv2d {in_channels: 1, out_channels: 1, kernel_size: (1, 1)}\n\n"
                    "graph\n  %x = placeholder x ()\n  %c = call_module c (%x,)\n  %output = output output (%c,)\n")
        with self.assertRaises(bpcc_torch.BridgeError) as cm:
            bpcc_torch.load(path)
        self.assertIn("module 'c' (torch.ao.nn.intrinsic.ConvReLU2d): constructor failed", str(cm.exception))

    def test_unserializable_module_attribute_names_the_module(self):
        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)
                self.lin.hook = lambda t: t  # no public name to store it by

            def forward(self, x):
                return self.lin(x)

        with self.assertRaises(bpcc_torch.BridgeError) as cm:
            bpcc_torch.export(Holder(), (torch.randn(1, 2),), os.path.join(self.dir, "h.bpcc"))
        self.assertIn("module 'lin'", str(cm.exception))
        self.assertIn("'hook'", str(cm.exception))

    def test_transformer_modules_round_trip(self):
        """a function-valued attribute (TransformerEncoderLayer's activation) is stored by its
        public name; composites whose constructors take what they build their parts from
        (d_model, encoder_layer) are put together from the file's parts and attributes"""
        torch.manual_seed(5)

        class T(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, activation="gelu", batch_first=True), 2)
                self.mha = nn.MultiheadAttention(8, 2, kdim=4, vdim=6)

            def forward(self, x):
                y = self.enc(x).transpose(0, 1)
                return self.mha(y, y[..., :4], y[..., :6])[0]

        path, back = self.round_trip(T().eval(), (torch.randn(2, 5, 8),), "transformer")
        with open(path) as f:
            self.assertIn("activation: torch.nn.functional.gelu", f.read())
        self.assertIs(back.enc.layers[1].activation, F.gelu)

    def test_recurrent_modules_round_trip(self):
        """LSTM and GRU, whose constructors take (*args, **kwargs), rebuilt from their attributes"""
        torch.manual_seed(6)

        class R(nn.Module):
            def __init__(self):
                super().__init__()
                self.lstm = nn.LSTM(4, 6, 2, bidirectional=True, batch_first=True)
                self.gru = nn.GRU(12, 3, bias=False)

            def forward(self, x):
                y = self.lstm(x)[0]
                return self.gru(y.transpose(0, 1))[0]

        _, back = self.round_trip(R().eval(), (torch.randn(2, 5, 4),), "recurrent")
        self.assertEqual((back.lstm.num_layers, back.lstm.bidirectional, back.gru.bias), (2, True, False))

    def test_run_command_writes_outputs(self):
        torch.manual_seed(9)
        m = FunctionalNet().eval()
        x = torch.randn(1, 3, 8, 8)
        path = os.path.join(self.dir, "f.bpcc")
        bpcc_torch.export(m, (x,), path)
        st.write(os.path.join(self.dir, "in.safetensors"), [("x", x)])
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "tools", "python"))
        r = subprocess.run([sys.executable, "-m", "bpcc_torch", "run", path,
                            os.path.join(self.dir, "in.safetensors"), os.path.join(self.dir, "out.safetensors")],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        out = st.read(os.path.join(self.dir, "out.safetensors"))["output"]
        with torch.no_grad():
            self.assertTrue(torch.equal(out, m(x)))

    def test_export_refuses_targets_that_clobber(self):
        """export writes the weights and the text to temporaries and renames both only when both
        are complete; it refuses, before writing, a .safetensors path (text and weights one file:
        the text was written over the weights), an empty name (the weights went to ./.safetensors
        before the text failed) and a directory; a missing directory leaves nothing"""
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
        x = torch.randn(1, 3, 8, 8)
        os.mkdir(os.path.join(self.dir, "adir"))
        cwd = os.getcwd()
        os.chdir(self.dir)
        try:
            for path, error, message in [("w.safetensors", bpcc_torch.BridgeError, "would be one file"),
                                         ("", ValueError, "its file name is empty"),
                                         ("adir", ValueError, "it is a directory"),
                                         (os.path.join("nodir", "m.bpcc"), FileNotFoundError, "")]:
                before = sorted(os.listdir("."))
                with self.assertRaises(error) as cm:
                    bpcc_torch.export(m, (x,), path)
                self.assertIn(message, str(cm.exception))
                self.assertEqual(sorted(os.listdir(".")), before, path)
                self.assertEqual(os.listdir("adir"), [])
            bpcc_torch.export(m, (x,), "ok.bpcc")
            self.assertTrue(torch.equal(bpcc_torch.load("ok.bpcc")(x), m(x)))
        finally:
            os.chdir(cwd)

    def test_outputs_whose_names_collide_are_refused(self):
        """a dict key with a dot in it names what a tuple's place names ("a.0"): bpcc run refuses at
        the output node, the bridge's run refuses too, and neither writes a file; where it wrote the
        key twice, neither bpcc nor the bridge could read it back"""
        class Collide(nn.Module):
            def forward(self, x):
                return {"a": (x.relu(), x), "a.0": x * 2}

        x = torch.randn(1, 4)
        path = os.path.join(self.dir, "c.bpcc")
        bpcc_torch.export(Collide(), (x,), path)
        st.write(os.path.join(self.dir, "x.safetensors"), [("x", x)])
        out = os.path.join(self.dir, "o.safetensors")
        r = subprocess.run([BPCC, "run", path, "--data", os.path.join(self.dir, "x.safetensors"), "-o", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(r.stderr, r"c\.bpcc:\d+:\d+: error: two of the output's tensors would be written under one "
                                   r"name, 'output\.a\.0'")
        self.assertFalse(os.path.exists(out))
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "tools", "python"))
        r = subprocess.run([sys.executable, "-m", "bpcc_torch", "run", path, os.path.join(self.dir, "x.safetensors"), out],
                           capture_output=True, text=True, env=env)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("two tensors under one name 'output.a.0'", r.stderr)
        self.assertFalse(os.path.exists(out))


def make_torchvision_test(name):
    def test(self):
        model = torchvision_model(name, seed=0)
        size = MIN_SIZE.get(name, 224)
        torch.manual_seed(1)
        self.round_trip(model, (torch.randn(1, 3, size, size),), name)
    return test


for _n in TORCHVISION:
    setattr(Bridge, "test_torchvision_" + _n, make_torchvision_test(_n))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    names = sys.argv[2:]
    if names:  # extra torchvision models given on the command line
        for n in names:
            setattr(Bridge, "test_torchvision_" + n, make_torchvision_test(n))
    conftools.run(Bridge)
