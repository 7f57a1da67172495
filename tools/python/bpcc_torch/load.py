"""load(path) -> torch.fx.GraphModule: a bpcc model rebuilt as a runnable PyTorch module."""
import inspect
import os

import torch
import torch.fx
from torch.ao.quantization.fake_quantize import FakeQuantizeBase
from torch.ao.quantization.observer import ObserverBase

from . import _format as fmt
from . import _safetensors as st
from ._names import _LATER, BridgeError, from_ir, resolve

_CONTAINERS = ("torch.fx.GraphModule", "torch.nn.Module")


def _build(entry, data, children):
    """Construct one module from its type, attributes, tensors and (already built) children."""
    where = "module '%s' (%s)" % (entry.name, entry.type)
    attrs = {k: from_ir(v, {}) for k, v in entry.attrs.items()}
    declared = {tname for _, tname, _ in entry.tensors}
    kwargs = {}
    if entry.type in _CONTAINERS:
        m = torch.nn.Module()
    else:
        try:
            cls = resolve(entry.type)
        except BridgeError as e:
            raise BridgeError("%s: %s" % (where, e))
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise BridgeError("%s: not a torch.nn.Module class" % where)
        if issubclass(cls, torch.nn.Sequential):
            order = sorted(children, key=lambda k: (not k.isdigit(), int(k) if k.isdigit() else 0, k))
            parts = [children[k] for k in order]
            try:
                m = cls(*parts)
            except (AssertionError, TypeError) as e:
                # a fused module whose root was swapped for a reference quantized module (as
                # convert_to_reference_fx does after construction): its constructor checks the
                # float types (AssertionError), so build the container as Sequential does; likewise
                # PyTorch 2.x's fused modules that 1.13 lacks, whose constructors take more than
                # their children (ConvAdd2d's add, set below). Any other TypeError is the
                # constructor's own and is reported.
                if isinstance(e, TypeError) and cls not in _LATER.values():
                    raise BridgeError("%s: constructor failed: %s" % (where, e))
                m = cls.__new__(cls)
                torch.nn.Sequential.__init__(m, *parts)
        else:
            missing = None
            sig = inspect.signature(cls.__init__)
            params = list(sig.parameters.values())[1:]
            if issubclass(cls, torch.nn.RNNBase):
                # LSTM / GRU / RNN take (*args, **kwargs) and pass their own mode to RNNBase
                # (only the values other than the defaults: GRU refuses proj_size even at 0)
                params = [p for p in list(inspect.signature(torch.nn.RNNBase.__init__).parameters.values())[1:]
                          if p.name != "mode" and not (p.name in attrs and attrs[p.name] == p.default)]
            for p in params:
                if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    continue
                if p.name == "qconfig" and "qconfig" not in attrs and "weight_fake_quant" in children:
                    # a QAT module (its constructor asserts a qconfig and builds its weight
                    # fake-quant from it): the file's own fake-quant, which it then keeps
                    fq = children["weight_fake_quant"]
                    kwargs["qconfig"] = torch.ao.quantization.QConfig(activation=torch.nn.Identity,
                                                                      weight=lambda fq=fq: fq)
                    continue
                if p.name in attrs:
                    kwargs[p.name] = attrs[p.name]
                elif p.name in children:
                    kwargs[p.name] = children[p.name]
                elif isinstance(p.default, bool) and p.name in declared:
                    kwargs[p.name] = True  # a flag such as bias=True naming a tensor it creates
                elif p.default is p.empty:
                    missing = p.name
            if missing is None:
                try:
                    m = cls(**kwargs)
                except Exception as e:
                    raise BridgeError("%s: constructor failed: %s" % (where, e))
            elif children:
                # a composite whose constructor takes what it builds its parts from
                # (TransformerEncoderLayer's d_model, TransformerEncoder's encoder_layer): the file
                # holds the parts and every public attribute, so the module is put together from them
                m = cls.__new__(cls)
                torch.nn.Module.__init__(m)
            else:
                raise BridgeError("%s: cannot rebuild it: the constructor needs '%s', which "
                                  "the model file does not record" % (where, missing))
    for k, v in attrs.items():
        if k in kwargs and (k in m._buffers or k in m._parameters):
            continue  # the constructor made its tensor from it (an observer's eps)
        setattr(m, k, v)
    for role, tname, tt in entry.tensors:
        key = "%s.%s" % (entry.name, tname) if entry.name else tname
        if key not in data:
            raise BridgeError("%s: tensor '%s' missing from the weights file" % (where, key))
        t = data[key]
        if tuple(t.shape) != tt.shape:
            raise BridgeError("%s: tensor '%s' has shape %s, declared %s" % (where, key, tuple(t.shape), tt.shape))
        if role == "param":
            m._parameters[tname] = torch.nn.Parameter(t, requires_grad=t.is_floating_point())
            m._buffers.pop(tname, None)
        elif role == "buffer":
            m._buffers[tname] = t
            m._parameters.pop(tname, None)
        else:
            object.__setattr__(m, tname, t)
    if isinstance(m, torch.nn.RNNBase):  # its forward reads the weight list made at construction
        m._flat_weights = [getattr(m, wn, None) for wn in m._flat_weights_names]
    # the file is authoritative: what it does not declare, the module does not have; but an
    # observer given no tensors at all is an uncalibrated one (bpcc prepare's), which keeps the
    # statistics its constructor starts with, so that the model calibrates in PyTorch
    fresh_observer = not entry.tensors and isinstance(m, (ObserverBase, FakeQuantizeBase))
    for table in () if fresh_observer else (m._parameters, m._buffers):
        for k in list(table):
            if k not in declared and table[k] is not None:
                table[k] = None
    for k, child in children.items():
        if getattr(m, k, None) is not child:
            setattr(m, k, child)
    return m


