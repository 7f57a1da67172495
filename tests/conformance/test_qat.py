#!/usr/bin/env python3
"""Conformance: converting a model trained with quantization-aware training. PyTorch 1.13 prepares
it (prepare_qat_fx with the backend's default QAT qconfig mapping), trains it a few steps (SGD;
weights, batch-norm statistics and the fake quantizes' observers move), and the bridge exports the
trained model; `bpcc convert` then makes the reference model, against convert_to_reference_fx of
the same trained model:
- the converted graph, node by node (op, target, arguments);
- every module's type, and the whole state dict (the folded conv and linear weights and biases,
  each reference module's qparams buffers), bit for bit;
- the reference modules' qscheme and dtype attributes;
- bpcc's model run by PyTorch gives PyTorch's model's outputs bit for bit, and `bpcc run` of it
  agrees with them.
The models: conv + batch norm (+ relu) in 1d and 2d, conv + relu, a depthwise block with a residual
add, linear + relu, linear + batch norm, a sigmoid (a fixed-qparams fake quantize), a submodule
left float (qconfig None: its QAT module is never made), a model whose observers were switched
off (disable_observer) and batch norms frozen before the last steps, and torchvision's
mobilenet_v2 and resnet18. Backends: x86 (fused moving-
average fake quantizes, per-channel weights), qnnpack (FakeQuantize, per-tensor weights).

bpcc's convert takes its qconfig mapping on the command line, as convert_fx may: the QAT mapping
prepare_qat_fx was given (spelled with fake quantizes: `bpcc_torch.qconfig.mapping_yaml`), or the
backend's post-training mapping of the same dtypes and Nones.

usage: test_qat.py BPCC      (exit 77 when torch is not installed)
"""
import copy
import os
import subprocess
import sys
import unittest
import warnings

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch()
import torch
import torch.nn as nn
from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx, prepare_qat_fx

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)
BPCC = None


class ConvNet(nn.Module):
    """conv-bn-relu, conv-bn, conv-relu, a depthwise conv-bn-relu with a residual add, a sigmoid,
    then mean, linear-relu and linear"""
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.relu3 = nn.ReLU()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.bndw = nn.BatchNorm2d(8)
        self.reludw = nn.ReLU()
        self.fc1 = nn.Linear(8, 16)
        self.relu4 = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(x))
        y = self.relu3(self.conv3(y))
        y = self.reludw(self.bndw(self.dw(y))) + x
        y = torch.sigmoid(y)
        y = y.mean((2, 3))
        return self.fc2(self.relu4(self.fc1(y)))


class Conv1dNet(nn.Module):
    """1d: conv-bn-relu, conv-bn; then linear-bn1d and a linear"""
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv1d(4, 8, 3)
        self.bn1 = nn.BatchNorm1d(8)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv1d(8, 6, 1)
        self.bn2 = nn.BatchNorm1d(6)
        self.fc1 = nn.Linear(6, 10)
        self.bnfc = nn.BatchNorm1d(10)
        self.fc2 = nn.Linear(10, 3)

    def forward(self, x):
        x = self.bn2(self.conv2(self.relu1(self.bn1(self.conv1(x)))))
        x = x.amax(2)
        return self.fc2(self.bnfc(self.fc1(x)))


class Embeddings(nn.Module):
    """an embedding and an embedding bag (QAT: float-qparams weight fake quantizes), then a linear"""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.bag = nn.EmbeddingBag(20, 8, mode="sum")
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.cat([self.emb(x).mean(1), self.bag(x)], 1))


def train(p, x, steps, freeze_after=None):
    """SGD steps on a random regression target; after `freeze_after` steps the observers are
    switched off and the batch norms frozen, as QAT recipes do for their last epochs"""
    torch.manual_seed(1)
    opt = torch.optim.SGD(p.parameters(), lr=0.05, momentum=0.9)
    with torch.no_grad():
        target = torch.randn_like(p(x))
    for i in range(steps):
        if freeze_after is not None and i == freeze_after:
            p.apply(torch.ao.quantization.disable_observer)
            p.apply(torch.nn.intrinsic.qat.freeze_bn_stats)
        opt.zero_grad()
        noisy = x + 0.1 * torch.randn_like(x) if x.is_floating_point() else x
        loss = ((p(noisy) - target) ** 2).mean()
        loss.backward()
        opt.step()
    return p.eval()


