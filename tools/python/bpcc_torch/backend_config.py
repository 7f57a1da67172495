"""PyTorch BackendConfig -> bpcc backend config (YAML text, or the dict of `bpcc config dump
--json`). Used to generate patterns/{native,fbgemm,qnnpack,tensorrt,x86}.yaml from the
installed torch, to compare bpcc's loader with PyTorch in the conformance suite, and by users
porting their own Python BackendConfig to YAML:

    python3 -m bpcc_torch backend-config native > native.yaml
    python3 -m bpcc_torch backend-config path.to.module:get_my_config > my.yaml
"""
import importlib
import math
import re

import torch
from torch.ao.quantization.utils import MatchAllNode

from ._names import BridgeError, class_name, function_name

_OBS = {0: "OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT", 1: "OUTPUT_SHARE_OBSERVER_WITH_INPUT",
        2: "INPUT_OUTPUT_NOT_OBSERVED"}
_CONSTRAINT_KEYS = ("quant_min_lower_bound", "quant_max_upper_bound", "scale_min_lower_bound",
                    "scale_max_upper_bound", "scale_exact_match", "zero_point_exact_match")

BUILTIN_GETTERS = {
    "native": "torch.ao.quantization.backend_config:get_native_backend_config",
    "fbgemm": "torch.ao.quantization.backend_config:get_fbgemm_backend_config",
    "qnnpack": "torch.ao.quantization.backend_config:get_qnnpack_backend_config",
    "tensorrt": "torch.ao.quantization.backend_config:get_tensorrt_backend_config",
    "x86": "torch.ao.quantization.backend_config.x86:get_x86_backend_config",
}


def get_backend_config(spec):
    """A BackendConfig from a built-in name or 'module:function'."""
    spec = BUILTIN_GETTERS.get(spec, spec)
    mod, _, fn = spec.partition(":")
    return getattr(importlib.import_module(mod), fn)()


def op_name(op):
    if isinstance(op, type) and issubclass(op, MatchAllNode):
        return "MatchAllNode"
    if isinstance(op, str):
        return op
    if isinstance(op, type):
        return class_name(op)
    return function_name(op)


def complex_pattern(p):
    """PyTorch's reversed nested tuple as nested lists of op names."""
    if isinstance(p, tuple):
        return [complex_pattern(x) if isinstance(x, tuple) else op_name(x) for x in p]
    return op_name(p)


def simple_pattern(p):
    """The forward-order list when p is a chain of two or three ops, else None."""
    if not isinstance(p, tuple):
        return None
    if len(p) == 2 and not isinstance(p[1], tuple):
        ops = [p[1], p[0]]
    elif len(p) == 2 and isinstance(p[1], tuple) and len(p[1]) == 2 and not isinstance(p[1][1], tuple):
        ops = [p[1][1], p[1][0], p[0]]
    else:
        return None
    if any(isinstance(o, type) and issubclass(o, MatchAllNode) for o in ops):
        return None
    return [op_name(o) for o in ops]


def fuser_name(fn):
    """bpcc's name for a fuser method."""
    q = getattr(fn, "__qualname__", "")
    cells = [c.cell_contents for c in (fn.__closure__ or ())]
    if "sequential_wrapper2" in q:
        return "sequential"
    if q.startswith("reverse2.") or q.startswith("reverse3.") or q.startswith("_reverse"):
        return fuser_name(cells[0])
    name = getattr(fn, "__name__", None)
    if name and name.startswith("_"):
        name = name[1:]
    if not name or "<" in name:
        raise BridgeError("fuser method %r has no name in bpcc's table" % (fn,))
    return name


def dtype_name(d):
    if d is None:
        return None
    if d is float:
        return "float32"
    if d is int:
        return "int64"
    return str(d)[len("torch."):]


