"""export(model, example_inputs, path): a PyTorch model as a bpcc model file."""
import contextlib
import copy
import dis
import functools
import inspect
import os
import sys
import traceback

import torch
import torch.fx
from torch.fx.passes.shape_prop import ShapeProp, TensorMetadata

from . import _format as fmt
from . import _safetensors as st
from ._names import BridgeError, class_name, function_name, to_ir


def _swap_float_functionals(model):
    """prepare_fx's _swap_ff_with_fxff: each FloatFunctional (torchvision's quantizable models'
    skip_add) becomes an FXFloatFunctional, whose add/cat/mul do not call the float model's
    activation_post_process (an Identity), so that no such call is traced. Returns what puts the
    model back as it was."""
    saved = []

    def walk(mod):
        if any(isinstance(c, torch.ao.nn.quantized.FloatFunctional) for c in mod.children()):
            saved.append((mod, mod._modules.copy()))
            for name, c in list(mod._modules.items()):
                if isinstance(c, torch.ao.nn.quantized.FloatFunctional):
                    mod._modules[name] = torch.ao.nn.quantized.FXFloatFunctional()
        for c in mod.children():
            if not isinstance(c, torch.ao.nn.quantized.FXFloatFunctional):
                walk(c)
    walk(model)

    def restore():
        for mod, modules in saved:
            mod._modules.clear()
            mod._modules.update(modules)
    return restore


@functools.lru_cache(maxsize=None)
def _needs_unpacking_fix():
    """torch.fx's Proxy.__iter__ before PyTorch 2.0 finds the instruction that iterates over a
    traced value by f_lasti // 2, its index in the bytecode up to Python 3.10. From 3.11 on the
    bytecode holds inline caches that dis.get_instructions does not list, so the index lands on
    another instruction: `n, c, h, w = x.shape` fails (TraceError, or IndexError) where 3.10
    traced it as four getitem nodes. Debian 12 pairs PyTorch 1.13 with Python 3.11. Asked once
    (it reads torch.fx's source), not at every trace."""
    if sys.version_info < (3, 11):
        return False
    try:
        return "f_lasti // 2" in inspect.getsource(torch.fx.proxy.Proxy.__iter__)
    except (OSError, TypeError):
        return int(torch.__version__.split(".")[0]) < 2


