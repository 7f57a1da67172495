#!/usr/bin/env python3
"""Conformance: dynamic and weight-only quantization. `bpcc quantize` with PyTorch 1.13's dynamic
qconfigs (int8 per tensor and per channel, float16) and weight-only ones (embeddings' float
qparams, 8 and 4 bits) against prepare_fx + one batch + convert_to_reference_fx, on linears, an
LSTM (two layers, both directions) and one with projections, the three cells, transformers
(BERT-style) and embeddings and embedding bags:
- the converted graph, node by node (op, target, arguments);
- every reference module: its type, each weight's qscheme and dtype attributes, each qparams buffer
  (name, dtype, shape, values bit for bit);
- bpcc's model loaded through the bridge gives PyTorch's outputs bit for bit when PyTorch runs it;
- `bpcc run` of bpcc's model agrees with PyTorch running it.
The float model's outputs are checked too (the embedding bags' modes, offsets, per-sample weights
and padding index run by bpcc's interpreter as PyTorch runs them).

One setting differs by how torch was built: convert writes quantize_per_tensor_dynamic's
reduce_range as `torch.backends.quantized.engine in ("fbgemm", "x86")`. Debian's torch has no
fbgemm engine (its default is onednn), so its convert writes False where a build with fbgemm, the
x86 default, writes True, as bpcc does (docs/CONVERT.md). The test sets PyTorch's nodes to True
before comparing; everything else is PyTorch's own.

usage: test_dynamic.py BPCC      (exit 77 when torch is not installed)
"""
import copy
import inspect
import os
import subprocess
import sys
import unittest
import warnings

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch(torchvision=False)
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao.quantization import (QConfigMapping, default_dynamic_qconfig, float16_dynamic_qconfig,
                                   float_qparams_weight_only_qconfig, per_channel_dynamic_qconfig)
from torch.ao.quantization.qconfig import float_qparams_weight_only_qconfig_4bit
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402

warnings.simplefilter("ignore")
torch.set_num_threads(1)
BPCC = None

DYNAMIC = (("dynamic", default_dynamic_qconfig), ("dynamic_per_channel", per_channel_dynamic_qconfig),
           ("float16_dynamic", float16_dynamic_qconfig))


class Linears(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Lstm(nn.Module):
    """two layers, both directions, batch first, then a linear"""
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


class ProjLstm(nn.Module):
    """an LSTM with a projection (proj_size: h is W_hr (o tanh(c))), two layers, both directions"""
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 6, num_layers=2, bidirectional=True, proj_size=4)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


class Cells(nn.Module):
    """one step of each cell, the LSTM cell from a given state, the RNN cell with relu"""
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTMCell(8, 8)
        self.gru = nn.GRUCell(8, 8)
        self.rnn = nn.RNNCell(8, 5, nonlinearity="relu")
        self.h = nn.Parameter(torch.randn(3, 8) * 0.1, requires_grad=False)

    def forward(self, x):
        hc = self.lstm(x, (self.h, self.h))
        return self.rnn(self.gru(hc[0] + hc[1], self.h))