class Qat(conftools.TmpCase):
    def convert_prepared(self, p, x, backend, mapping, what):
        """`bpcc convert` of PyTorch's prepared model p (exported by the bridge) against
        convert_to_reference_fx of it: the graph, every module's type, the reference modules'
        qscheme and dtype attributes, the whole state dict bit for bit, PyTorch running both, and
        `bpcc run` of bpcc's model"""
        src, spec, out = self.path("p.bpcc"), self.path("q.yaml"), self.path("ref.bpcc")
        bpcc_torch.export(p, (x,), src)
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(mapping, backend))
        r = subprocess.run([BPCC, "convert", src, "-b", backend, "-q", spec, "-o", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr))
        want = convert_to_reference_fx(copy.deepcopy(p), backend_config=bcfg.get_backend_config(backend))
        got = bpcc_torch.load(out)
        self.assertEqual(conftools.graph_of(got), conftools.graph_of(want), "%s: converted graphs differ" % what)
        wm = {k: type(m).__name__ for k, m in want.named_modules() if k}
        gm = {k: type(m).__name__ for k, m in got.named_modules() if k}
        self.assertEqual(gm, wm, "%s: modules" % what)
        wr, gr = conftools.refs(want), conftools.refs(got)
        self.assertTrue(wr, "%s: PyTorch made no reference module: the case tests nothing" % what)
        for k in wr:
            self.assertEqual(gr[k][1], wr[k][1], "%s %s: qscheme and dtype attributes" % (what, k))
        ws, gs = want.state_dict(), got.state_dict()
        self.assertEqual(sorted(gs), sorted(ws), "%s: state dict keys" % what)
        for k in ws:
            if not isinstance(ws[k], torch.Tensor):  # a reference module's qscheme and dtype
                self.assertEqual(gs[k], ws[k], "%s %s" % (what, k))
                continue
            self.assertEqual((gs[k].dtype, gs[k].shape), (ws[k].dtype, ws[k].shape), "%s %s" % (what, k))
            self.assertTrue(torch.equal(gs[k], ws[k]), "%s %s: %s vs %s" % (what, k, gs[k].flatten()[:4], ws[k].flatten()[:4]))
        with torch.no_grad():
            theirs = want(x)
            self.assertTrue(torch.equal(got(x), theirs), "%s: bpcc's model and PyTorch's, both run by PyTorch" % what)
        data, o = self.path("b.safetensors"), self.path("o.safetensors")
        st.write(data, [("x", x)])
        subprocess.run([BPCC, "run", out, "--data", data, "-o", o], check=True)
        # in steps of the output's quantize point: bit-equal but where an inner value lies on a
        # rounding boundary (bpcc's float kernels are not PyTorch's bit for bit) and the flip
        # spreads, bounded as test_convert.py bounds it
        last = [n for n in want.graph.nodes if n.op == "call_function" and n.target == torch.quantize_per_tensor][-1]
        step = float(getattr(want, last.args[1].target))
        d = (st.read(o)["output"] - theirs).abs() / step
        print("%s: bpcc run vs PyTorch: %.4f within one output step, mean %.3f, max %.1f"
              % (what, (d <= 1 + 1e-3).float().mean().item(), d.mean().item(), d.max().item()), flush=True)
        self.assertLessEqual(d.max().item(), 3 + 1e-3, what)
        self.assertLessEqual(d.mean().item(), 0.7, what)

    def check(self, model, x, backend, none=(), steps=6, freeze_after=None, qat_rules=(), ptq=False, mapping=None):
        """prepare_qat_fx with the backend's QAT mapping (and the object_type rules qat_rules),
        training, then convert_prepared with the same mapping (without qat_rules, which 1.13 loses:
        docs/CONVERT.md), spelled with fake quantizes; or (ptq) the post-training mapping of the same
        dtypes"""
        what = "%s / %s%s%s%s" % (type(model).__name__, backend, " / float: %s" % ",".join(none) if none else "",
                                  " / frozen after %d" % freeze_after if freeze_after is not None else "",
                                  " / post-training mapping" if ptq else "")
        torch.manual_seed(0)
        qat_mapping = mapping() if mapping else get_default_qat_qconfig_mapping(backend)
        given = get_default_qconfig_mapping(backend) if ptq else mapping() if mapping else get_default_qat_qconfig_mapping(backend)
        for name in none:
            qat_mapping.set_module_name(name, None)
            given.set_module_name(name, None)
        for t, qc in qat_rules:
            qat_mapping.set_object_type(t, qc)
        p = prepare_qat_fx(model.train(), qat_mapping, (x,), backend_config=bcfg.get_backend_config(backend))
        p = train(p, x, steps, freeze_after)
        self.convert_prepared(p, x, backend, given, what)
        return p

    def test_conv_x86(self):
        self.check(ConvNet(), torch.randn(4, 3, 8, 8), "x86")

    def test_conv_qnnpack(self):
        self.check(ConvNet(), torch.randn(4, 3, 8, 8), "qnnpack")

    def test_fake_quantize_class(self):
        # FakeQuantize (not the fused one; its enabled flags are uint8 buffers): 1.13's
        # default_qat_qconfig (per-tensor weights) with fbgemm, and qnnpack's symmetric one
        # (qint8 activations, per-channel weights, eps 2^-12)
        from torch.ao.quantization import QConfigMapping
        from torch.ao.quantization.qconfig import default_per_channel_symmetric_qnnpack_qat_qconfig, default_qat_qconfig
        for qc, backend in ((default_qat_qconfig, "fbgemm"), (default_per_channel_symmetric_qnnpack_qat_qconfig, "qnnpack")):
            # the sigmoid keeps the backend's fixed-qparams fake quantize, which 1.13 requires
            fixed = get_default_qat_qconfig_mapping(backend).object_type_qconfigs[torch.sigmoid]
            self.check(ConvNet(), torch.randn(4, 3, 8, 8), backend,
                       mapping=lambda qc=qc, fixed=fixed: QConfigMapping().set_global(qc).set_object_type(torch.sigmoid, fixed))

    def test_post_training_mapping(self):
        # the backend's post-training mapping has the QAT one's dtypes and Nones: the same model
        for backend in ("x86", "qnnpack"):
            self.check(ConvNet(), torch.randn(4, 3, 8, 8), backend, ptq=True)

    def test_conv1d_linear_bn(self):
        for backend in ("x86", "qnnpack"):
            self.check(Conv1dNet(), torch.randn(4, 4, 12), backend)

    def test_float_submodules(self):
        # conv3 and fc2 keep their float modules (no QAT module is made for them)
        self.check(ConvNet(), torch.randn(4, 3, 8, 8), "x86", none=("conv3", "fc2"))

    def test_observers_off(self):
        # the fake quantizes' observers off and the batch norms frozen for the last steps: the
        # weights move on, the weight observers do not see the float weights at convert
        for backend in ("x86", "qnnpack"):
            self.check(ConvNet(), torch.randn(4, 3, 8, 8), backend, steps=8, freeze_after=4)

    def test_embeddings(self):
        # QAT Embedding and EmbeddingBag (default_embedding_qat_qconfig: float-qparams weight fake
        # quantizes) become float modules. 1.13 leaves them the global qconfig after the swap, so
        # its convert leaves them float (docs/CONVERT.md): bpcc given the mapping without the
        # embedding rules makes the same model
        from torch.ao.quantization.qconfig import default_embedding_qat_qconfig
        for backend in ("x86", "qnnpack"):
            torch.manual_seed(0)
            p = self.check(Embeddings(), torch.randint(0, 20, (3, 5)), backend, steps=3,
                           qat_rules=((nn.Embedding, default_embedding_qat_qconfig),
                                      (nn.EmbeddingBag, default_embedding_qat_qconfig)))
            self.assertTrue(type(p.emb).__module__.startswith("torch.ao.nn.qat"), "%s: no QAT embedding" % backend)

    def test_torchvision(self):
        # the qparams buffers are named by the scopes PyTorch's tracer recorded in the prepared
        # model (its _node_name_to_scope), which the bridge exports
        import torchvision
        torch.manual_seed(0)
        self.check(torchvision.models.mobilenet_v2(), torch.randn(2, 3, 64, 64), "x86", steps=2)
        self.check(torchvision.models.resnet18(), torch.randn(2, 3, 64, 64), "qnnpack", steps=2)

    def test_calibrated_in_pytorch(self):
        # not QAT: a model prepared and calibrated by PyTorch (prepare_fx), whose observers hold
        # statistics only (min_val, max_val; the histogram of x86's HistogramObserver), converted
        # by bpcc as convert_fx converts it
        for backend in ("x86", "qnnpack"):
            torch.manual_seed(0)
            x = torch.randn(4, 3, 8, 8)
            mapping = get_default_qconfig_mapping(backend)
            p = prepare_fx(ConvNet().eval(), mapping, (x,), backend_config=bcfg.get_backend_config(backend))
            with torch.no_grad():
                for _ in range(3):
                    p(torch.randn(4, 3, 8, 8))
            self.convert_prepared(p, x, backend, mapping, "calibrated in PyTorch / %s" % backend)
        # the modules prepare_fx observed travel with the export (its observed_node_names): a
        # linear whose [Linear, relu] the backend refused (a size reads the relu) stays float,
        # though an observer sits on its input
        from test_convert import Dims
        torch.manual_seed(0)
        x = torch.randn(4, 4, 16)
        mapping = get_default_qconfig_mapping("x86")
        p = prepare_fx(Dims().eval(), mapping, (x,), backend_config=bcfg.get_backend_config("x86"))
        self.assertNotIn("fc", p._observed_node_names)
        with torch.no_grad():
            for _ in range(3):
                p(torch.randn(4, 4, 16))
        self.convert_prepared(p, x, "x86", mapping, "calibrated in PyTorch / size after linear + relu")

    def test_quantized_graph_input_and_output(self):
        """a QAT model prepared with quantized input and output (PrepareCustomConfig), exported by
        the bridge with its indexes: bpcc convert makes convert_to_reference_fx's graph (the input
        dequantized first, the output left quantized), and PyTorch runs both to the same bits on a
        quantized input"""
        from torch.ao.quantization.fx.custom_config import PrepareCustomConfig
        torch.manual_seed(0)
        x = torch.randn(4, 3, 8, 8)
        pcc = PrepareCustomConfig().set_input_quantized_indexes([0]).set_output_quantized_indexes([0])
        p = prepare_qat_fx(ConvNet().train(), get_default_qat_qconfig_mapping("x86"), (x,), prepare_custom_config=pcc,
                           backend_config=bcfg.get_backend_config("x86"))
        p = train(p, x, 4)
        src, out = self.path("io.bpcc"), self.path("io_q.bpcc")
        bpcc_torch.export(p, (x,), src)
        r = subprocess.run([BPCC, "convert", src, "-b", "x86", "-q", "x86_qat", "-o", out], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        want = convert_to_reference_fx(copy.deepcopy(p), backend_config=bcfg.get_backend_config("x86"))
        got = bpcc_torch.load(out)
        self.assertEqual(conftools.graph_of(got), conftools.graph_of(want))
        self.assertEqual([u.target for u in next(iter(got.graph.nodes)).users], ["dequantize"])
        xq = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
        with torch.no_grad():
            a, b = got(xq), want(xq)
        self.assertTrue(a.is_quantized and b.is_quantized)
        self.assertEqual((a.q_scale(), a.q_zero_point()), (b.q_scale(), b.q_zero_point()))
        self.assertTrue(torch.equal(a.int_repr(), b.int_repr()))

    def test_interpreter_refuses_fake_quantize(self):
        torch.manual_seed(0)
        x = torch.randn(2, 3, 8, 8)
        p = prepare_qat_fx(ConvNet().train(), get_default_qat_qconfig_mapping("x86"), (x,),
                           backend_config=bcfg.get_backend_config("x86"))
        src, data = self.path("qat.bpcc"), self.path("b.safetensors")
        bpcc_torch.export(p.eval(), (x,), src)
        st.write(data, [("x", x)])
        r = subprocess.run([BPCC, "run", src, "--data", data, "-o", self.path("o.safetensors")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("fake quantize", r.stderr)
        self.assertIn("convert the model first", r.stderr)
        # prepare and quantize take float models: a QAT model is prepared already
        for verb in (["prepare"], ["quantize", "--data", data]):
            out = self.path("out.bpcc")
            r = subprocess.run([BPCC] + verb[:1] + [src, "-b", "x86", "-q", "x86", "-o", out] + verb[1:],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("prepared for QAT already", r.stderr)
            self.assertFalse(os.path.exists(out), verb)


if __name__ == "__main__":
    BPCC = sys.argv.pop(1)
    conftools.run(Qat)
