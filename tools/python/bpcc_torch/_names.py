"""Public import paths for functions and classes, their resolution, and the conversion of
torch.fx argument values to and from the IR's value kinds."""
import builtins
import importlib
import operator

import torch

from . import _format as fmt

# Namespaces searched first, in order, for a function's public name.
_PUBLIC = ("torch.nn.functional", "torch", "torch.linalg", "torch.special", "operator", "math")
_index_cache = {}


class BridgeError(ValueError):
    """A construct the bridge cannot represent or rebuild; the message names it."""


def _index(ns):
    idx = _index_cache.get(ns)
    if idx is None:
        mod = importlib.import_module(ns)
        idx = {}
        for k, v in vars(mod).items():
            if not k.startswith("_") and callable(v):
                # a function's own name over any other binding (torch.obj is a loop variable
                # left in torch's namespace, bound to torch.zeros_like)
                if idx.get(id(v)) is None or k == getattr(v, "__name__", None):
                    idx[id(v)] = k
        _index_cache[ns] = idx
    return idx


def _shortest_alias(obj, module):
    """The shortest prefix P of `module` such that P.<obj.__name__> is obj."""
    parts = module.split(".")
    nm = getattr(obj, "__name__", None)
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        try:
            mod = importlib.import_module(prefix)
        except Exception:
            continue
        if nm and getattr(mod, nm, None) is obj:
            return prefix + "." + nm
    return None


def function_name(fn):
    """Public import path of a call_function target: torch.nn.functional.relu, operator.add,
    torch.cat; builtins by bare name (getattr)."""
    nm = getattr(fn, "__name__", None)
    if nm and getattr(builtins, nm, None) is fn:
        return nm
    for ns in _PUBLIC:
        k = _index(ns).get(id(fn))
        if k is not None:
            return ns + "." + k
    mod = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", nm)
    if mod and qual and "<locals>" not in qual:
        alias = _shortest_alias(fn, mod)
        if alias:
            return alias
        path = mod + "." + qual
        try:
            if resolve(path) is fn:
                return path
        except BridgeError:
            pass
    raise BridgeError("function %r has no importable name" % (fn,))


class _ConvAdd2d(torch.ao.nn.intrinsic._FusedModule):
    """PyTorch 2.x's torch.ao.nn.intrinsic.ConvAdd2d (the onednn config's conv+add fusion), for a
    torch that has none: forward(x1, x2) = add(conv(x1), x2), `add` the op the fusion matched.
    A fused module as 2.x's is, so that this torch's convert swaps its conv for a reference one."""

    def __init__(self, conv, add):
        super().__init__(conv)
        self.add = add

    def forward(self, x1, x2):
        return self.add(self[0](x1), x2)


class _ConvAddReLU2d(torch.ao.nn.intrinsic._FusedModule):
    """PyTorch 2.x's torch.ao.nn.intrinsic.ConvAddReLU2d: relu(add(conv(x1), x2)). (2.x also
    names its ReLU child `relu`; here it is only child 1, as in bpcc's model files.)"""

    def __init__(self, conv, add, relu):
        super().__init__(conv, relu)
        self.add = add

    def forward(self, x1, x2):
        return self[1](self.add(self[0](x1), x2))


class _LinearLeakyReLU(torch.ao.nn.intrinsic._FusedModule):
    """PyTorch 2.x's torch.ao.nn.intrinsic.LinearLeakyReLU: the linear, then the leaky relu."""

    def __init__(self, linear, leaky_relu):
        super().__init__(linear, leaky_relu)


class _LinearTanh(torch.ao.nn.intrinsic._FusedModule):
    """PyTorch 2.x's torch.ao.nn.intrinsic.LinearTanh: the linear, then tanh."""

    def __init__(self, linear, tanh):
        super().__init__(linear, tanh)


# fused module classes of later PyTorch versions that bpcc's built-in configs make, by their
# import path there: stand-ins where this torch has none
_LATER = {"torch.ao.nn.intrinsic.ConvAdd2d": _ConvAdd2d, "torch.ao.nn.intrinsic.ConvAddReLU2d": _ConvAddReLU2d,
          "torch.ao.nn.intrinsic.LinearLeakyReLU": _LinearLeakyReLU, "torch.ao.nn.intrinsic.LinearTanh": _LinearTanh}


def class_name(cls):
    for path, stand_in in _LATER.items():
        if cls is stand_in:
            return path
    alias = _shortest_alias(cls, cls.__module__)
    if alias:
        return alias
    path = cls.__module__ + "." + cls.__qualname__
    if "<locals>" not in path:
        try:
            if resolve(path) is cls:
                return path
        except BridgeError:
            pass
    raise BridgeError("class %s has no importable name" % cls.__qualname__)


def resolve(path):
    """The object named by a public import path (builtins by bare name)."""
    if "." not in path:
        if hasattr(builtins, path):
            return getattr(builtins, path)
        raise BridgeError("unknown name '%s'" % path)
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
        except AttributeError:
            break
    if path in _LATER:
        return _LATER[path]
    raise BridgeError("cannot import '%s'" % path)


_SYMBOL_TYPES = (torch.qscheme, torch.memory_format, torch.layout)


def to_ir(v, where):
    """A torch.fx argument (or module attribute) as an IR value; `where` names the place in
    error messages."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        if not -(1 << 63) <= v < (1 << 63):
            raise BridgeError("%s: integer %d does not fit in 64 bits" % (where, v))
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, torch.fx.Node):
        return fmt.Node(v.name)
    if isinstance(v, torch.dtype):
        name = str(v)[len("torch."):]
        if name not in fmt.SHORT:
            raise BridgeError("%s: dtype %s is not supported" % (where, v))
        return fmt.DType(name)
    if isinstance(v, _SYMBOL_TYPES):
        return fmt.Symbol(str(v))
    if isinstance(v, torch.device):
        return fmt.Device(str(v))
    if v is Ellipsis:
        return v
    if isinstance(v, slice):
        return slice(to_ir(v.start, where), to_ir(v.stop, where), to_ir(v.step, where))
    if isinstance(v, tuple):
        return tuple(to_ir(x, where) for x in v)
    if isinstance(v, list):
        return [to_ir(x, where) for x in v]
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise BridgeError("%s: dict key %r is not a string" % (where, k))
            out[k] = to_ir(x, where)
        return out
    raise BridgeError("%s: cannot represent a value of type %s (%r)" % (where, type(v).__name__, v))


def from_ir(v, env):
    """An IR value as a torch.fx argument; node references looked up in env."""
    if isinstance(v, fmt.Node):
        return env[v.name]
    if isinstance(v, fmt.DType):
        return getattr(torch, v.name)
    if isinstance(v, fmt.Symbol):
        return resolve(v.name)
    if isinstance(v, fmt.Device):
        return torch.device(v.name)
    if isinstance(v, slice):
        return slice(from_ir(v.start, env), from_ir(v.stop, env), from_ir(v.step, env))
    if isinstance(v, tuple):
        return tuple(from_ir(x, env) for x in v)
    if isinstance(v, list):
        return [from_ir(x, env) for x in v]
    if isinstance(v, dict):
        return {k: from_ir(x, env) for k, x in v.items()}
    return v