class Embeddings(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.fc = nn.Linear(8, 4)

    def forward(self, ids):
        return self.fc(self.emb(ids))


class Bags(nn.Module):
    """EmbeddingBag: bags cut at offsets (an empty one among them) with per-sample weights (sum),
    the same ids as fixed-size bags (mean, max with a padding index)"""
    def __init__(self):
        super().__init__()
        self.sum = nn.EmbeddingBag(20, 8, mode="sum")
        self.mean = nn.EmbeddingBag(20, 8, mode="mean")
        self.max = nn.EmbeddingBag(20, 8, mode="max", padding_idx=3)
        self.register_buffer("offsets", torch.tensor([0, 2, 2, 5]))
        self.register_buffer("psw", torch.rand(8))
        self.fc = nn.Linear(8, 4)

    def forward(self, ids):
        a = self.sum(ids, self.offsets, self.psw)
        b = self.mean(ids.reshape(2, 4)) + self.max(ids.reshape(4, 2))[:2]
        return self.fc(torch.cat([a, b]))


def mapping_of(global_qc=None, **object_types):
    m = QConfigMapping()
    if global_qc is not None:
        m.set_global(global_qc)
    for t, qc in object_types.items():
        m.set_object_type(getattr(nn, t), qc)
    return m


class Dynamic(conftools.TmpCase):
    def check(self, model, x, name, mname, mapping, backend="fbgemm", torch_runs=True):
        """torch_runs=False: PyTorch's converted model cannot run (its bug, asserted); bpcc's model,
        whose graph and qparams buffers are PyTorch's (asserted), run by PyTorch is the reference"""
        what = "%s / %s / %s" % (name, mname, backend)
        model = model.eval()
        src = self.path("m.bpcc")
        bpcc_torch.export(model, (x,), src)
        spec = self.path("q.yaml")
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(mapping, mname))
        data = self.path("b.safetensors")
        inp = list(inspect.signature(model.forward).parameters)[0]  # the placeholder's name
        st.write(data, [(inp, x)])
        # the float model first: bpcc's interpreter against eager PyTorch
        fo = self.path("f.safetensors")
        subprocess.run([BPCC, "run", src, "--data", data, "-o", fo], check=True)
        with torch.no_grad():
            fe = model(x)
        self.assertLess(((st.read(fo)["output"] - fe).abs().max() / fe.abs().max()).item(), 1e-6, "%s: float" % what)
        out = self.path("q.bpcc")
        r = subprocess.run([BPCC, "quantize", src, "-b", backend, "-q", spec, "--data", data, "-o", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, "%s: %s" % (what, r.stderr))
        bc = bcfg.get_backend_config(backend)
        p = prepare_fx(copy.deepcopy(model), mapping, (x,), backend_config=bc)
        with torch.no_grad():
            p(x)
        want = convert_to_reference_fx(p, backend_config=bc)
        for n in want.graph.nodes:  # as a torch with the fbgemm engine writes it (module docstring)
            if n.target == torch.quantize_per_tensor_dynamic:
                n.args = (n.args[0], n.args[1], True)
        want.recompile()
        got = bpcc_torch.load(out)
        self.assertEqual(conftools.graph_of(got), conftools.graph_of(want), "%s: converted graphs differ" % what)
        wr, gr = conftools.refs(want), conftools.refs(got)
        self.assertTrue(wr, "%s: PyTorch made no reference module: the case tests nothing" % what)
        self.assertEqual(sorted(gr), sorted(wr), "%s: reference modules" % what)
        for k in wr:
            (wt, wa, wb), (gt, ga, gb) = wr[k], gr[k]
            self.assertEqual(gt, wt, "%s %s: type" % (what, k))
            self.assertEqual(ga, wa, "%s %s: qscheme and dtype attributes" % (what, k))
            self.assertEqual(sorted(gb), sorted(wb), "%s %s: buffers" % (what, k))
            for b in wb:
                self.assertEqual((gb[b].dtype, gb[b].shape), (wb[b].dtype, wb[b].shape), "%s %s.%s" % (what, k, b))
                self.assertTrue(torch.equal(gb[b], wb[b]), "%s %s.%s: %s vs %s" % (what, k, b, gb[b].flatten()[:4], wb[b].flatten()[:4]))
        with torch.no_grad():
            in_torch = got(x)
            if torch_runs:
                theirs = want(x)
                self.assertTrue(torch.equal(in_torch, theirs), "%s: bpcc's model and PyTorch's, both run by PyTorch" % what)
            else:
                with self.assertRaises(RuntimeError):
                    want(x)
                theirs = in_torch
        # bpcc run: its float kernels are not PyTorch's bit for bit, so a value near a rounding
        # boundary of a dynamic quantize point (its scale the range of the values, ~1/255 of it)
        # may land one step away; such a flip moves a few outputs by a fraction of their range
        o = self.path("o.safetensors")
        subprocess.run([BPCC, "run", out, "--data", data, "-o", o], check=True)
        mine = st.read(o)["output"]
        scale = theirs.abs().max().item()
        d = (mine - theirs).abs() / scale
        print("%s: bpcc run vs PyTorch: max %.2e, mean %.2e of the output's range" % (what, d.max(), d.mean()), flush=True)
        self.assertLess(d.max().item(), 2e-2, what)
        self.assertLess(d.mean().item(), 1e-3, what)
        return got

    def test_linears(self):
        torch.manual_seed(0)
        x = torch.randn(2, 5, 8)
        for mname, qc in DYNAMIC:
            for backend in ("fbgemm", "x86"):
                self.check(Linears(), x, "linears", mname, mapping_of(qc), backend)

    def test_lstm(self):
        torch.manual_seed(1)
        x = torch.randn(3, 7, 8)
        for mname, qc in DYNAMIC:
            got = self.check(Lstm(), x, "lstm", mname, mapping_of(qc))
            # every weight of both layers and directions has its qparams
            names = {n for n, _ in got.lstm.named_buffers()}
            for wn in got.lstm._flat_weights_names:
                if wn.startswith("weight") and mname != "float16_dynamic":
                    self.assertIn(wn + "_scale", names)

    def test_lstm_with_projection(self):
        """PyTorch 1.13's reference LSTM.from_float leaves proj_size out, so its converted model
        fails on its first run (the projection weights do not fit a module without one); bpcc's
        keeps proj_size, with the same graph and qparams, and PyTorch runs it
        (docs/PYTORCH_DIFFERENCES.md)"""
        torch.manual_seed(5)
        x = torch.randn(7, 3, 8)
        for mname, qc in DYNAMIC:
            got = self.check(ProjLstm(), x, "lstm_proj", mname, mapping_of(qc), torch_runs=False)
            if mname != "float16_dynamic":  # the projections are quantized too
                self.assertIn("weight_hr_l1_reverse_scale", {n for n, _ in got.lstm.named_buffers()})

    def test_cells(self):
        torch.manual_seed(2)
        x = torch.randn(3, 8)
        for mname, qc in DYNAMIC:
            self.check(Cells(), x, "cells", mname, mapping_of(qc))

    def test_transformers(self):
        """BERT-style dynamic quantization: every linear of a transformer encoder written out and of
        PyTorch's encoder modules (whose attention quantize_fx leaves whole, in float)"""
        try:
            import test_convert  # the conformance suite's transformer models (it wants torchvision)
        except SystemExit:
            self.skipTest("torchvision is not installed")
        torch.manual_seed(4)
        x = torch.randn(2, 16, 8)
        for mname, qc in DYNAMIC:
            with torch.no_grad():
                self.check(test_convert.Transformer(), x, "transformer", mname, mapping_of(qc))
                self.check(test_convert.Encoder(), x, "encoder", mname, mapping_of(qc))

    def test_embedding_weight_only(self):
        torch.manual_seed(3)
        ids = torch.randint(0, 20, (2, 6))
        for mname, qc in (("weight_only", float_qparams_weight_only_qconfig),
                          ("weight_only_4bit", float_qparams_weight_only_qconfig_4bit)):
            # the embedding alone, then with a dynamic linear after it (quantize_dynamic's pairing)
            self.check(Embeddings(), ids, "embeddings", mname, mapping_of(Embedding=qc))
            self.check(Embeddings(), ids, "embeddings", mname + "+dynamic",
                       mapping_of(Embedding=qc, Linear=default_dynamic_qconfig))
            bag_ids = torch.tensor([3, 1, 7, 3, 3, 0, 19, 5])
            self.check(Bags(), bag_ids, "bags", mname, mapping_of(EmbeddingBag=qc))
            self.check(Bags(), bag_ids, "bags", mname + "+dynamic", mapping_of(EmbeddingBag=qc, Linear=default_dynamic_qconfig))


if __name__ == "__main__":
    BPCC = os.path.abspath(sys.argv[1])
    conftools.run(Dynamic)
