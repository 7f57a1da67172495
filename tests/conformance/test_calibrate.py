#!/usr/bin/env python3
"""Conformance: `bpcc run` and `bpcc calibrate` against PyTorch 1.13.

- run: the reference interpreter's outputs equal PyTorch eager float32 to 1e-5 relative on the
  bridge's torchvision models.
- calibrate: after prepare (bpcc prepare / prepare_fx) and the same calibration batches, every
  observer's qparams (scale, zero point) equal those of prepare_fx's observer at the same place
  (observed value and consumers), for MinMax, MovingAverageMinMax and per-channel observers.

usage: test_calibrate.py BPCC      (exit 77 when torch is not installed)
"""
import collections
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
import torch.nn.functional as F
import torchvision  # noqa: F401
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization import observer as ob
from torch.ao.quantization.quantize_fx import prepare_fx, convert_to_reference_fx
from torch.ao.quantization.quantize import is_activation_post_process
from torch.ao.quantization.qconfig_mapping import _FIXED_QPARAMS_OP_TO_OBSERVER

import bpcc_torch  # noqa: E402
from bpcc_torch import _safetensors as st  # noqa: E402
from bpcc_torch import backend_config as bcfg  # noqa: E402
from bpcc_torch import qconfig as bq  # noqa: E402
from bpcc_torch.__main__ import torchvision_model  # noqa: E402

warnings.simplefilter("ignore")
# PyTorch's kernels for this CPU: the interpreter follows the AVX2 ones' summation orders and fused
# multiply-adds where they matter (means, interpolation); with others only the values are compared
_CAPABILITY = [l for l in torch.__config__.show().splitlines() if "CPU capability" in l]
TORCH_AVX2 = bool(_CAPABILITY) and _CAPABILITY[0].strip().endswith("AVX2")
if not TORCH_AVX2:
    print("PyTorch's CPU capability is not AVX2 (%s): means and interpolation compared to 1e-5, not bit for bit"
          % _CAPABILITY)
torch.set_num_threads(2)
BPCC = None


def mapping(act, weight):
    m = QConfigMapping().set_global(QConfig(activation=act, weight=weight))
    for op, obs in _FIXED_QPARAMS_OP_TO_OBSERVER.items():
        m.set_object_type(op, QConfig(activation=obs, weight=ob.default_weight_observer))
    return m


MAPPINGS = {
    "minmax": mapping(ob.MinMaxObserver.with_args(dtype=torch.quint8),
                      ob.PerChannelMinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_channel_symmetric)),
    "moving": mapping(ob.MovingAverageMinMaxObserver.with_args(dtype=torch.quint8, averaging_constant=0.25, reduce_range=True),
                      ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)),
    # qint8 activations: qnnpack's symmetric configs (scale >= 2**-12, weights in [-127, 127])
    "symmetric": mapping(ob.MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, eps=2 ** -12),
                         ob.MovingAveragePerChannelMinMaxObserver.with_args(
                             dtype=torch.qint8, qscheme=torch.per_channel_symmetric, quant_min=-127, quant_max=127,
                             eps=2 ** -12)),
    "fbgemm": get_default_qconfig_mapping("fbgemm"),  # HistogramObserver activations
}


class Head(nn.Module):
    """functional linear (get_attr weights get per-channel weight observers), cat, sigmoid"""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.w = nn.Parameter(torch.randn(6, 16))
        self.b = nn.Parameter(torch.randn(6))

    def forward(self, x):
        y = F.relu(self.conv(x))
        z = torch.cat([y, torch.sigmoid(y)], 1)
        z = F.adaptive_avg_pool2d(z, 1).flatten(1)
        return F.linear(z, self.w, self.b)


def observers(gm):
    """{(observed node, depth, sorted consumers): module} of a prepared GraphModule"""
    mods = dict(gm.named_modules(remove_duplicate=False))
    is_obs = {n.name: n.op == "call_module" and is_activation_post_process(mods[n.target]) for n in gm.graph.nodes}
    out = {}
    for n in gm.graph.nodes:
        if not is_obs[n.name]:
            continue
        a, depth = n.args[0], 1
        while is_obs.get(a.name):
            a, depth = a.args[0], depth + 1
        out[(a.name, depth, tuple(sorted(u.name for u in n.users if not is_obs[u.name])))] = n.target
    return out, mods


