#!/usr/bin/env python3
"""Regenerate patterns/*.yaml, bpcc's built-in backend configs, from the installed PyTorch.

- native, fbgemm, qnnpack, tensorrt, x86: PyTorch 1.13's own get_<name>_backend_config(),
  dumped pattern for pattern (the conformance suite checks the equality).
- onednn: PyTorch 2.x's onednn.py (1.13 has none): 1.13's pattern builders called with
  onednn's dtype configs, plus the conv+add(+relu) and linear+leaky_relu/tanh fusions 2.x adds
  (their fused modules, torch.ao.nn.intrinsic.ConvAdd2d & co., are 2.x names).
- executorch: PyTorch 2.0's executorch.py (1.13's get_executorch_backend_config() never returns:
  _get_share_qparams_ops_configs appends to the list it iterates).

usage: /usr/bin/python3 tools/python/make_builtin_configs.py [OUTDIR]   (default: patterns/)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch.ao.quantization.backend_config import BackendConfig, DTypeConfig  # noqa: E402
from torch.ao.quantization.backend_config import _common_operator_config_utils as common  # noqa: E402

from bpcc_torch import backend_config as bc  # noqa: E402

DIFF = "OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT"
SHARE = "OUTPUT_SHARE_OBSERVER_WITH_INPUT"


def dc(i=None, o=None, w=None, b=None, dyn=False):
    d = {}
    for k, v in (("input_dtype", i), ("output_dtype", o), ("weight_dtype", w)):
        if v is not None:
            d[k] = v if isinstance(v, dict) else {"dtype": v}
    if b is not None:
        d["bias_dtype"] = {"dtype": b}
    d["is_dynamic"] = dyn
    return d


def write(out, name, header, d):
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        f.write(bc.to_yaml(d, header))


def onednn():
    weighted = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8,
                           weight_dtype=torch.qint8, bias_dtype=torch.float)
    op = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
    dyn = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.float, weight_dtype=torch.qint8,
                      bias_dtype=torch.float, is_dynamic=True)
    wonly = DTypeConfig(input_dtype=torch.float, output_dtype=torch.float, weight_dtype=torch.qint8)
    io_only = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8,
                          weight_dtype=torch.float, bias_dtype=torch.float)
    w = [bc.dtype_config_dict(weighted)]
    lin = [bc.dtype_config_dict(weighted), bc.dtype_config_dict(dyn)]

    def part(configs):
        return bc.to_dict(BackendConfig().set_backend_pattern_configs(configs))["configs"]

    conv = part(common._get_conv_configs([weighted]))
    # PyTorch 2.x's order: without and then with relu; left, then right; with bn first;
    # torch.add before operator.add
    for relu in (False, True):
        for side in ("left", "right"):
            for bn in (True, False):
                for add in ("torch.add", "operator.add"):
                    convp = ["torch.nn.BatchNorm2d", "torch.nn.Conv2d"] if bn else "torch.nn.Conv2d"
                    addp = [add, convp, "MatchAllNode"] if side == "left" else [add, "MatchAllNode", convp]
                    stem = "conv_%sadd%s" % ("bn_" if bn else "", "_relu" if relu else "")
                    conv.append({
                        "pattern_complex_format": ["torch.nn.ReLU", addp] if relu else addp,
                        "observation_type": DIFF, "dtype_configs": w,
                        "fused_module": "torch.ao.nn.intrinsic.ConvAddReLU2d" if relu else "torch.ao.nn.intrinsic.ConvAdd2d",
                        "fuser_method": "fuse_%s_%s" % (stem, side),
                        "root_node_getter": "%s_root_node_getter_%s" % (stem, side),
                        "extra_inputs_getter": "%s_extra_inputs_getter_%s" % (stem, side)})
        conv.append({"pattern": "torch.ao.nn.intrinsic.ConvAddReLU2d" if relu else "torch.ao.nn.intrinsic.ConvAdd2d",
                     "observation_type": DIFF, "dtype_configs": w, "root_module": "torch.nn.Conv2d",
                     "reference_quantized_module": "torch.ao.nn.quantized.reference.Conv2d"})
    linear = part(common._get_linear_configs([weighted, dyn]))

    def eltwise(post_module, post_op, fused):
        return [
            {"pattern": ["torch.nn.Linear", post_module], "observation_type": DIFF, "dtype_configs": lin,
             "fused_module": fused, "fuser_method": "sequential"},
            {"pattern": ["torch.nn.Linear", post_op], "observation_type": DIFF, "dtype_configs": lin,
             "fused_module": fused, "fuser_method": "sequential"},
            {"pattern": fused, "observation_type": DIFF, "dtype_configs": lin, "root_module": "torch.nn.Linear",
             "reference_quantized_module": "torch.ao.nn.quantized.reference.Linear"},
            {"pattern": ["torch.nn.functional.linear", post_module], "observation_type": DIFF, "dtype_configs": lin},
            {"pattern": ["torch.nn.functional.linear", post_op], "observation_type": DIFF, "dtype_configs": lin},
        ]
    linear += eltwise("torch.nn.LeakyReLU", "torch.nn.functional.leaky_relu", "torch.ao.nn.intrinsic.LinearLeakyReLU")
    linear.append({"pattern": ["torch.nn.Linear", "torch.nn.BatchNorm1d", "torch.nn.LeakyReLU"],
                   "observation_type": DIFF, "dtype_configs": lin,
                   "fused_module": "torch.ao.nn.intrinsic.LinearLeakyReLU",
                   "fuser_method": "fuse_linear_bn_leaky_relu"})
    linear += eltwise("torch.nn.Tanh", "torch.tanh", "torch.ao.nn.intrinsic.LinearTanh")
    rest = part(common._get_binary_op_configs([op]) + [common._get_cat_config([op])] +
                common._get_default_op_configs([op]) + common._get_fixed_qparams_op_configs([op]) +
                common._get_share_qparams_op_configs([op]) + common._get_bn_configs([op]) +
                common._get_ln_configs([io_only]) + common._get_rnn_op_configs([dyn]) +
                common._get_embedding_op_configs([wonly]))
    # set_backend_pattern_configs semantics: a later entry for a pattern replaces the earlier one
    # in place
    out, where = [], {}
    for c in conv + linear + rest:
        key = repr(c.get("pattern", c.get("pattern_complex_format")))
        if key in where:
            out[where[key]] = c
        else:
            where[key] = len(out)
            out.append(c)
    return {"name": "onednn", "configs": out}


def executorch():
    sym_w = dc({"dtype": "qint8", "scale_min_lower_bound": 2 ** -12},
               {"dtype": "qint8", "scale_min_lower_bound": 2 ** -12},
               {"dtype": "qint8", "quant_min_lower_bound": -127, "quant_max_upper_bound": 127,
                "scale_min_lower_bound": 2 ** -12}, "float32")
    sym_op = dc({"dtype": "qint8", "scale_min_lower_bound": 2 ** -12},
                {"dtype": "qint8", "scale_min_lower_bound": 2 ** -12})
    w8 = dc("quint8", "quint8", "qint8", "float32")
    op8 = dc("quint8", "quint8")
    dyn8 = dc("quint8", "float32", "qint8", "float32", True)
    dyn16 = dc("float16", "float32", "float16", "float32", True)
    lin = [sym_w, w8, dyn8, dyn16]
    conv = [sym_w, w8]
    share = [sym_op, op8]
    c = [
        {"pattern": "torch.nn.Linear", "observation_type": DIFF, "dtype_configs": lin,
         "root_module": "torch.nn.Linear", "qat_module": "torch.ao.nn.qat.Linear",
         "reference_quantized_module": "torch.ao.nn.quantized.reference.Linear"},
        {"pattern": "torch.nn.functional.linear", "observation_type": DIFF, "dtype_configs": lin,
         "input_type_to_index": {"weight": 1, "bias": 2}},
        {"pattern": "torch.nn.Conv2d", "observation_type": DIFF, "dtype_configs": conv,
         "root_module": "torch.nn.Conv2d", "qat_module": "torch.ao.nn.qat.Conv2d",
         "reference_quantized_module": "torch.ao.nn.quantized.reference.Conv2d"},
        {"pattern": "torch.nn.functional.conv2d", "observation_type": DIFF, "dtype_configs": conv,
         "input_type_to_index": {"weight": 1, "bias": 2}},
        {"pattern": ["torch.nn.Conv2d", "torch.nn.ReLU"], "observation_type": DIFF, "dtype_configs": conv,
         "fused_module": "torch.ao.nn.intrinsic.ConvReLU2d", "fuser_method": "sequential"},
        {"pattern": ["torch.nn.Conv2d", "torch.nn.functional.relu"], "observation_type": DIFF,
         "dtype_configs": conv, "fused_module": "torch.ao.nn.intrinsic.ConvReLU2d", "fuser_method": "sequential"},
        {"pattern": "torch.ao.nn.intrinsic.ConvReLU2d", "observation_type": DIFF, "dtype_configs": conv,
         "root_module": "torch.nn.Conv2d", "qat_module": "torch.nn.intrinsic.qat.ConvReLU2d",
         "reference_quantized_module": "torch.ao.nn.quantized.reference.Conv2d"},
        {"pattern": ["torch.nn.functional.conv2d", "torch.nn.ReLU"], "observation_type": DIFF, "dtype_configs": conv},
        {"pattern": ["torch.nn.functional.conv2d", "torch.nn.functional.relu"], "observation_type": DIFF,
         "dtype_configs": conv},
    ]
    nt = {"0": DIFF, "1": SHARE, "2": DIFF}
    for op in ("operator.add", "torch.add"):
        c.append({"pattern": op, "observation_type": DIFF, "dtype_configs": [sym_op, w8],
                  "num_tensor_args_to_observation_type": nt})
    for op in ("torch.nn.functional.adaptive_avg_pool2d", "torch.nn.functional.relu",
               "torch.nn.functional.relu6", "torch.nn.AdaptiveAvgPool2d", "torch.squeeze", "permute",
               "reshape", "relu", "relu_", "squeeze", "squeeze_"):
        c.append({"pattern": op, "observation_type": SHARE, "dtype_configs": share})
    c.append({"pattern": "torch.nn.BatchNorm2d", "observation_type": DIFF, "dtype_configs": share})
    c.append({"pattern": "torch.cat", "observation_type": SHARE, "dtype_configs": share})
    return {"name": "executorch", "configs": c}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "patterns")
    for name in ("native", "fbgemm", "qnnpack", "tensorrt", "x86"):
        getter = bc.BUILTIN_GETTERS[name]
        write(out, name, ["Generated from PyTorch %s %s() by tools/python/make_builtin_configs.py:"
                          % (torch.__version__, getter.split(":")[1]),
                          "equal to it pattern for pattern (tests/conformance/test_configs.py)."],
              bc.to_dict(bc.get_backend_config(name)))
    write(out, "onednn", ["PyTorch 2.x's get_onednn_backend_config() (1.13 has no onednn config), made by",
                          "tools/python/make_builtin_configs.py from 1.13's pattern builders with onednn's",
                          "dtype configs plus 2.x's conv+add and linear+leaky_relu/tanh fusions."], onednn())
    write(out, "executorch", ["PyTorch 2.0's get_executorch_backend_config(), made by",
                              "tools/python/make_builtin_configs.py (1.13's never returns: it appends to the",
                              "list it iterates)."], executorch())


if __name__ == "__main__":
    main()
