"""python3 -m bpcc_torch export-torchvision NAME OUT [--seed N] [--size H]
   python3 -m bpcc_torch run MODEL INPUT OUT
   python3 -m bpcc_torch backend-config NAME|module:function [--json]

export-torchvision builds a torchvision classifier with seeded random weights (no download),
puts it in eval mode and exports it with a 1x3xHxW example (H = 224 unless the model needs
more). run loads a bpcc model, feeds it the tensors of INPUT (a safetensors file whose tensors
are named after the graph's placeholders) and writes the outputs to OUT ("output" for a single
tensor, "output.0", "output.1" ... for a tuple)."""
import argparse
import sys

import torch

from . import _safetensors as st
from ._format import FormatError
from ._names import BridgeError
from .export import export
from .load import load

MIN_SIZE = {"inception_v3": 299}


def torchvision_model(name, seed):
    import torchvision
    torch.manual_seed(seed)
    import inspect
    kwargs = {"weights": None}
    if name in ("googlenet", "inception_v3"):
        kwargs.update(aux_logits=False, init_weights=True)
    # segmentation and detection builders default to ImageNet weights for their backbone, which
    # would be downloaded: random weights there too
    if "weights_backbone" in inspect.signature(torchvision.models.get_model_builder(name)).parameters:
        kwargs["weights_backbone"] = None
    model = torchvision.models.get_model(name, **kwargs)
    return model.eval()


def _flatten(out, prefix="output"):
    if isinstance(out, torch.Tensor):
        return [(prefix, out)]
    if isinstance(out, (tuple, list)):
        items = []
        for i, x in enumerate(out):
            items += _flatten(x, "%s.%d" % (prefix, i))
        return items
    if isinstance(out, dict):
        items = []
        for k, x in out.items():
            items += _flatten(x, "%s.%s" % (prefix, k))
        return items
    raise BridgeError("output of type %s is not a tensor" % type(out).__name__)


def run(model_path, input_path, out_path):
    gm = load(model_path)
    inputs = st.read(input_path)
    args = []
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            if n.target not in inputs:
                raise BridgeError("%s: no tensor named '%s' for the graph input" % (input_path, n.target))
            args.append(inputs[n.target])
    with torch.no_grad():
        out = gm(*args)
    st.write(out_path, [(k, v.contiguous()) for k, v in _flatten(out)])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bpcc_torch", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export-torchvision", help="export a torchvision classifier")
    e.add_argument("name")
    e.add_argument("out")
    e.add_argument("--seed", type=int, default=0)
    e.add_argument("--size", type=int, default=None)
    b = sub.add_parser("backend-config", help="a PyTorch BackendConfig as bpcc YAML")
    b.add_argument("spec", help="native, fbgemm, qnnpack, tensorrt, x86, or module:function")
    b.add_argument("--json", action="store_true", help="the JSON of `bpcc config dump --json`")
    r = sub.add_parser("run", help="run a bpcc model in PyTorch")
    r.add_argument("model")
    r.add_argument("input")
    r.add_argument("out")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "export-torchvision":
            model = torchvision_model(a.name, a.seed)
            size = a.size or MIN_SIZE.get(a.name, 224)
            torch.manual_seed(a.seed)
            export(model, (torch.randn(1, 3, size, size),), a.out)
        elif a.cmd == "backend-config":
            from . import backend_config as bcfg
            bc = bcfg.get_backend_config(a.spec)
            if a.json:
                import json
                print(json.dumps(bcfg.to_dict(bc), indent=2))
            else:
                getter = bcfg.BUILTIN_GETTERS.get(a.spec, a.spec)
                sys.stdout.write(bcfg.to_yaml(bc, header=[
                    "Generated from PyTorch %s %s() by" % (torch.__version__, getter.split(":")[1]),
                    "`python3 -m bpcc_torch backend-config %s`: equal to it pattern for pattern." % a.spec]))
        else:
            run(a.model, a.input, a.out)
    except (BridgeError, FormatError, OSError, ValueError) as err:
        print("bpcc_torch: error: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