class Calibrate(conftools.TmpCase):
    def bpcc(self, *args, env=None):
        r = subprocess.run([BPCC, *args], capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, "bpcc %s: %s" % (" ".join(args), r.stderr))
        return r

    def check_run(self, model, x, name):
        src = self.path(name + ".bpcc")
        bpcc_torch.export(model, (x,), src)
        st.write(self.path("in.safetensors"), [("x", x)])
        self.bpcc("run", src, "--data", self.path("in.safetensors"), "-o", self.path("out.safetensors"))
        got = st.read(self.path("out.safetensors"))["output"]
        want = model(x).detach()
        err = ((got - want).abs().max() / want.abs().max().clamp(min=1e-30)).item()
        self.assertLess(err, 1e-5, "%s: interpreter output differs from eager by %g (relative)" % (name, err))

    def check_calibrate(self, model, shape, name, mname, backend="fbgemm", n_batches=3):
        torch.manual_seed(1)
        batches = [torch.randn(*shape) * (i + 1) for i in range(n_batches)]
        src = self.path(name + ".bpcc")
        bpcc_torch.export(model, (batches[0],), src)
        spec = self.path(mname + ".yaml")
        with open(spec, "w") as f:
            f.write(bq.mapping_yaml(MAPPINGS[mname], mname))
        prep, plan, cal = self.path("prep.bpcc"), self.path("plan.json"), self.path("cal.bpcc")
        self.bpcc("prepare", src, "-b", backend, "-q", spec, "-o", prep, "--plan", plan)
        files = []
        for i, b in enumerate(batches):
            files.append(self.path("batch%d.safetensors" % i))
            st.write(files[-1], [("x", b)])
        self.bpcc("calibrate", prep, "--data", *files, "-o", cal)
        tensors = st.read(self.path("cal.safetensors"))
        import json
        with open(plan) as f:
            p = json.load(f)
        names = {o["name"]: o for o in p["observers"]}
        got = {}
        for o in p["observers"]:
            a, depth = o["observes"], 1
            while a in names:
                a, depth = names[a]["observes"], depth + 1
            got[(a, depth, tuple(sorted(u for u in o["users"] if u not in names)))] = o["module"]
        gm = prepare_fx(copy.deepcopy(model), MAPPINGS[mname], (batches[0],), backend_config=bcfg.get_backend_config(backend))
        for b in batches:
            gm(b)
        want, mods = observers(gm)
        self.assertEqual(sorted(got), sorted(want), "%s/%s: observer placement differs" % (name, mname))
        checked = 0
        for key, tname in want.items():
            m = mods[tname]
            if isinstance(m, ob.FixedQParamsObserver) or not hasattr(m, "calculate_qparams"):
                continue
            scale, zp = m.calculate_qparams()
            bs = tensors[got[key] + ".scale"]
            bz = tensors[got[key] + ".zero_point"]
            ts = scale.to(torch.float32).reshape(bs.shape)
            # the interpreter's activations equal eager's to ~1e-7 relative, not bit for bit (other
            # summation orders), so qparams downstream of a conv may differ in the last bits
            rel = ((bs - ts).abs() / ts.abs()).max().item()
            # a histogram's counts move with those last bits too, and the L2 search stops at the
            # first step whose error grows, so a few counts can move its choice by a few percent;
            # on identical data it is bit-equal (test_observer_math_is_bit_exact)
            tol = 5e-2 if isinstance(m, ob.HistogramObserver) else 1e-5
            self.assertLess(rel, tol, "%s/%s %s: scale %s vs torch %s" % (name, mname, key, bs[:4].tolist(), ts[:4].tolist()))
            dz = (bz - zp.to(torch.int64).reshape(bz.shape)).abs().max().item()
            self.assertLessEqual(dz, 1 if tol < 1e-2 else 3, "%s/%s %s: zero point %s vs torch %s" % (name, mname, key, bz[:4].tolist(), zp[:4].tolist()))
            if key[0] == "x":  # the observed value is the data itself: bit-equal
                self.assertTrue(torch.equal(bs, ts) and dz == 0, "%s/%s %s: not bit-equal (%r vs %r)"
                                % (name, mname, key, bs.tolist(), ts.tolist()))
            checked += 1
        self.assertGreater(checked, 0)

    def test_observer_math_is_bit_exact(self):
        """Each observer class on the same data as torch: min/max and qparams bit for bit."""
        torch.manual_seed(3)
        batches = [torch.randn(4, 6, 5) * 3 + 1, torch.randn(4, 6, 5) - 2, torch.rand(4, 6, 5) * 7]
        files = []
        for i, b in enumerate(batches):
            files.append(self.path("b%d.safetensors" % i))
            st.write(files[-1], [("x", b)])
        cases = [
            ob.MinMaxObserver(), ob.MinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
            ob.MinMaxObserver(reduce_range=True), ob.MinMaxObserver(quant_min=0, quant_max=100),
            ob.MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_symmetric),
            ob.MinMaxObserver(dtype=torch.quint8, qscheme=torch.per_tensor_symmetric, quant_min=0, quant_max=200),
            ob.MinMaxObserver(dtype=torch.qint8, quant_min=-20, quant_max=50, eps=1e-3),
            ob.MovingAverageMinMaxObserver(averaging_constant=0.3),
            ob.MovingAverageMinMaxObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, averaging_constant=0.9),
            ob.PerChannelMinMaxObserver(ch_axis=0), ob.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.qint8,
                                                                                  qscheme=torch.per_channel_symmetric),
            ob.PerChannelMinMaxObserver(ch_axis=-1, reduce_range=True),
            ob.PerChannelMinMaxObserver(ch_axis=1, qscheme=torch.per_channel_affine_float_qparams),
            ob.MovingAveragePerChannelMinMaxObserver(ch_axis=1, averaging_constant=0.5),
            ob.HistogramObserver(), ob.HistogramObserver(reduce_range=True, bins=512),
            ob.HistogramObserver(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric, upsample_rate=16),
        ]
        for k, m in enumerate(cases):
            attrs = ["dtype: torch.%s" % str(m.dtype)[6:], "qscheme: torch.%s" % str(m.qscheme)[6:],
                     "quant_min: %d" % m.quant_min, "quant_max: %d" % m.quant_max,
                     "has_customized_qrange: %s" % m.has_customized_qrange, "reduce_range: %s" % m.reduce_range,
                     "eps: %r" % float(m.eps)]
            if hasattr(m, "averaging_constant"):
                attrs.append("averaging_constant: %r" % float(m.averaging_constant))
            if hasattr(m, "ch_axis"):
                attrs.append("ch_axis: %d" % m.ch_axis)
            if isinstance(m, ob.HistogramObserver):
                attrs += ["bins: %d" % m.bins, "upsample_rate: %d" % m.upsample_rate]
            text = ("bpcc-model 1\n\nmodule activation_post_process_0 : torch.ao.quantization.%s {%s}\n\ngraph\n"
                    "  %%x = placeholder x ()\n  %%obs = call_module activation_post_process_0 (%%x,)\n"
                    "  %%output = output output (%%obs,)\n") % (type(m).__name__, ", ".join(attrs))
            src = self.path("obs%d.bpcc" % k)
            with open(src, "w") as f:
                f.write(text)
            out = self.path("obs%d_cal.bpcc" % k)
            self.bpcc("calibrate", src, "--data", *files, "-o", out)
            t = st.read(self.path("obs%d_cal.safetensors" % k))
            for b in batches:
                m(b)
            scale, zp = m.calculate_qparams()
            what = "%s %s" % (type(m).__name__, attrs)
            self.assertTrue(torch.equal(t["activation_post_process_0.min_val"], m.min_val), what)
            self.assertTrue(torch.equal(t["activation_post_process_0.max_val"], m.max_val), what)
            if isinstance(m, ob.HistogramObserver):
                # the histogram is bit-equal; the L2 search sums float32 norms in another order than
                # torch's vectorized sum, so its qparams are held to 1 % of scale and +-1 zero point
                self.assertTrue(torch.equal(t["activation_post_process_0.histogram"], m.histogram), what)
                bs, bz = t["activation_post_process_0.scale"], t["activation_post_process_0.zero_point"]
                self.assertLess(((bs - scale).abs() / scale).max().item(), 0.01, "%s: %s vs %s" % (what, bs, scale))
                self.assertLessEqual((bz - zp).abs().max().item(), 1, "%s: %s vs %s" % (what, bz, zp))
                continue
            self.assertTrue(torch.equal(t["activation_post_process_0.scale"], scale.to(torch.float32).reshape(-1)),
                            "%s: scale %s vs %s" % (what, t["activation_post_process_0.scale"], scale))
            self.assertTrue(torch.equal(t["activation_post_process_0.zero_point"].to(zp.dtype), zp.reshape(-1)),
                            "%s: zero point %s vs %s" % (what, t["activation_post_process_0.zero_point"], zp))

    def test_head_every_mapping(self):
        torch.manual_seed(0)
        model = Head().eval()
        for mname in MAPPINGS:
            self.check_calibrate(model, (2, 3, 8, 8), "head", mname, backend="qnnpack" if mname == "symmetric" else "fbgemm")
        self.check_run(model, torch.randn(2, 3, 8, 8), "head")

    def test_run_other_layers(self):
        """transposed and 3-d convolutions, padding modes, pooling options, layer norm, gelu, matmul"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.c3 = nn.Conv3d(2, 4, (2, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0), dilation=(1, 1, 2))
                self.t = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
                self.t1 = nn.ConvTranspose1d(6, 3, 4, stride=3, dilation=2)
                self.r = nn.Conv2d(6, 6, 3, padding=2, padding_mode="reflect", groups=3)
                self.c = nn.Conv2d(6, 6, 3, padding=1, padding_mode="circular")
                self.ap = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)
                self.ln = nn.LayerNorm(5)
                self.mp = nn.MaxPool2d(3, stride=2, dilation=2, padding=1)

            def forward(self, x):
                y = self.c3(x)                      # [2, 4, 5, 4, 4]
                y = y.mean(2)                       # [2, 4, 4, 4]
                y = self.t(y)                       # [2, 6, 8, 8]
                z = self.t1(y.flatten(2))           # [2, 3, ...]
                y = self.c(self.r(y))
                y = F.gelu(self.ap(y)) + self.mp(y).sum()
                y = self.ln(y[..., :5])
                return torch.matmul(y, y.transpose(-1, -2)), z.softmax(-1)

        self.check_run_multi(M().eval(), torch.randn(2, 2, 4, 7, 8), "layers")

    def test_run_depthwise_and_transcendentals(self):
        """depthwise convolutions of every shape the direct kernel takes (channel multiplier,
        strides, dilation, padding modes, rows narrower and wider than its 16-column block, 1-d),
        and the ops over exp / tanh / erf on sizes that are not a multiple of its blocks"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.d1 = nn.Conv2d(4, 8, 3, padding=1, groups=4)                    # multiplier 2
                self.d2 = nn.Conv2d(8, 8, 5, stride=2, padding=2, groups=8)          # stride 2, 5x5
                self.d3 = nn.Conv2d(8, 8, 3, stride=(1, 3), padding=(2, 1), dilation=(2, 1), groups=8, bias=False)
                self.d4 = nn.Conv2d(8, 8, 3, padding=1, padding_mode="reflect", groups=8)
                self.d5 = nn.Conv2d(8, 8, (1, 4), stride=(2, 2), padding=(0, 3), padding_mode="replicate", groups=8)
                self.d6 = nn.Conv2d(8, 8, 3, dilation=3, padding=4, padding_mode="circular", groups=8)
                self.d7 = nn.Conv1d(8, 16, 7, stride=2, padding=3, groups=8)

            def forward(self, x):
                y = self.d3(self.d2(F.silu(self.d1(x))))
                y = torch.sigmoid(self.d6(self.d5(self.d4(y))))
                z = self.d7(y.flatten(2))
                return F.elu(y, 0.7), torch.tanh(z), torch.exp(z * 0.1), F.gelu(z), F.gelu(z, approximate="tanh")

        self.check_run_multi(M().eval(), torch.randn(2, 4, 21, 37), "depthwise")

    def test_run_pooling_of_every_rank(self):
        """1-d, 2-d and 3-d pooling, as modules and functions (channels are never pooled), batched
        matrix products"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.mp1 = nn.MaxPool1d(3, stride=2, padding=1, dilation=1, ceil_mode=True)
                self.ap1 = nn.AvgPool1d(4, stride=3, padding=2, count_include_pad=False)
                self.aap1 = nn.AdaptiveAvgPool1d(3)
                self.amp1 = nn.AdaptiveMaxPool1d(4)
                self.mp3 = nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(1, 1, 2))
                self.ap3 = nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, divisor_override=7)
                self.aap3 = nn.AdaptiveAvgPool3d((2, None, 3))
                self.amp3 = nn.AdaptiveMaxPool3d(2)

            def forward(self, x):                     # [2, 3, 5, 6, 7]
                v = x.flatten(2)                      # [2, 3, 210]
                return (self.mp1(v), self.ap1(v), self.aap1(v), self.amp1(v),
                        F.max_pool1d(v, 5, 4), F.avg_pool1d(v, 3, ceil_mode=True), F.adaptive_avg_pool1d(v, 7),
                        F.adaptive_max_pool1d(v[0], 5),
                        self.mp3(x), self.ap3(x), self.aap3(x), self.amp3(x), F.avg_pool3d(x, 2, count_include_pad=False),
                        F.max_pool3d(x, 2, 1, 1), F.adaptive_avg_pool3d(x, 1), F.adaptive_max_pool3d(x, (1, 2, 3)),
                        v @ v.transpose(1, 2), torch.bmm(v, v.transpose(1, 2)))

        self.check_run_multi(M().eval(), torch.randn(2, 3, 5, 6, 7), "pooling")

    def test_run_interpolation(self):
        """F.interpolate in every mode it takes, over 1, 2 and 3 spatial dimensions (bicubic: 2), by
        size and by scale factor (recomputed or not, with and without align_corners); the Upsample modules; a
        size sliced from another tensor's shape; a segmentation head's 8x upsampling. Bit for bit:
        an interpolation feeding a quantize point moves a value a step when its last ulp differs
        (lraspp's head did)"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Upsample(scale_factor=2, mode="nearest")
                self.bil = nn.UpsamplingBilinear2d(size=(9, 7))
                self.near = nn.UpsamplingNearest2d(scale_factor=(1.5, 2))
                self.tri = nn.Upsample(scale_factor=(2, 1, 3), mode="trilinear", align_corners=False)
                self.cub = nn.Upsample(scale_factor=(2.5, 1.5), mode="bicubic", align_corners=True)

            def forward(self, x):                         # [2, 3, 4, 6]
                v, w = x.flatten(2), x.unsqueeze(2).expand(-1, -1, 3, -1, -1)
                outs = [self.up(x), self.bil(x), self.near(x), self.tri(w), self.cub(x),
                        F.interpolate(x[:, :, ::2, ::3], size=x.shape[-2:], mode="bilinear", align_corners=False),
                        F.interpolate(x, scale_factor=8, mode="bilinear", align_corners=False),
                        F.interpolate(x, scale_factor=8, mode="bicubic", align_corners=False),
                        F.interpolate(x, size=x.shape[-2:], mode="bicubic"),
                        F.interpolate(x * 1e4, size=(13, 2), mode="bicubic")]
                for t, r, lin in ((v, 1, "linear"), (x, 2, "bilinear"), (w, 3, "trilinear")):
                    for mode in ("nearest", "nearest-exact", "area", lin) + (("bicubic",) if r == 2 else ()):
                        for kw in (dict(scale_factor=1.7), dict(scale_factor=0.5), dict(size=tuple([3, 8, 5][:r])),
                                   dict(scale_factor=tuple([1.5, 2.25, 0.7][:r])),
                                   dict(scale_factor=2.6, recompute_scale_factor=True)):
                            if mode == "area" and "recompute_scale_factor" in kw:
                                continue
                            for ac in ((False, True) if mode in (lin, "bicubic") else (None,)):
                                outs.append(F.interpolate(t, mode=mode, align_corners=ac, **kw))
                return tuple(outs)

        x = torch.randn(2, 3, 4, 6)
        self.check_run_multi(M().eval(), x, "interpolate", exact=True)
        self.check_run_multi(M().eval(), x, "interpolate", exact=True, isa="baseline")

    def test_run_more_layers(self):
        """padding modules and F.pad in every mode, chunk and split, pixel (un)shuffle, PReLU,
        group and instance norm, log-softmax, softplus, mish, abs, log and pow, amax / amin,
        var / std, repeat"""
        torch.manual_seed(0)

        class On(nn.Module):
            def __init__(self, m, f=None):
                super().__init__()
                self.m, self.f = m, f

            def forward(self, x):
                return self.m(x) if self.f is None else self.f(self.m, x)

        fn = lambda f: On(nn.Identity(), lambda m, x: f(x))
        inorm = nn.InstanceNorm2d(4, affine=True)
        itrack = nn.InstanceNorm1d(4, track_running_stats=True)
        gn = nn.GroupNorm(2, 4)
        pr = nn.PReLU(4)
        for p in (inorm.weight, gn.weight, pr.weight):
            p.data.uniform_(0.2, 1.5)
        for p in (inorm.bias, gn.bias, itrack.running_mean):
            p.data.uniform_(-1, 1)
        itrack.running_var.uniform_(0.5, 2)
        cases = [
            ("prelu", On(pr), (2, 4, 5)), ("prelu_one", On(nn.PReLU()), (2, 4, 5, 3)),
            ("prelu_f", On(pr, lambda m, x: F.prelu(x, m.weight)), (2, 4, 5)),
            ("mish", On(nn.Mish()), (2, 4, 5)), ("softplus", On(nn.Softplus(2.0, 5.0)), (2, 4, 5)),
            ("softplus_f", fn(lambda x: F.softplus(x * 30)), (2, 4, 5)),
            ("groupnorm", On(gn), (2, 4, 5, 3)), ("groupnorm_f", On(gn, lambda m, x: F.group_norm(x, 4, m.weight, None, 1e-3)), (2, 4, 5)),
            ("instnorm", On(inorm), (2, 4, 5, 5)), ("instnorm_unbatched", On(nn.InstanceNorm2d(4)), (4, 5, 5)),
            ("instnorm_track", On(itrack), (2, 4, 7)), ("instnorm3d", On(nn.InstanceNorm3d(4)), (2, 4, 3, 3, 3)),
            ("logsoftmax", On(nn.LogSoftmax(dim=1)), (2, 4, 5)), ("log_softmax_f", fn(lambda x: F.log_softmax(x * 10, -1)), (2, 4, 5)),
            ("pixelshuffle", On(nn.PixelShuffle(2)), (2, 8, 3, 5)), ("pixelunshuffle", On(nn.PixelUnshuffle(2)), (2, 3, 4, 6)),
            ("zeropad", On(nn.ZeroPad2d((1, 2, 0, 1))), (2, 4, 3, 3)),
            ("constpad3", On(nn.ConstantPad3d((1, 0, 2, 1, 0, 1), 3.5)), (2, 2, 3, 3, 3)),
            ("reflpad1", On(nn.ReflectionPad1d((2, 3))), (2, 4, 5)), ("reflpad2", On(nn.ReflectionPad2d(2)), (2, 4, 3, 4)),
            ("replpad3", On(nn.ReplicationPad3d((1, 2, 0, 1, 2, 0))), (1, 2, 3, 3, 3)),
            ("pad_f", fn(lambda x: F.pad(x, (-1, 2, 0, -1), value=-2.0)), (2, 4, 3, 3)),
            ("pad_reflect", fn(lambda x: F.pad(x, (1, 2, 2, 0), mode="reflect")), (2, 4, 3, 4)),
            ("pad_circular", fn(lambda x: F.pad(x, (1, 3, 2, 0), mode="circular")), (2, 4, 3, 4)),
            ("pad_replicate", fn(lambda x: F.pad(x, (3, 1), mode="replicate")), (2, 4, 3)),
            ("chunk", fn(lambda x: (lambda c: torch.cat([c[2], c[0], c[1]], 1))(x.chunk(3, dim=1))), (2, 7, 3)),
            ("split", fn(lambda x: torch.split(x, 2, dim=-1)[2]), (2, 4, 5)),
            ("split_sizes", fn(lambda x: (lambda t: torch.cat([t[1], t[0] * 2], 1))(x.split([1, 3], dim=1))), (2, 4, 5)),
            ("abs_log_pow", fn(lambda x: torch.log(x.abs() + 1) + torch.abs(x) + x ** 2 + torch.pow(x.abs(), 0.5)
                               + x.pow(3) + (x.abs() + 1) ** -1 + x.abs() ** 1.7), (2, 4, 5)),
            ("amax_amin", fn(lambda x: torch.amax(x, (1, 2)) + x.amin(-1, keepdim=True).sum() + torch.amin(x, ())), (2, 4, 5)),
            ("var_std", fn(lambda x: torch.var(x, 1) + x.var(2, False, True).mean() + torch.std(x) + torch.std(x, False)
                           + x.std(dim=(0, 2), correction=0).sum()), (2, 4, 5)),
            ("repeat", fn(lambda x: x.repeat(2, 1, 3, 2) + x.repeat((1, 1, 1)).sum()), (2, 4, 5)),
        ]
        for name, model, shape in cases:
            self.check_run(model.eval(), torch.randn(*shape), name)

    def check_ops(self, exact, close, x):
        """bpcc run of two models of many outputs against eager on x: exact's bit for bit (NaNs
        where eager has them), close's to 1e-5 relative"""
        for model, bits in ((exact, True), (close, False)):
            src = self.path("ops.bpcc")
            bpcc_torch.export(model.eval(), (x,), src)
            st.write(self.path("in.safetensors"), [("x", x)])
            self.bpcc("run", src, "--data", self.path("in.safetensors"), "-o", self.path("out.safetensors"))
            got = st.read(self.path("out.safetensors"))
            for i, w in enumerate(model(x)):
                g, w = got["output.%d" % i], w.detach().float()
                self.assertEqual(g.shape, w.shape, "output %d" % i)
                if bits:
                    self.assertTrue(torch.allclose(g, w, rtol=0, atol=0, equal_nan=True),
                                    "output %d: %g" % (i, (g - w).abs().max().item() if g.numel() else 0))
                elif g.numel():
                    err = ((g - w).abs().max() / w.abs().max()).item()
                    self.assertLess(err, 1e-5, "output %d: %g" % (i, err))

    def check_run_multi(self, model, x, name, exact=False, isa=None, tol=1e-5):
        """bpcc run's outputs against eager's: to 1e-5 relative, or, with `exact` and PyTorch
        running its AVX2 kernels (whose summation orders and fused multiply-adds bpcc follows
        there), bit for bit; `isa` "baseline" runs bpcc's baseline builds of its kernels"""
        src = self.path(name + ".bpcc")
        bpcc_torch.export(model, (x,), src)
        st.write(self.path("in.safetensors"), [("x", x)])
        env = dict(os.environ, BPCC_ISA=isa) if isa else None
        self.bpcc("run", src, "--data", self.path("in.safetensors"), "-o", self.path("out.safetensors"), env=env)
        got = st.read(self.path("out.safetensors"))
        want = model(x)
        for i, w in enumerate(want):
            g = got["output.%d" % i]
            if exact and TORCH_AVX2:
                self.assertTrue(torch.equal(g, w.detach()), "%s output %d: %g" % (name, i, (g - w).abs().max().item()))
                continue
            self.assertEqual(g.shape, w.shape, "%s output %d" % (name, i))
            err = ((g - w.detach()).abs().max() / w.detach().abs().max()).item()
            self.assertLess(err, tol, "%s output %d: %g" % (name, i, err))

    def test_run_means_are_bit_equal(self):
        """means and sums over one run of dimensions (global average pooling of every rank,
        x.mean(dims), x.sum(dims), the mean of all, sums over channels or rows) and adaptive
        average pooling to other sizes give PyTorch's bits, not only its value: in a quantized
        model a mean often lies exactly half-way between two steps, and its last ulp picks the
        step. Lengths from 1 to 9216 and 1 to 576 rows of 1 to 9216 columns reach every branch of
        PyTorch's cascade sums (their tails, groups of four vectors or columns, carries over
        levels). PyTorch's order is its AVX2 kernels'; with others it sums in another order"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.gap1, self.gap2, self.gap3 = nn.AdaptiveAvgPool1d(1), nn.AdaptiveAvgPool2d(1), nn.AdaptiveAvgPool3d(1)
                self.aap2 = nn.AdaptiveAvgPool2d((3, 2))

            def forward(self, x):                     # [2, 3, H, W]
                v, u = x.flatten(2), x.unsqueeze(2)   # [2, 3, H W], [2, 3, 1, H, W]
                rows = x.reshape(-1, x.shape[-1])   # [2 3 H, W]
                return (self.gap1(v), self.gap2(x), self.gap3(u), x.mean((2, 3)), x.mean(-1, keepdim=True),
                        x.sum(-1), v.sum(-1), x.sum((1, 2, 3)), torch.mean(x), x[0, 0, 0].sum(),
                        F.adaptive_avg_pool2d(x, 3), self.aap2(x), F.adaptive_avg_pool3d(u, (1, 2, 3)),
                        x.mean(1), x.sum(1, keepdim=True), x.sum((0, 1)), x.mean((1, 2)), rows.sum(0), rows.mean(0))

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # with more, PyTorch splits a large reduction to one number
        try:
            for shape in ((2, 3, 1, 1), (2, 3, 1, 5), (2, 3, 4, 4), (2, 3, 7, 7), (2, 3, 9, 13), (2, 3, 33, 31),
                          (2, 3, 96, 96)):
                self.check_run_multi(M().eval(), torch.randn(*shape) * 3, "means%dx%d" % shape[2:], exact=True)
        finally:
            torch.set_num_threads(threads)

    def test_run_batch_norm_is_bit_equal(self):
        """eval batch norm of every rank, as a module (affine or not) and as F.batch_norm: beta = b -
        mean alpha and x alpha + beta each rounded once, as PyTorch's kernel computes them (fused
        multiply-adds), in the AVX2 build and the baseline one (BPCC_ISA=baseline). An unfused batch
        norm (densenet's, after a cat) feeds a quantize point. Contiguous inputs: for a strided view
        PyTorch takes another path, whose bits bpcc (which makes views contiguous) does not follow"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.bn1, self.bn2, self.bn3 = nn.BatchNorm1d(4), nn.BatchNorm2d(4), nn.BatchNorm3d(4)
                self.plain = nn.BatchNorm2d(4, affine=False)
                for bn in (self.bn1, self.bn2, self.bn3, self.plain):
                    bn.running_mean.normal_()
                    bn.running_var.uniform_(0.3, 3)
                    if bn.affine:
                        bn.weight.data.normal_()
                        bn.bias.data.normal_()

            def forward(self, x):                     # [2, 4, 9, 13]
                return (self.bn1(x.flatten(2)), self.bn2(x), self.bn3(x.unsqueeze(2)), self.plain(x),
                        F.batch_norm(x, self.bn2.running_mean, self.bn2.running_var, self.bn2.weight, None, False, 0.1, 1e-3),
                        self.bn1(x[:, :, 0, :5].contiguous()), self.bn1(x[:, :, 0, 0].contiguous()))

        x = torch.randn(2, 4, 9, 13) * 3
        self.check_run_multi(M().eval(), x, "bn", exact=True)
        self.check_run_multi(M().eval(), x, "bn", exact=True, isa="baseline")

    def test_run_elementwise_ops_are_bit_equal(self):
        """the ops docs/CALIBRATE.md calls bit-equal: arithmetic, clamps, the ReLU family,
        hardswish and hardsigmoid, neg, abs, sqrt, rsqrt and reciprocal, pooling windows, pixel
        shuffle, PReLU; in the AVX2 builds and the baseline ones"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.pr = nn.PReLU(4)
                self.pr.weight.data.uniform_(-0.5, 0.5)

            def forward(self, x):                     # [2, 4, 9, 14]
                y = x * 0.7 - 0.1
                return (x + y, x - y, x * y, x / (y.abs() + 1), 2.5 - x, F.relu(x), F.relu6(x), F.hardtanh(x, -0.3, 0.8),
                        x.clamp(-0.5, 0.5), F.leaky_relu(x, 0.1), F.hardswish(x), F.hardsigmoid(x), -x, torch.neg(x),
                        x.neg(), x.abs(), torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 0.1), (x.abs() + 0.1).rsqrt(),
                        torch.reciprocal(y), y.reciprocal(), F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1),
                        F.avg_pool2d(x, 2, count_include_pad=False), F.pixel_shuffle(x, 2), self.pr(x), x ** 2)

        x = torch.randn(2, 4, 9, 14) * 3
        self.check_run_multi(M().eval(), x, "elementwise", exact=True)
        self.check_run_multi(M().eval(), x, "elementwise", exact=True, isa="baseline")

    def test_run_tensor_ops_of_user_models(self):
        """the tensor ops models outside torchvision use (attention masks, selection, casts,
        rearrangements, element-wise math, norms, sorting, gathering, triangles, bool-mask
        selections) against eager on one input. Those that only move, select, sort or compare elements, or round once, give PyTorch's
        bits on any machine (topk's indices among equal values aside: PyTorch leaves their order
        unspecified, so the test takes only their values); the others
        (libm against SLEEF, sums in another order) agree to 1e-5 relative. matmul with vectors and
        broadcast batch dimensions. Bool tensors (comparisons)
        feed ~, &, |, where, masked_fill and arithmetic as PyTorch promotes them"""
        torch.manual_seed(0)

        class Exact(nn.Module):
            def __init__(self):
                super().__init__()
                self.unf, self.ss, self.hs = nn.Unflatten(2, (3, 12)), nn.Softsign(), nn.Hardshrink(0.7)
                self.register_buffer("idx", torch.tensor([3, 1, 1, -2]))
                self.register_buffer("mask", torch.rand(6, 6) > 0.5)

            def forward(self, x):                     # [2, 4, 6, 6]
                m = x > 0.3
                f = x.flatten(2)
                mx = x.max(-1)
                return (torch.where(~m & (x > -1) | (x < -2), x, -x), x.masked_fill(~m, -1e9), torch.where(m, x, 0.5),
                        m.float() + (x < 0) * 2.0 + x * (x >= 0) - (x == x.roll(1, 3)).to(torch.float32),
                        torch.maximum(x, x.flip(3)), torch.minimum(x, 0.1 * x), torch.max(x, x.transpose(2, 3)),
                        mx.values, mx.indices.float(), x.min(1)[0], torch.min(x, 2, keepdim=True)[1].float(),
                        x.argmax().float() + x.argmin(3, keepdim=True).float(), torch.amax(x, 1) - x.max(),
                        torch.cumsum(x, 1), f.cumsum(-1), x.clamp_min(0.2), x.clamp_max(-0.1), torch.clip(x, -0.5, 0.5),
                        torch.floor(x * 3), torch.ceil(x * 3), torch.round(x * 3), torch.trunc(x * 3), torch.sign(x - 0.5),
                        torch.square(x), self.ss(x), self.hs(x), F.softshrink(x, 0.3),
                        x.narrow(2, 1, 3), x.select(1, -1), torch.unbind(x, 2)[4], x[:, :2].expand_as(x[:, :2, :, :]),
                        f.view_as(x), f.reshape_as(x), x[:, :, :1].expand_as(x), self.unf(f), f.unflatten(-1, (-1, 3)),
                        x.swapaxes(1, 3), torch.movedim(x, (0, 1), (3, 2)), x.movedim(1, -1), x.flip(0, 2), torch.flip(x, [-1]),
                        torch.roll(x, (1, -3), (1, 3)), x.roll(5), x.tile(2), torch.tile(x, (1, 2, 1, 1)),
                        x.repeat_interleave(2, dim=1), x.repeat_interleave(2), x.repeat(1, 2, 1, 1),
                        torch.zeros_like(x) + torch.ones_like(x), torch.full_like(x, 0.25), x.new_zeros(3, 4) + x.new_ones((4,)),
                        x.new_full((2, 6), 3.5), (x * 3).long().float() + (x * 3).int().float(), x.float(), x.to(torch.float32),
                        x.type_as(x), x.clone(), x.detach(), x.bool().float(), m.to(torch.float32),
                        x[[1, 0, 1]], x[:, :, [-1, 0, 3, 3]], x[..., [2, 0]], x[:, self.idx], x[None, :, [1, 2], 1:5:2],
                        x.masked_fill(self.mask, 2.0), torch.where(self.mask & m, x, 0.0),
                        torch.einsum("bchw->hwcb", x),
                        x.triu(1), torch.triu(x, -1), x.tril(), torch.tril(m, 2).float(),
                        x.masked_fill(x.new_ones(6, 6).triu(1) > 0, float("-inf")),
                        torch.gather(x, 3, x.argsort(-1)), x.gather(2, x[:, :, :3, :2].argmax(2, keepdim=True)),
                        torch.index_select(x, 1, self.idx.abs()), x.index_select(-1, self.idx[:2]),
                        torch.sort(x, -1)[0], x.sort(2, descending=True).indices.float(), (x * 2).round().sort(-1)[1].float(),
                        torch.sort((x * 2).round(), 1, descending=True).indices.float(), x.argsort(-1).float(),
                        torch.argsort(torch.where(x > 1, x * float("nan"), x), 1, descending=True).float(),
                        x.topk(3, -1).values, x.topk(3, -1)[1].float(), torch.topk(x, 2, 1, largest=False).indices.float(),
                        torch.topk((x * 2).round(), 4, -1)[0], torch.cumprod(x, 1), (x * 0.5 + 1).cumprod(-1),
                        (x > 0).any(-1, keepdim=True).float(), (x > 2).any().float(), torch.all(x > -1, 1).float(),
                        (x > -3).all().float(),
                        x[m], x[x[:, :, 0, 0] > 0], x[:, 0][self.mask.expand(2, 6, 6)], torch.masked_select(x, x > 0.5),
                        x.masked_select(self.mask), torch.nonzero(m).float(), m.nonzero(as_tuple=True)[2].float(),
                        torch.where(x > 1)[3].float(), x[..., torch.where(x[0, 0, 0] > 0)[0]])

        class Close(nn.Module):
            def __init__(self):
                super().__init__()
                self.selu, self.celu, self.ts = nn.SELU(), nn.CELU(0.7), nn.Tanhshrink()
                self.ls, self.glu, self.smin, self.sm2 = nn.LogSigmoid(), nn.GLU(1), nn.Softmin(1), nn.Softmax2d()
                self.lpp, self.lrn = nn.LPPool2d(2, (2, 3), 2), nn.LocalResponseNorm(3, 0.01, 0.5, 2.0)

            def forward(self, x):                     # [2, 4, 6, 6]
                f = x.flatten(2)
                return (torch.erf(x), torch.sin(x), torch.cos(x), torch.log1p(x.abs()), torch.expm1(x), torch.log2(x.abs() + 1),
                        torch.log10(x.abs() + 1), torch.exp2(x), self.selu(x), F.selu(x), self.celu(x), F.celu(x, 2.0),
                        self.ts(x), self.ls(x), F.logsigmoid(x * 30), self.glu(x), F.glu(x, -1), self.smin(x),
                        F.softmin(x, dim=-1), self.sm2(x), torch.special.expit(x), x.prod(1), torch.prod(x, -1, keepdim=True),
                        x.norm(dim=1), torch.norm(x), x.norm(1, (2, 3)), x.norm(float("inf"), -1, True),
                        torch.linalg.norm(x, dim=(2, 3)), torch.linalg.norm(x, float("inf"), dim=1),
                        torch.linalg.vector_norm(x, 2, dim=(1, 2)), F.normalize(x), F.normalize(f, dim=-1, p=1.0),
                        torch.addmm(x[0, 0, 0], x[0, 1], x[1, 0], beta=0.5, alpha=2.0), torch.addmm(x[0, 0], x[0, 1], x[1, 0]),
                        torch.baddbmm(x[0], x[0], x[1]), x[0].baddbmm(x[0], x[1], alpha=0.5), x[0].bmm(x[1]),
                        torch.einsum("bchw,bcwk->bchk", x, x), torch.einsum("ij,jk", x[0, 0], x[0, 1]),
                        torch.einsum("bcii->bc", x), torch.einsum("i,j->ij", x[0, 0, 0], x[0, 0, 1]),
                        torch.einsum("ab,bc,cd->ad", [x[0, 0], x[0, 1], x[0, 2]]), torch.einsum("bchw->", x[:1, :1, :1]),
                        torch.einsum("bhqd,bhkd->bhqk", x, x), torch.einsum("bhqk,bhkd->bhqd", x, x),
                        torch.einsum("ij,jk->ki", x[0, 0], x[1, 1]), torch.einsum("ibj,jbk->bik", x[0], x[1].transpose(0, 2)),
                        torch.einsum("bchw,c->bhw", x, x[0, :, 0, 0]), torch.einsum("bchw,bchw->b", x, x),
                        x @ x[0, 0, 0], x[0, 0, 0] @ x, x[0, 0, 0] @ x[0, 0, 1], x[:, :1] @ x[:1, :],
                        torch.matmul(x, x[0, 0]), torch.matmul(x[0], x),
                        self.lpp(x), F.lp_pool1d(f.abs(), 3, 4), F.lp_pool2d(x.abs(), 1.5, kernel_size=3, stride=2, ceil_mode=True),
                        self.lrn(x), F.local_response_norm(f, 2), F.local_response_norm(x.unsqueeze(2), 4),
                        2 ** x, torch.pow(x.abs() + 0.5, x), x.abs() ** x[:, :1], torch.pow(3.0, x))

        x = torch.randn(2, 4, 6, 6)
        x[0, 0, 0, :3] = torch.tensor([0.5, 1.5, -2.5]) / 3  # halves: round to even
        self.check_ops(Exact(), Close(), x)

    def test_run_more_tensor_ops(self):
        """more ops of models outside torchvision, against eager: the inverse and hyperbolic trig
        functions, atan2, hypot, logaddexp, xlogy, logsumexp, var_mean / std_mean, lerp, addcmul,
        addcdiv, cosine similarity and distances (cdist directly, and by matrix products over 25
        rows as PyTorch computes it), grid_sample (bilinear and nearest; zeros, border and
        reflection padding) to 1e-5 relative; bit for bit the ops that move, select, count
        or compare elements or round once: isnan / isinf / isfinite, nan_to_num, frac, fmod,
        remainder and %, floor_divide and //, div's rounding modes, heaviside, clamp between tensors,
        median, kthvalue, cummax / cummin, count_nonzero, t, T, mT, numel, diagonal, rot90, outer,
        diff, take_along_dim, scatter / scatter_add, one_hot, channel_shuffle, unfold, argwhere,
        bucketize, broadcast_to, mm, fill_ / zero_, threshold (mv, dot, erfc, lgamma, sinc and logit
        to 1e-5)"""
        torch.manual_seed(0)

        class Exact(nn.Module):
            def __init__(self):
                super().__init__()
                self.unf, self.cs = nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), nn.ChannelShuffle(2)
                self.register_buffer("bounds", torch.tensor([-1.0, 0.0, 0.5, 2.0]))

            def forward(self, x):                     # [2, 4, 6, 6]
                inf = x / (x > 0).float()            # -inf, nan (0 / 0) and finite values
                m, f = x[0, 0], x.flatten(2)
                return (torch.isnan(inf).float(), torch.isinf(inf).float(), torch.isfinite(inf).float(),
                        torch.isposinf(inf).float(), torch.isneginf(inf).float(), torch.nan_to_num(inf),
                        torch.nan_to_num(inf, 1.0, 2.0, -3.0), torch.frac(x * 3), torch.fmod(x, 0.7), x.fmod(-x.flip(3) - 3),
                        torch.remainder(x, -0.7), x % 0.3, torch.floor_divide(x, 0.3), x // -0.4, torch.sgn(x),
                        torch.heaviside(x, x * 0.5), torch.clamp(x, min=x.flip(3)), x.clamp(max=x * 0.5),
                        torch.median(x, -1).values, torch.median(x, 1)[1].float(), torch.median(x), x.median(2, True)[0],
                        torch.kthvalue(x, 2, -1)[0], x.kthvalue(3, 1).indices.float(), torch.cummax(x, -1)[0],
                        torch.cummax(x, 1)[1].float(), torch.cummin((x * 2).round(), 3).indices.float(), x.cummin(2).values,
                        torch.count_nonzero(x > 0, -1).float(), (x > 0.5).count_nonzero((1, 2)).float(), m.t(), torch.t(m[0]),
                        x * x.numel(), torch.diagonal(x, 0, 2, 3), x.diagonal(-2, 3, 2), torch.rot90(x, 1, [2, 3]),
                        x.rot90(2, [1, 3]), torch.rot90(x, -1, [3, 2]), torch.outer(m[0], m[1]), torch.diff(x),
                        torch.diff(x, 2, 1, prepend=x[:, :2], append=x[:, :1]), torch.diff(x > 0, dim=2).float(),
                        torch.take_along_dim(x, x.argsort(-1), -1), torch.take_along_dim(x, x[:1, ..., :1].argsort(2)[:, :, :3], 2),
                        torch.take_along_dim(x, f.flatten().argsort()[:7]),
                        torch.zeros_like(x).scatter(1, x.argsort(1)[:, :2], x), x.scatter(3, x.argsort(3)[..., :2], 7.0),
                        torch.ones_like(x).scatter(-1, x.argsort(-1)[..., :3], x, reduce="multiply"),
                        torch.zeros(2, 4, 6, 3).scatter_add(3, x.argsort(-1)[..., :4] % 3, x[..., :4]),
                        F.one_hot(x.argmax(1)).float(), F.one_hot(x[:, 0].argmax(-1), 9).float(), F.channel_shuffle(x, 2),
                        self.cs(x), F.unfold(x, 3), self.unf(x), F.unfold(x[0], (2, 2), stride=2), torch.argwhere(x > 1).float(),
                        torch.bucketize(x, self.bounds).float(), torch.bucketize(x.round(), self.bounds, right=True).float(),
                        torch.div(x, 0.3, rounding_mode="floor"), x.div(-x.flip(3) - 2, rounding_mode="trunc"),
                        torch.true_divide(x, 4.0), torch.rsub(x, 1.0, alpha=2), torch.mm(m, m.t()), torch.broadcast_to(x[:1], (2, 4, 6, 6)),
                        x.split_with_sizes([2, 4], -1)[1], m.T, x.mT, torch.signbit(x).float(), F.threshold(x, 0.1, 20.0),
                        F.alpha_dropout(x, 0.3), (x * 1).fill_(2.5), (x * 1).zero_(), torch.clamp_min(x, x.flip(3)),
                        x.clamp_max(x * 0.5), F.hardtanh_(x * 2))

        class Close(nn.Module):
            def __init__(self):
                super().__init__()
                self.cos, self.pd = nn.CosineSimilarity(2, 1e-3), nn.PairwiseDistance(1.5, keepdim=True)

            def forward(self, x):                     # [2, 4, 6, 6]
                t = torch.tanh(x)
                return (torch.tan(x), torch.atan(x), torch.asin(t), torch.acos(t), torch.sinh(x), torch.cosh(x),
                        torch.asinh(x), torch.acosh(x.abs() + 1), torch.atanh(t * 0.9), torch.arctan(x), torch.atan2(x, x.flip(3)),
                        torch.hypot(x, x.flip(2)), torch.logaddexp(x, x * 2), torch.xlogy(x.abs(), x.abs() + 1),
                        torch.logsumexp(x, -1), x.logsumexp((0, 2), keepdim=True), torch.var_mean(x, -1)[0],
                        torch.var_mean(x, (1, 3), unbiased=False)[1], torch.std_mean(x, 1, keepdim=True)[0],
                        torch.lerp(x, x * 2, 0.3), torch.lerp(x, x.flip(3), torch.sigmoid(x) * 1.2 - 0.1),
                        torch.addcmul(x, x, x.flip(2), value=0.5), x.addcdiv(x, x.abs() + 1, value=-2),
                        F.cosine_similarity(x, x.flip(3)), F.cosine_similarity(x[:1], x, dim=-1), self.cos(x, x * 1e-4),
                        F.pairwise_distance(x, x.flip(1)), F.pairwise_distance(x, x.flip(1), p=1), self.pd(x, x.flip(2)),
                        F.pairwise_distance(x, x.flip(1), p=float("inf")), torch.cdist(x, x.flip(2)),
                        torch.cdist(x, x[:1] * 2, p=1), torch.cdist(x[0, 0], x[1, 1], p=float("inf")),
                        torch.cdist(x.reshape(2, 72, 2), x.reshape(2, 72, 2).flip(1)),
                        torch.cdist(x.reshape(2, 72, 2), x.reshape(2, 72, 2).flip(1), compute_mode="donot_use_mm_for_euclid_dist"),
                        F.grid_sample(x, t[:, :2].reshape(2, 6, 6, 2) * 1.3, align_corners=False),
                        F.grid_sample(x, t[:, :2].reshape(2, 6, 6, 2) * 1.3, padding_mode="border", align_corners=True),
                        F.grid_sample(x, t[:, 1:].reshape(2, 9, 6, 2) * 1.6, padding_mode="reflection", align_corners=False),
                        F.grid_sample(x, t[:, 1:].reshape(2, 9, 6, 2) * 1.6, padding_mode="reflection", align_corners=True),
                        F.grid_sample(x, x[:, :2].reshape(2, 6, 6, 2), mode="nearest", align_corners=False),
                        torch.mv(x[0, 0], x[1, 1, 0]), torch.dot(x[0, 0, 0], x[1, 1, 1]), torch.erfc(x), torch.lgamma(x.abs() + 0.5),
                        torch.sinc(x), torch.logit(torch.sigmoid(x)), torch.logit(torch.sigmoid(x * 3), eps=0.01))

        self.check_ops(Exact(), Close(), torch.randn(2, 4, 6, 6))

    def test_run_in_place_ops_change_their_input(self):
        """ops that change their first argument in place (methods with one trailing underscore,
        torch.relu_, F.relu(inplace=True), modules with inplace=True) change it for the nodes that
        read it later, as PyTorch's do (FX records the call, and the later readers keep referring
        to the argument): chains of them (y = x.sigmoid_(); y.sub_(1) changes x) included, where
        the last one is the argument's last use too; bit for bit. Before, the interpreter computed
        them out of place and the later readers saw the old values."""
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.r, self.h = nn.ReLU(inplace=True), nn.Hardtanh(-0.5, 0.5, inplace=True)

            def forward(self, x):
                y = x * 2
                y.add_(1)
                z = torch.relu(x)
                z.mul_(3).clamp_(-1, 2)
                w = x + 0
                v = self.r(w)
                u = x - 1
                F.relu(u, inplace=True)
                t = x * 0.5
                t2 = t.sigmoid_()
                t2.sub_(0.25)
                q = x + 3
                self.h(q)
                p = x * 4
                p.tanh_().mul_(2)
                m = x.clone()
                m.masked_fill_(x > 0.5, 0.0).div_(2).abs_()
                return y, z, w, v, u, t, t2, q, p, m

        torch.manual_seed(0)
        with torch.no_grad():
            self.check_run_multi(M().eval(), torch.randn(2, 6), "in_place", tol=1e-7)

        class Refused(nn.Module):  # what the interpreter cannot follow: it says so
            def __init__(self, how):
                super().__init__()
                self.how = how
                self.register_buffer("count", torch.zeros(6))

            def forward(self, x):
                if self.how == "buffer":  # PyTorch keeps the change for the next batch
                    self.count.add_(x[0])
                    return x + self.count
                if self.how == "chain":   # a view of a view of x: x changes too
                    x.view(-1)[1:3].mul_(2)
                    return x + 1
                v = x.view(-1)            # PyTorch changes x with v
                v.mul_(2)
                return x + 1

        x = torch.randn(2, 6)
        st.write(self.path("in.safetensors"), [("x", x)])
        for how, msg in (("buffer", "changes count in place, which PyTorch keeps for the next batch"),
                         ("view", "changes 'view', a view of 'x', in place, and 'x' is read later"),
                         ("chain", "changes 'getitem', a view of 'x', in place, and 'x' is read later")):
            src = self.path("refused_%s.bpcc" % how)
            bpcc_torch.export(Refused(how).eval(), (x,), src)
            r = subprocess.run([BPCC, "run", src, "--data", self.path("in.safetensors"), "-o", self.path("r.safetensors")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(msg, r.stderr)
            self.assertRegex(r.stderr, r"refused_%s\.bpcc:\d+:3: error: " % how)  # the node's line, column 3
            self.assertFalse(os.path.exists(self.path("r.safetensors")), "%s: an output file after the error" % how)

    def test_run_multihead_attention(self):
        """nn.MultiheadAttention (a leaf module quantize_fx leaves in float) as one op: self- and
        cross-attention, batch first or not, bool and float attn_mask (2-d and per head),
        key_padding_mask, need_weights off, weights per head, kdim / vdim other than embed_dim, no
        bias; outputs and attention weights to 1e-6"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self, mha, mode):
                super().__init__()
                self.mha, self.mode = mha, mode
                self.register_buffer("bmask", torch.rand(16, 16) > 0.7)
                self.register_buffer("fmask", torch.randn(16, 16))
                self.register_buffer("kpm", torch.tensor([[False] * 14 + [True] * 2, [False] * 16]))
                self.register_buffer("m3", torch.randn(2 * 4, 16, 16))

            def forward(self, x):                     # [2, 16, 8]
                t = x if self.mha.batch_first else x.transpose(0, 1)
                if self.mode == "self":
                    return self.mha(t, t, t)
                if self.mode == "bool":
                    return self.mha(t, t * 0.5, t + 1, attn_mask=self.bmask)
                if self.mode == "float":
                    return self.mha(t, t * 0.5, t + 1, attn_mask=self.fmask, average_attn_weights=False)
                if self.mode == "kpm":
                    return (self.mha(t, t * 0.5, t + 1, key_padding_mask=self.kpm, need_weights=False)[0],)
                if self.mode == "both":
                    return self.mha(t, t * 0.5, t + 1, key_padding_mask=self.kpm, attn_mask=self.m3)
                return self.mha(t, t[..., :6] * 2, t[..., :5])

        x = torch.randn(2, 16, 8)
        for name, mha, mode in (("self_bf", nn.MultiheadAttention(8, 4, batch_first=True), "self"),
                                ("self_sf", nn.MultiheadAttention(8, 4), "self"),
                                ("bool", nn.MultiheadAttention(8, 4, batch_first=True), "bool"),
                                ("float", nn.MultiheadAttention(8, 4), "float"),
                                ("kpm", nn.MultiheadAttention(8, 4, batch_first=True, bias=False), "kpm"),
                                ("both", nn.MultiheadAttention(8, 4, batch_first=True), "both"),
                                ("kdim", nn.MultiheadAttention(8, 2, kdim=6, vdim=5, batch_first=True), "kdim")):
            self.check_run_multi(M(mha, mode).eval(), x, "mha_" + name, tol=1e-6)

    def test_run_transformer_encoder(self):
        """nn.TransformerEncoderLayer and nn.TransformerEncoder (leaf modules for quantize_fx) as
        ops: post- and pre-norm, relu and gelu, batch first or not, an attention mask, a key padding
        mask, a final norm; with a padding mask the encoder's padded positions are zeros, as PyTorch
        1.13's nested-tensor path leaves them when gradients are off (as calibration runs them:
        PyTorch's own tutorial calibrates under no_grad; with gradients on it takes its slow path,
        which computes them); to 1e-6"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self, enc, mode=""):
                super().__init__()
                self.enc, self.mode = enc, mode
                self.register_buffer("kpm", torch.tensor([[False] * 14 + [True] * 2, [False] * 16]))
                self.register_buffer("mask", torch.triu(torch.full((16, 16), float("-inf")), 1))

            def forward(self, x):                     # [2, 16, 8]
                if self.mode == "kpm":
                    return (self.enc(x, src_key_padding_mask=self.kpm),)
                return (self.enc(x, self.mask) if self.mode == "mask" else self.enc(x),)

        layer = lambda **kw: nn.TransformerEncoderLayer(8, 2, 32, **kw)
        x = torch.randn(2, 16, 8)
        for name, enc, mode in (("layer", layer(batch_first=True), ""),
                                ("layer_gelu_prenorm", layer(activation="gelu", norm_first=True, batch_first=True), ""),
                                ("layer_seq_first", layer(), ""), ("layer_mask", layer(batch_first=True), "mask"),
                                ("layer_kpm", layer(batch_first=True), "kpm"),
                                ("encoder_norm", nn.TransformerEncoder(layer(batch_first=True), 3, norm=nn.LayerNorm(8)), ""),
                                ("encoder_kpm", nn.TransformerEncoder(layer(batch_first=True), 2), "kpm"),
                                ("encoder_mask", nn.TransformerEncoder(layer(batch_first=True), 2), "mask")):
            with torch.no_grad():
                self.check_run_multi(M(enc, mode).eval(), x, "transformer_" + name, tol=1e-6)

    def test_run_transformer_decoder(self):
        """nn.TransformerDecoderLayer, nn.TransformerDecoder and nn.Transformer (leaf modules for
        quantize_fx) as ops: post- and pre-norm, relu and gelu, batch first or not, a causal target
        mask, a memory mask, target and memory key padding masks, a final norm; the whole
        Transformer with source masks too (its encoder takes the nested-tensor path under no_grad, as
        test_run_transformer_encoder checks); to 1e-6"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self, dec, mode=""):
                super().__init__()
                self.dec, self.mode = dec, mode
                self.register_buffer("causal", torch.triu(torch.full((12, 12), float("-inf")), 1))
                self.register_buffer("mmask", torch.rand(12, 16) > 0.8)
                self.register_buffer("tkpm", torch.tensor([[False] * 10 + [True] * 2, [False] * 12]))
                self.register_buffer("mkpm", torch.tensor([[False] * 13 + [True] * 3, [False] * 16]))

            def forward(self, x):                     # [2, 16, 8]
                tgt, mem = x[:, :12] * 0.5, x
                if self.mode == "whole":
                    return (self.dec(x, tgt, src_key_padding_mask=self.mkpm, tgt_mask=self.causal,
                                     tgt_key_padding_mask=self.tkpm, memory_key_padding_mask=self.mkpm),)
                if self.mode == "seq_first":
                    return (self.dec(tgt.transpose(0, 1), mem.transpose(0, 1), self.causal),)
                if self.mode == "masks":
                    return (self.dec(tgt, mem, tgt_mask=self.causal, memory_mask=self.mmask, tgt_key_padding_mask=self.tkpm,
                                     memory_key_padding_mask=self.mkpm),)
                return (self.dec(tgt, mem),)

        layer = lambda **kw: nn.TransformerDecoderLayer(8, 2, 32, **kw)
        x = torch.randn(2, 16, 8)
        for name, dec, mode in (("layer", layer(batch_first=True), ""),
                                ("layer_gelu_prenorm", layer(activation="gelu", norm_first=True, batch_first=True), "masks"),
                                ("layer_seq_first", layer(), "seq_first"), ("layer_masks", layer(batch_first=True), "masks"),
                                ("decoder_norm", nn.TransformerDecoder(layer(batch_first=True), 3, norm=nn.LayerNorm(8)), "masks"),
                                ("transformer", nn.Transformer(8, 2, 2, 2, 32, batch_first=True), "whole")):
            with torch.no_grad():
                self.check_run_multi(M(dec, mode).eval(), x, "transformer_" + name, tol=1e-6)

    def test_run_recurrent_layers(self):
        """nn.LSTM and nn.GRU (leaf modules quantize_fx leaves in float) as ops: batch first or not,
        stacked, bidirectional, without bias, from a given initial state; the output sequence and
        the final states to 1e-6"""
        torch.manual_seed(0)

        class M(nn.Module):
            def __init__(self, rnn, with_state):
                super().__init__()
                self.rnn, self.with_state = rnn, with_state
                layers = rnn.num_layers * (2 if rnn.bidirectional else 1)
                self.register_buffer("h0", torch.randn(layers, 3, rnn.hidden_size))
                self.register_buffer("c0", torch.randn(layers, 3, rnn.hidden_size))

            def forward(self, x):                     # [3, 7, 5]
                t = x if self.rnn.batch_first else x.transpose(0, 1)
                lstm = isinstance(self.rnn, nn.LSTM)
                r = self.rnn(t, ((self.h0, self.c0) if lstm else self.h0) if self.with_state else None)
                return (r[0], r[1][0], r[1][1]) if lstm else (r[0], r[1])

        x = torch.randn(3, 7, 5)
        for name, rnn, with_state in (("lstm", nn.LSTM(5, 6, batch_first=True), False),
                                      ("lstm_2_bidirectional", nn.LSTM(5, 6, 2, bidirectional=True), True),
                                      ("lstm_no_bias", nn.LSTM(5, 4, bias=False, batch_first=True), True),
                                      ("gru", nn.GRU(5, 6, batch_first=True), False),
                                      ("gru_3_bidirectional", nn.GRU(5, 4, 3, bidirectional=True, batch_first=True), True)):
            with torch.no_grad():
                self.check_run_multi(M(rnn, with_state).eval(), x, name, tol=1e-6)

    def test_run_swin_transformer_functions(self):
        """the functions torchvision's Swin Transformers wrap for tracing (shifted_window_attention,
        _get_relative_position_bias, _patch_merging_pad) run as ops: V1 and V2 (cosine attention
        with a logit scale, the keys' bias zeroed), feature maps padded to whole windows, odd sizes
        merged with padding, a last stage no bigger than its window (no shift there), two images;
        to 1e-5. Dropout inside the attention is refused: the function drops at random in eval
        mode too"""
        from torchvision.models import swin_transformer as sw
        for v2 in (False, True):
            torch.manual_seed(0)
            kw = dict(block=sw.SwinTransformerBlockV2, downsample_layer=sw.PatchMergingV2) if v2 else {}
            model = sw.SwinTransformer([4, 4], 24, [2, 2], [2, 4], [4, 4], stochastic_depth_prob=0.0,
                                       num_classes=10, **kw).eval()
            for p in model.parameters():  # the logit scales and biases away from their initial values
                p.data += 0.1 * torch.randn_like(p)
            for size in (36, 52, 12):  # 9x9 patches (padded to 12, merged to 5x5), 13x13, 3x3 (no shift)
                with torch.no_grad():
                    self.check_run(model, torch.randn(2, 3, size, size), "swin%s_%d" % ("v2" if v2 else "", size))
        model = sw.SwinTransformer([4, 4], 24, [2], [2], [4, 4], attention_dropout=0.1).eval()
        src = self.path("swin_dropout.bpcc")
        x = torch.randn(1, 3, 32, 32)
        bpcc_torch.export(model, (x,), src)
        st.write(self.path("in.safetensors"), [("x", x)])
        r = subprocess.run([BPCC, "run", src, "--data", self.path("in.safetensors"), "-o", self.path("dropped.safetensors")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("dropout with p > 0 drops at random here", r.stderr)
        self.assertFalse(os.path.exists(self.path("dropped.safetensors")))

    def test_run_mvit_functions(self):
        """the functions torchvision's MViT wraps for tracing (_unsqueeze, _squeeze, _add_rel_pos,
        _add_shortcut) run as ops, and tensor_split: small MViT v1 and v2 models
        (conftools.small_mvit) at sizes whose pooled tokens are odd, so that the relative position
        tables are interpolated to other lengths (9 and 11 tokens pool to 5 and 6, where the
        tables were sized for 4 and 5), two clips, and the class token in the residual; to 1e-5.
        _add_shortcut's result nothing reads: it changes the attention's output, which the next
        node reads"""
        for v2, cls, shape in ((False, False, (2, 3, 8, 32, 32)), (True, False, (2, 3, 8, 32, 32)),
                               (True, True, (1, 3, 8, 32, 32)), (True, False, (1, 3, 6, 40, 56)),
                               (True, True, (1, 3, 10, 36, 44)), (True, False, (2, 3, 4, 20, 28))):
            model = conftools.small_mvit(v2, cls, spatial=shape[3:], frames=shape[2])
            torch.manual_seed(1)
            with torch.no_grad():
                self.check_run(model, torch.randn(*shape), "mvit%d%d_%s" % (v2, cls, "x".join(map(str, shape))))

        class Split(nn.Module):
            def forward(self, x):                       # [2, 4, 7]
                a, b = torch.tensor_split(x, 3, -1), x.tensor_split([1, -2, 0, 9], 1)
                c, d = torch.tensor_split(x, (1,), dim=0), torch.tensor_split(x, torch.tensor(2))
                e = x.tensor_split(torch.tensor([3, 5]), 2)
                return (a[0], a[1], a[2], b[0], b[1], b[2], b[3], b[4], c[0], c[1], d[0], d[1], e[0], e[1], e[2])
        class Rows(nn.Module):
            def forward(self, x):
                a = x.tensor_split(2, 0)
                return (a[0] * 2 + a[1],)
        self.check_ops(Split(), Rows(), torch.randn(2, 4, 7))

    def test_run_stacks_index_updates_and_more_ops(self):
        """ops a sweep of one-op models found the interpreter refusing: hstack, vstack, row_stack,
        dstack, column_stack, block_diag, kron, index_add / index_copy / index_fill (and their
        in-place forms), masked_scatter, aminmax, isclose, cross and linalg.cross bit for bit
        (cross rounds as ATen's build does, its first product fused into the subtraction: plainly
        computed, 74 % of 300,000 values differed in the last bit); nansum, nanmean, logcumsumexp,
        trapezoid, erfinv, F.instance_norm (input statistics, and running ones without them) and
        tensordot (through einsum) to 1e-5"""
        class Exact(nn.Module):
            def forward(self, x):                       # [2, 3, 4, 3]
                m, v = x[0, 0], x[0, 0, 0]
                i = torch.tensor([2, 0, 2])
                return (torch.hstack([m, m * 2]), torch.hstack([v, v]), torch.vstack([v, v * 3]), torch.row_stack([m, v]),
                        torch.dstack([m, m]), torch.dstack([v, v]), torch.column_stack([m[:, 0], m, x[0, 0, 0, 0].expand(4)]), torch.block_diag(m, v, x[0, 0, 0, 0]),
                        torch.kron(m, x[1, 1]), torch.kron(v, m), x.kron(v),
                        x.index_add(2, i, x[:, :, :3], alpha=2.0), torch.index_copy(x, 1, torch.tensor([2, 0]), x[:, :2]),
                        x.index_fill(3, torch.tensor([0, 2]), -1.5), (x * 1).index_add_(0, torch.tensor([1]), x[:1]),
                        x.masked_scatter(x > 0, x.flip(3) * 10), torch.masked_scatter(x, (x > 0)[0, 0], -x),
                        torch.aminmax(x)[0], torch.aminmax(x, dim=1)[1], x.aminmax(dim=-1, keepdim=True).min,
                        torch.isclose(x, x + 1e-6).float(), torch.isclose(x, x.round(), 0.1, 0.05).float(),
                        torch.isclose(x.log(), x.log(), equal_nan=True).float(), torch.cross(x, x.flip(0)),
                        torch.cross(x, x.flip(1), dim=3), torch.linalg.cross(x, x.flip(2)))

        class Close(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("mean", torch.randn(3))
                self.register_buffer("var", torch.rand(3) + 0.5)

            def forward(self, x):                       # [2, 3, 4, 3]
                n = x.log()                              # NaNs where x < 0
                return (torch.nansum(n), n.nansum((1, 3)), torch.nanmean(n, 2, keepdim=True), n.nanmean(),
                        torch.logcumsumexp(x, 2), x.logcumsumexp(-1), torch.trapezoid(x), torch.trapezoid(x, dx=0.5, dim=1),
                        torch.trapz(x, x.cumsum(3)), torch.trapezoid(x, torch.tensor([0.0, 1.0, 3.0]), dim=3),
                        torch.erfinv(torch.tanh(x)), torch.special.erfinv(torch.tanh(x) * 0.999),
                        F.instance_norm(x), F.instance_norm(x, weight=self.var, bias=self.mean, eps=1e-3),
                        F.instance_norm(x, self.mean, self.var, use_input_stats=False),
                        torch.tensordot(x, x, dims=([1, 3], [1, 3])), torch.tensordot(x[0, 0], x[0, 0].t(), 1),
                        torch.tensordot(x, x[0, 0], 2))
        torch.manual_seed(2)
        self.check_ops(Exact(), Close(), torch.randn(2, 3, 4, 3))

    def test_run_reference_quantized_models(self):
        """convert_to_reference_fx models: quantize_per_tensor / dequantize and the reference
        quantized modules (weights quantized and dequantized per channel); within two quantization
        steps of torch's output (a rounding flip upstream moves a value by one step)"""
        torch.manual_seed(0)
        for name, model, shape in (("head", Head().eval(), (2, 3, 8, 8)),
                                   ("resnet18", torchvision_model("resnet18", 0), (2, 3, 64, 64))):
            x = torch.randn(*shape)
            p = prepare_fx(copy.deepcopy(model), get_default_qconfig_mapping("fbgemm"), (x,))
            for _ in range(2):
                p(torch.randn(*shape))
            r = convert_to_reference_fx(p)
            src = self.path(name + "_ref.bpcc")
            bpcc_torch.export(r, (x,), src)
            st.write(self.path("in.safetensors"), [("x", x)])
            self.bpcc("run", src, "--data", self.path("in.safetensors"), "-o", self.path("out.safetensors"))
            got = st.read(self.path("out.safetensors"))["output"]
            want = r(x).detach()
            step = [m for n, m in r.named_buffers() if n.endswith("_scale_0") or "scale" in n]
            out_scale = max(float(b.max()) for b in step) if step else 1.0
            self.assertLessEqual((got - want).abs().max().item(), 2 * out_scale + 1e-6, name)
            self.assertGreater((got == want).float().mean().item(), 0.5, "%s: most outputs should be equal" % name)

    def test_bad_data_is_refused_before_anything_runs(self):
        model = Head().eval()
        x = torch.randn(2, 3, 8, 8)
        src = self.path("h.bpcc")
        bpcc_torch.export(model, (x,), src)
        st.write(self.path("ok.safetensors"), [("x", x)])
        st.write(self.path("shape.safetensors"), [("x", torch.randn(2, 4, 8, 8))])
        st.write(self.path("name.safetensors"), [("y", x)])
        st.write(self.path("dtype.safetensors"), [("x", x.double())])
        for bad, words in (("shape", "traced as [2, 3, 8, 8]"), ("name", "no tensor 'x'"), ("dtype", "float64")):
            r = subprocess.run([BPCC, "calibrate", src, "--data", self.path("ok.safetensors"), self.path(bad + ".safetensors"),
                                "-o", self.path("out.bpcc")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 1, bad)
            self.assertIn(words, r.stderr, bad)
            self.assertFalse(os.path.exists(self.path("out.bpcc")), bad)


def make_run_test(name):
    def test(self):
        torch.manual_seed(0)
        self.check_run(torchvision_model(name, 0), torch.randn(2, 3, 64, 64), name)
    return test


def make_calibrate_minmax_test(name):
    # the models whose 3x3 convolutions take Winograd from the second batch on (16 channels and 40
    # output tiles at 64 x 64): MinMax qparams within 1e-5 of eager's after three batches
    def test(self):
        self.check_calibrate(torchvision_model(name, 0), (2, 3, 64, 64), name, "minmax")
    return test


def make_calibrate_test(name):
    def test(self):
        model = torchvision_model(name, 0)
        for mname in ("minmax", "moving", "fbgemm"):
            self.check_calibrate(model, (2, 3, 64, 64), name, mname)
    return test


for _n in ("resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "densenet121",
           "squeezenet1_1", "mnasnet0_5"):
    setattr(Calibrate, "test_run_" + _n, make_run_test(_n))
for _n in ("resnet18", "mobilenet_v2", "mobilenet_v3_large", "efficientnet_b0", "squeezenet1_1", "mnasnet0_5"):
    setattr(Calibrate, "test_calibrate_" + _n, make_calibrate_test(_n))
for _n in ("resnet50", "densenet121"):
    setattr(Calibrate, "test_calibrate_minmax_" + _n, make_calibrate_minmax_test(_n))


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(Calibrate)