def _attach(root, name, mod):
    parent = root
    parts = name.split(".")
    for p in parts[:-1]:
        nxt = getattr(parent, p, None)
        if nxt is None:
            nxt = torch.nn.Module()
            setattr(parent, p, nxt)
        parent = nxt
    setattr(parent, parts[-1], mod)


def from_model(m, data):
    """A GraphModule from a parsed fmt.Model and its tensors {key: tensor}."""
    built = {}
    # deepest first, so that children exist when their parent is constructed
    for e in sorted(m.modules, key=lambda e: -(e.name.count(".") + 1 if e.name else 0)):
        prefix = e.name + "." if e.name else ""
        children = {k[len(prefix):]: v for k, v in built.items()
                    if k.startswith(prefix) and k and "." not in k[len(prefix):] and k != e.name}
        built[e.name] = _build(e, data, children)
    root = built.get("", torch.nn.Module())
    for name in sorted((n for n in built if n), key=lambda n: n.count(".")):
        _attach(root, name, built[name])
    graph = torch.fx.Graph()
    env = {}
    for n in m.nodes:
        where = "node '%s'" % n.name
        if n.kind == "call_function":
            try:
                target = resolve(n.target)
            except BridgeError as e:
                raise BridgeError("%s: %s" % (where, e))
        else:
            target = n.target
        try:
            node = graph.create_node(n.kind, target, from_ir(n.args, env), from_ir(n.kwargs, env),
                                     name=n.name)
        except KeyError as e:
            raise BridgeError("%s: refers to undefined node %s" % (where, e))
        if node.name != n.name:
            raise BridgeError("%s: torch.fx renamed it to '%s'" % (where, node.name))
        env[n.name] = node
    gm = torch.fx.GraphModule(root, graph)
    # GraphModule copies only what the graph names; the file's other modules and root tensors stay,
    # as in a module PyTorch converted, whose dead code went after its attributes were copied (a
    # dead layer's module, its quantize point's buffers)
    for name in sorted((n for n in built if n), key=lambda n: n.count(".")):
        try:
            gm.get_submodule(name)
        except AttributeError:
            _attach(gm, name, built[name])
    for k, v in root._parameters.items():
        if v is not None and not hasattr(gm, k):
            gm.register_parameter(k, v)
    for k, v in root._buffers.items():
        if v is not None and not hasattr(gm, k):
            gm.register_buffer(k, v)
    # the root's own attributes, which GraphModule does not copy either (a prepared model's
    # records for convert; the modules it observed as the set prepare_fx keeps)
    for e in m.modules:
        for k in e.attrs if e.name == "" else ():
            v = getattr(root, k)
            setattr(gm, k, set(v) if k == "_observed_node_names" else v)
    # scopes travel with the GraphModule so that exporting it again keeps them
    gm._bpcc_scope = {n.name: n.scope for n in m.nodes if n.scope is not None}
    return gm


def load(path):
    with open(path, encoding="utf-8") as f:
        m = fmt.parse_model(f.read(), path)
    data = {}
    if m.weights:
        data = st.read(os.path.join(os.path.dirname(os.path.abspath(path)), m.weights))
    return from_model(m, data)