def _num(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 2 ** 53:
        return v
    return v


def dwc_dict(dwc):
    out = {"dtype": dtype_name(dwc.dtype)}
    for k in _CONSTRAINT_KEYS:
        v = getattr(dwc, k, None)
        if v is not None:
            out[k] = v
    return out


def dtype_config_dict(dc):
    out = {}
    for key in ("input", "output", "weight"):
        dwc = getattr(dc, key + "_dtype_with_constraints")
        if dwc.dtype is not None:
            out[key + "_dtype"] = dwc_dict(dwc)
    if dc.bias_dtype is not None:
        out["bias_dtype"] = {"dtype": dtype_name(dc.bias_dtype)}
    out["is_dynamic"] = bool(dc.is_dynamic)
    return out


def fixed_qparams(obs):
    kw = dict(getattr(obs, "p").keywords)
    out = {}
    for k in ("scale", "zero_point", "dtype", "quant_min", "quant_max"):
        if k in kw:
            out[k] = dtype_name(kw[k]) if k == "dtype" else kw[k]
    return out


def config_dict(bpc):
    p = bpc.pattern if not hasattr(bpc, "_pattern_complex_format") or bpc._pattern_complex_format is None \
        else bpc._pattern_complex_format
    d = {}
    simple = simple_pattern(p) if isinstance(p, tuple) else None
    if not isinstance(p, tuple):
        d["pattern"] = op_name(p)
    elif simple is not None:
        d["pattern"] = simple
    else:
        d["pattern_complex_format"] = complex_pattern(p)
    d["observation_type"] = _OBS[bpc.observation_type.value]
    d["dtype_configs"] = [dtype_config_dict(dc) for dc in bpc.dtype_configs]
    for key, attr in (("root_module", "root_module"), ("qat_module", "qat_module"),
                      ("reference_quantized_module", "reference_quantized_module"),
                      ("fused_module", "fused_module")):
        v = getattr(bpc, attr, None)
        if v is not None:
            d[key] = class_name(v)
    if bpc.fuser_method is not None:
        d["fuser_method"] = fuser_name(bpc.fuser_method)
    for key in ("_root_node_getter", "_extra_inputs_getter"):
        v = getattr(bpc, key, None)
        if v is not None:
            d[key[1:]] = fuser_name(v)
    if bpc._num_tensor_args_to_observation_type:
        d["num_tensor_args_to_observation_type"] = {
            str(k): _OBS[v.value] for k, v in sorted(bpc._num_tensor_args_to_observation_type.items())}
    if bpc._input_type_to_index:
        d["input_type_to_index"] = dict(bpc._input_type_to_index)
    obs = getattr(bpc, "_overwrite_output_observer", None)
    if obs is not None:
        d["fixed_qparams"] = fixed_qparams(obs)
    iao = getattr(bpc, "_input_output_observed", None)
    if iao is not None:
        d["input_output_observed"] = bool(iao)
    return d


def to_dict(bc):
    """The effective config as `bpcc config dump --json` prints it."""
    configs = bc.configs.values() if isinstance(bc.configs, dict) else bc.configs
    return {"name": bc.name, "configs": [config_dict(c) for c in configs]}


# {==================== YAML ====================

_PLAIN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")
_YAML_WORDS = ("null", "true", "false", "yes", "no", "on", "off", "~")


def _yscalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return {True: ".inf", False: "-.inf"}[v > 0] if math.isinf(v) else ".nan"
        r = repr(v)
        return r if ("." in r or "e" in r) else r + ".0"
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _YAML_WORDS:
        return s
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _yflow(v):
    if isinstance(v, list):
        return "[" + ", ".join(_yflow(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (_yscalar(k), _yflow(x)) for k, x in v.items()) + "}"
    return _yscalar(v)


def _ydtype(d):
    """A dtype with constraints: a bare name when it has none."""
    return d["dtype"] if len(d) == 1 else d


def to_yaml(config, header=None):
    """bpcc YAML of a BackendConfig, or of a dict shaped like to_dict's. A dtype_configs list
    that repeats an earlier one is written as an alias of it (&dcN on first use, *dcN after),
    and the default observation type is left out, exactly as `bpcc config dump` writes it."""
    d = config if isinstance(config, dict) else to_dict(config)
    lines = []
    if header:
        lines += ["# " + h if h else "#" for h in header]
    lines.append("name: " + _yscalar(d["name"]))
    lines.append("configs:")
    anchors = {}
    for c in d["configs"]:
        first = True
        for k, v in c.items():
            if k == "observation_type" and v == _OBS[0]:
                continue  # the default is not written
            lead = "  - " if first else "    "
            first = False
            if k == "dtype_configs":
                if not v:
                    lines.append(lead + "dtype_configs: []")
                    continue
                body = []
                for dc in v:
                    items = {}
                    for dk, dv in dc.items():
                        if dk == "is_dynamic" and dv is False:
                            continue
                        items[dk] = _ydtype(dv) if isinstance(dv, dict) else dv
                    body.append("      - " + _yflow(items))
                key = "\n".join(body)
                if key in anchors:
                    lines.append(lead + "dtype_configs: *dc%d" % anchors[key])
                else:
                    anchors[key] = len(anchors) + 1
                    lines.append(lead + "dtype_configs: &dc%d" % anchors[key])
                    lines += body
            else:
                lines.append(lead + "%s: %s" % (k, _yflow(v)))
    return "\n".join(lines) + "\n"

# }================================================