def _proxy_iter(self):
    """Proxy.__iter__ with the iterating instruction found by its offset, f_lasti (as PyTorch 2.0
    does): unpacking into n names is n getitem nodes, anything else is the tracer's (an error)"""
    frame = inspect.currentframe().f_back
    inst = next((i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
    if inst is not None and inst.opname == "UNPACK_SEQUENCE":
        return (self[i] for i in range(inst.argval))
    return self.tracer.iter(self)


@contextlib.contextmanager
def fx_unpacking():
    """While in it, torch.fx traces unpacking a traced value (`b, c, h, w = x.shape`, `q, k, v =
    t.unbind(0)`) as PyTorch does on Python 3.10 and as PyTorch 2.0 does on 3.11, where PyTorch
    1.13 on Python 3.11 fails (see _needs_unpacking_fix). trace() and export() use it; wrap
    prepare_fx in it to trace such a model in PyTorch itself. Changes nothing where not needed."""
    if not _needs_unpacking_fix():
        yield
        return
    saved = torch.fx.proxy.Proxy.__iter__
    torch.fx.proxy.Proxy.__iter__ = _proxy_iter
    try:
        yield
    finally:
        torch.fx.proxy.Proxy.__iter__ = saved


def trace(model):
    """The GraphModule prepare_fx would work on: its FloatFunctional swap (undone after) and
    QuantizationTracer's rules (leaf modules are torch.nn / torch.ao.nn modules other than
    Sequential). A GraphModule is taken as it is."""
    if isinstance(model, torch.fx.GraphModule):
        return model
    from torch.ao.quantization.fx.tracer import QuantizationTracer
    tracer = QuantizationTracer([], [])
    restore = _swap_float_functionals(model)
    had = set(vars(model))
    try:
        with fx_unpacking():
            graph = tracer.trace(model)
        gm = torch.fx.GraphModule(model, graph, model.__class__.__name__)
    except Exception as e:
        # iterating over a traced value other than by unpacking it (`for p in x.chunk(2)`,
        # `f(*t)`): torch.fx refuses it in Proxy.__iter__ (torch's or fx_unpacking's)
        tb = traceback.extract_tb(e.__traceback__)
        mine = os.path.abspath(__file__)
        at = [i for i, f in enumerate(tb) if f.name in ("__iter__", "_proxy_iter") and
              (f.filename.replace(os.sep, "/").endswith("fx/proxy.py") or os.path.abspath(f.filename) == mine)]
        if at and at[0] > 0:
            f = tb[at[0] - 1]
            raise BridgeError("%s:%d: %s: torch.fx cannot iterate over a traced value (looping over a tensor or a "
                              "module's output, or passing it as *args); index it instead (t[0], t[1], ...)"
                              % (f.filename, f.lineno, (f.line or "").strip())) from e
        raise
    finally:
        restore()
        # torch.fx stows a tensor made while tracing (`x + torch.zeros(1)`) in the traced module
        # as _tensor_constant<i>, the first i free; the GraphModule has its own reference, and
        # left in the model it would move the next trace's numbering (prepare_fx's after an export)
        for k in set(vars(model)) - had:
            if k.startswith("_tensor_constant"):
                delattr(model, k)
    # the scope each node was traced in, as prepare_fx's generate_qconfig_map reads it
    gm._bpcc_scope = {k: (path, t) for k, (path, t) in tracer.node_name_to_scope.items() if path}
    return gm


def _meta(tm):
    if isinstance(tm, TensorMetadata):
        name = str(tm.dtype)[len("torch."):]
        if name not in fmt.SHORT:
            return None
        return fmt.TType(fmt.SHORT[name], [int(d) for d in tm.shape])
    if isinstance(tm, (tuple, list)):
        items = [_meta(x) for x in tm]
        return tuple(items) if isinstance(tm, tuple) else items
    return None


def _scope(n, scopes):
    """(path, type name) of a function, method or get_attr node traced inside a submodule, else None.
    (A call_module node's scope is its target, and a placeholder's is the root.)"""
    if n.op not in ("call_function", "call_method", "get_attr") or n.name not in scopes:
        return None
    path, t = scopes[n.name]
    if isinstance(t, str):
        return (path, t)
    try:
        return (path, class_name(t))
    except BridgeError as e:
        raise BridgeError("node '%s': scope '%s': %s" % (n.name, path, e))


def _node_entry(n, scopes):
    where = "node '%s'" % n.name
    if n.op == "call_function":
        try:
            target = function_name(n.target)
        except BridgeError as e:
            raise BridgeError("%s: %s" % (where, e))
    elif isinstance(n.target, str):
        target = n.target
    else:
        raise BridgeError("%s: target %r is not a name" % (where, n.target))
    tm = n.meta.get("tensor_meta")
    meta = _meta(tm) if tm is not None else None
    return fmt.NodeEntry(n.name, n.op, target, to_ir(tuple(n.args), where),
                         to_ir(dict(n.kwargs), where), meta, _scope(n, scopes))


def _attrs(name, mod):
    """Public plain attributes (the instance __dict__): constructor arguments and state such
    as `training`."""
    out = {}
    for k, v in vars(mod).items():
        if k.startswith("_"):
            continue
        if k == "qconfig" and (v is None or isinstance(v, torch.ao.quantization.QConfig)):
            # prepare_fx's bookkeeping on a module (a prepare_qat_fx model's QAT modules hold
            # theirs): what it made is in the file (weight_fake_quant), and bpcc's convert takes
            # its qconfig mapping from the command line, as convert_fx takes the one prepare saved
            continue
        if isinstance(v, (torch.nn.Module, torch.Tensor)):
            continue
        if callable(v) and not isinstance(v, type):
            # a function with a public name (TransformerEncoderLayer's activation) as a symbol
            try:
                out[k] = fmt.Symbol(function_name(v))
            except BridgeError:
                raise BridgeError("module '%s' (%s): attribute '%s' holds a callable without a public "
                                  "name, which bpcc cannot store" % (name, type(mod).__name__, k)) from None
            continue
        out[k] = to_ir(v, "module '%s' (%s) attribute '%s'" % (name, type(mod).__name__, k))
    return out


def _tensors(name, mod, constants):
    """(role, name, TType, tensor) of the module's own parameters, buffers and the plain
    tensor attributes that the graph reads."""
    out = []
    for role, table in (("param", mod._parameters), ("buffer", mod._buffers)):
        for k, t in table.items():
            if t is not None:
                out.append((role, k, t))
    for k in constants:
        out.append(("constant", k, getattr(mod, k)))
    result = []
    for role, k, t in out:
        key = "%s.%s" % (name, k) if name else k
        if t.is_quantized:
            raise BridgeError("tensor '%s' is quantized; bpcc models hold float weights with "
                              "their qparams as attributes" % key)
        if t.dtype not in st.DTYPES:
            raise BridgeError("tensor '%s' has dtype %s, which bpcc cannot store" % (key, t.dtype))
        result.append((role, k, fmt.TType(st.DTYPES[t.dtype][3], list(t.shape)), t))
    return result


def to_model(gm, weights_name):
    """The fmt.Model and the tensors (key, tensor) of a GraphModule."""
    m = fmt.Model(weights_name)
    # plain tensor attributes read by get_attr, by owner module
    constants = {}
    modules = dict(gm.named_modules(remove_duplicate=False))
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            owner, _, leaf = n.target.rpartition(".")
            mod = modules.get(owner)
            if mod is None:
                raise BridgeError("node '%s': get_attr of '%s', whose owner is not a module"
                                  % (n.name, n.target))
            if leaf in mod._parameters or leaf in mod._buffers or leaf in mod._modules:
                continue
            v = getattr(mod, leaf, None)
            if not isinstance(v, torch.Tensor):
                raise BridgeError("node '%s': get_attr of '%s', which is a %s, not a tensor or "
                                  "module" % (n.name, n.target, type(v).__name__))
            constants.setdefault(owner, []).append(leaf)
        elif n.op == "call_module" and n.target not in modules:
            raise BridgeError("node '%s' calls '%s', which is not a submodule" % (n.name, n.target))
    tensors = []
    for name, mod in gm.named_modules(remove_duplicate=False):
        own = _tensors(name, mod, sorted(set(constants.get(name, []))))
        if name == "":
            # a prepared model's observed_node_names (prepare_fx's, or bpcc prepare's through
            # load), whose weighted modules convert swaps for reference ones: their call_module
            # nodes in graph order, as bpcc prepare records them
            observed = getattr(gm, "_observed_node_names", None)
            attrs = {}
            if observed is not None:
                attrs["_observed_node_names"] = [n.name for n in gm.graph.nodes
                                                 if n.op == "call_module" and n.name in observed]
            # and the graph inputs and outputs it took as quantized (its PrepareCustomConfig's
            # indexes), which convert_fx dequantizes and leaves quantized
            # (a model bpcc prepared, loaded, holds them as attributes of its own)
            pcc = getattr(gm, "_prepare_custom_config", None)
            for key, field in (("_input_quantized_idxs", "input_quantized_indexes"),
                               ("_output_quantized_idxs", "output_quantized_indexes")):
                idxs = getattr(pcc, field, None) or getattr(gm, key, None)
                if idxs:
                    attrs[key] = [int(i) for i in idxs]
            if not own and not attrs:
                continue
            entry = fmt.ModuleEntry("", "torch.fx.GraphModule", attrs)
        elif type(mod) is torch.nn.Module and not own:
            continue  # a plain container; the loader recreates it
        else:
            try:
                tname = class_name(type(mod))
            except BridgeError as e:
                raise BridgeError("module '%s': %s" % (name, e))
            entry = fmt.ModuleEntry(name, tname, _attrs(name, mod))
        for role, k, tt, t in own:
            entry.tensors.append((role, k, tt))
            tensors.append(("%s.%s" % (name, k) if name else k, t))
        m.modules.append(entry)
    scopes = getattr(gm, "_bpcc_scope", None)
    if scopes is None:
        # a model prepared by PyTorch (prepare_fx, prepare_qat_fx) keeps the scopes its tracer
        # recorded, which its convert names the qparams buffers by
        scopes = {k: v for k, v in (getattr(gm, "_node_name_to_scope", None) or {}).items() if v[0]}
    m.nodes = [_node_entry(n, scopes) for n in gm.graph.nodes]
    return m, tensors


def export(model, example_inputs, path):
    """Trace `model` as prepare_fx would, propagate shapes on `example_inputs` (a tuple), and
    write `path` (IR text) and its weights (same name, extension .safetensors). The model
    itself is not changed (shape propagation runs on a copy)."""
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    gm = trace(model)
    probe = copy.deepcopy(gm)
    with torch.no_grad():
        ShapeProp(probe).propagate(*example_inputs)
    metas = {n.name: n.meta.get("tensor_meta") for n in probe.graph.nodes}
    for n in gm.graph.nodes:
        if metas.get(n.name) is not None:
            n.meta["tensor_meta"] = metas[n.name]
    stem = os.path.splitext(path)[0]
    weights = stem + ".safetensors"
    m, tensors = to_model(gm, os.path.basename(weights))
    if tensors and path and os.path.abspath(weights) == os.path.abspath(path):
        raise BridgeError("cannot write '%s': the model's text and its weights file would be one file "
                          "(a model NAME.EXT keeps its weights in NAME.safetensors): give the model another name" % path)
    text = fmt.print_model(m)
    # both complete before either is renamed: a failure leaves no half of a model
    st.atomic_write_all(([(weights, st.encode(tensors))] if tensors else []) + [(path, [text.encode("utf-8")])])
    return gm
