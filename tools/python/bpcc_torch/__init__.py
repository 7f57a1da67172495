"""bpcc_torch: the bridge between PyTorch and bpcc's model files.

    import bpcc_torch
    bpcc_torch.export(model, (example_input,), "model.bpcc")   # trace as prepare_fx would
    gm = bpcc_torch.load("model.bpcc")                          # a runnable torch.fx.GraphModule

Run with Debian's /usr/bin/python3 and PYTHONPATH=tools/python.
"""
from ._format import FormatError
from ._names import BridgeError
from .export import export, fx_unpacking, trace
from .load import load

__all__ = ["export", "fx_unpacking", "load", "trace", "BridgeError", "FormatError"]
