"""PyTorch QConfigMapping -> bpcc qconfig YAML, and the effective observer settings PyTorch's
observers have once constructed (for the conformance suite):

    python3 -m bpcc_torch.qconfig fbgemm > patterns/qconfig/fbgemm.yaml
    python3 -m bpcc_torch.qconfig fbgemm_qat > patterns/qconfig/fbgemm_qat.yaml   # the QAT mapping
"""
import math
import sys

import torch
from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping

from ._names import class_name, function_name
from .backend_config import _yscalar, op_name

CLASS_ARGS = {  # constructor keywords bpcc writes, in PyTorch's order
    "MinMaxObserver": ["dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps"],
    "MovingAverageMinMaxObserver": ["averaging_constant", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps"],
    "PerChannelMinMaxObserver": ["ch_axis", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps"],
    "MovingAveragePerChannelMinMaxObserver": ["averaging_constant", "ch_axis", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps"],
    "HistogramObserver": ["bins", "upsample_rate", "dtype", "qscheme", "reduce_range", "quant_min", "quant_max", "eps"],
    "PlaceholderObserver": ["dtype", "custom_op_name", "compute_dtype"],
    "FixedQParamsObserver": ["scale", "zero_point", "dtype", "qscheme", "quant_min", "quant_max"],
    "NoopObserver": ["dtype", "custom_op_name"],
    "ReuseInputObserver": [],
}


def _value(v):
    if isinstance(v, torch.dtype):
        return str(v)[len("torch."):]
    if isinstance(v, torch.qscheme):
        return str(v)[len("torch."):]
    return v


FAKE_QUANTIZE = ("FakeQuantize", "FusedMovingAvgObsFakeQuantize", "FixedQParamsFakeQuantize")


def _ctr_parts(ctr):
    """(class, keyword arguments) of a constructor: a class or a with_args partial"""
    p = getattr(ctr, "p", None)
    return (p.func, dict(p.keywords)) if p is not None else (ctr, {})


def observer_yaml(ctr):
    """A constructor (class or with_args partial) as a flow mapping of its given arguments; a fake
    quantize's (a QAT qconfig's) as its class and its observer's, whose arguments it passes on."""
    cls, kw = _ctr_parts(ctr)
    items = []
    if cls.__name__ in FAKE_QUANTIZE:
        items.append("fake_quantize: " + cls.__name__)
        obs, okw = _ctr_parts(kw.pop("observer", torch.ao.quantization.MovingAverageMinMaxObserver))
        okw.update(kw)
        cls, kw = obs, okw
    items.append("observer: " + cls.__name__)
    for k in CLASS_ARGS[cls.__name__]:
        if k in kw:
            items.append("%s: %s" % (k, _yscalar(_value(kw[k]))))
    unknown = set(kw) - set(CLASS_ARGS[cls.__name__])
    if unknown:
        raise ValueError("observer %s: arguments %s have no bpcc spelling" % (cls.__name__, sorted(unknown)))
    return "{" + ", ".join(items) + "}"


def qconfig_yaml(qc):
    if qc is None:
        return "null"
    return "{activation: %s, weight: %s}" % (observer_yaml(qc.activation), observer_yaml(qc.weight))


def mapping_yaml(m, name, header=()):
    lines = ["# " + h for h in header]
    lines.append("name: " + name)
    if m.global_qconfig is not None:
        lines.append("global: " + qconfig_yaml(m.global_qconfig))
    if m.object_type_qconfigs:
        lines.append("object_type:")
        for t, qc in m.object_type_qconfigs.items():
            lines.append("  - {type: %s, qconfig: %s}" % (_yscalar(op_name(t)), qconfig_yaml(qc)))
    if m.module_name_regex_qconfigs:
        lines.append("module_name_regex:")
        for r, qc in m.module_name_regex_qconfigs.items():
            lines.append("  - {regex: %s, qconfig: %s}" % (_yscalar(r), qconfig_yaml(qc)))
    if m.module_name_qconfigs:
        lines.append("module_name:")
        for n, qc in m.module_name_qconfigs.items():
            lines.append("  - {name: %s, qconfig: %s}" % (_yscalar(n), qconfig_yaml(qc)))
    if m.module_name_object_type_order_qconfigs:
        lines.append("module_name_object_type_order:")
        for (n, t, i), qc in m.module_name_object_type_order_qconfigs.items():
            lines.append("  - {name: %s, type: %s, index: %d, qconfig: %s}" % (_yscalar(n), _yscalar(op_name(t)), i, qconfig_yaml(qc)))
    return "\n".join(lines) + "\n"


def observer_effective(ctr):
    """What the constructed observer holds, in bpcc's JSON shape (a fake quantize: its observer's,
    and its class)."""
    o = ctr()
    d = {}
    if type(o).__name__ in FAKE_QUANTIZE:
        d["fake_quantize"] = type(o).__name__
        o = o.activation_post_process
    name = type(o).__name__
    d.update(observer=name, dtype=_value(o.dtype))
    if name == "PlaceholderObserver":
        d["compute_dtype"] = _value(o.compute_dtype) if getattr(o, "compute_dtype", None) is not None else None
        d["custom_op_name"] = o.custom_op
    elif name == "NoopObserver":
        d["custom_op_name"] = o.custom_op
    elif name == "ReuseInputObserver":
        pass
    elif name == "FixedQParamsObserver":
        d.update(qscheme=_value(o.qscheme), quant_min=o.quant_min, quant_max=o.quant_max,
                 scale=float(o.scale), zero_point=int(o.zero_point))
    else:
        d.update(qscheme=_value(o.qscheme), reduce_range=bool(o.reduce_range), quant_min=int(o.quant_min),
                 quant_max=int(o.quant_max), eps=float(o.eps))
        if hasattr(o, "averaging_constant"):
            d["averaging_constant"] = o.averaging_constant
        if hasattr(o, "ch_axis"):
            d["ch_axis"] = o.ch_axis
        if name == "HistogramObserver":
            d.update(bins=o.bins, upsample_rate=o.upsample_rate)
    return d


def mapping_effective(m, name):
    def qc(q):
        return None if q is None else {"activation": observer_effective(q.activation),
                                        "weight": observer_effective(q.weight)}
    return {
        "name": name,
        "global": qc(m.global_qconfig),
        "object_type": [{"type": op_name(t), "qconfig": qc(q)} for t, q in m.object_type_qconfigs.items()],
        "module_name_regex": [{"regex": r, "qconfig": qc(q)} for r, q in m.module_name_regex_qconfigs.items()],
        "module_name": [{"name": n, "qconfig": qc(q)} for n, q in m.module_name_qconfigs.items()],
        "module_name_object_type_order": [{"name": n, "type": op_name(t), "index": i, "qconfig": qc(q)}
                                          for (n, t, i), q in m.module_name_object_type_order_qconfigs.items()],
    }


def default_mapping(name):
    """get_default_qconfig_mapping(name), or for <backend>_qat get_default_qat_qconfig_mapping"""
    if name.endswith("_qat"):
        return get_default_qat_qconfig_mapping(name[:-4]), "get_default_qat_qconfig_mapping(\"%s\")" % name[:-4]
    return get_default_qconfig_mapping(name), "get_default_qconfig_mapping(\"%s\")" % name


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    name = sys.argv[1]
    mapping, made_by = default_mapping(name)
    sys.stdout.write(mapping_yaml(mapping, name, [
        "Generated from PyTorch %s %s by" % (torch.__version__, made_by),
        "`python3 -m bpcc_torch.qconfig %s` (tests/conformance/test_qconfigs.py checks it)." % name]))
