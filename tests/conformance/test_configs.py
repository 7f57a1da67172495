#!/usr/bin/env python3
"""Conformance: bpcc's built-in backend configs equal PyTorch 1.13's get_<name>_backend_config()
for native, fbgemm, qnnpack, tensorrt and x86, pattern for pattern: the same patterns in the
same registry order, observation types, dtype configs with constraints, modules, fuser methods,
num_tensor_args_to_observation_type, input_type_to_index and fixed qparams. Besides the direct
comparison with the bridge's translation of PyTorch's objects, the tables that PyTorch itself
derives from a config (torch.ao.quantization.backend_config.utils) are recomputed from bpcc's
JSON and compared with PyTorch's.

usage: test_configs.py BPCC      (exit 77 when torch is not installed)
"""
import json
import os
import subprocess
import sys
import unittest

import conftools  # exits 77 without torch; tools/python on the path

conftools.require_torch(torchvision=False)
import torch  # noqa: F401
from torch.ao.quantization.backend_config import utils as bcu

HERE = os.path.dirname(os.path.abspath(__file__))
from bpcc_torch import backend_config as bc  # noqa: E402
from bpcc_torch._names import class_name  # noqa: E402

BPCC = None
NAMES = ["native", "fbgemm", "qnnpack", "tensorrt", "x86"]


def bpcc_json(spec):
    r = subprocess.run([BPCC, "config", "dump", "--json", spec], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("bpcc config dump %s failed: %s" % (spec, r.stderr))
    return json.loads(r.stdout)


def complex_key(entry):
    """The reversed nested form of an entry's pattern, as a hashable tuple of names."""
    if "pattern_complex_format" in entry:
        p = entry["pattern_complex_format"]
    else:
        p = entry["pattern"]
        if isinstance(p, list):
            p = [p[1], p[0]] if len(p) == 2 else [p[2], [p[1], p[0]]] if len(p) == 3 else p[0]

    def t(x):
        return tuple(t(y) for y in x) if isinstance(x, list) else x
    return t(p)


def torch_key(p):
    if isinstance(p, tuple):
        return tuple(torch_key(x) for x in p)
    return bc.op_name(p)


class Configs(unittest.TestCase):
    pass


def make_test(name):
    def test(self):
        torch_cfg = bc.get_backend_config(name)
        want = bc.to_dict(torch_cfg)
        got = bpcc_json(name)
        self.assertEqual(got["name"], want["name"])
        self.assertEqual(len(got["configs"]), len(want["configs"]))
        for i, (g, w) in enumerate(zip(got["configs"], want["configs"])):
            self.assertEqual(g, w, "%s entry #%d differs" % (name, i + 1))
        # PyTorch's own derived tables, recomputed from bpcc's dump
        keys = [complex_key(e) for e in got["configs"]]
        self.assertEqual(keys, [torch_key(p) for p in torch_cfg.configs])
        fusers = {complex_key(e) for e in got["configs"] if "fuser_method" in e}
        self.assertEqual(fusers, {torch_key(p) for p in bcu.get_fuser_method_mapping(torch_cfg)})
        fused = {e["fused_module"] for e in got["configs"] if "fused_module" in e}
        self.assertEqual(fused, {class_name(c) for c in bcu.get_fused_module_classes(torch_cfg)})
        qat = {e["qat_module"] for e in got["configs"] if "qat_module" in e}
        self.assertEqual(qat, {class_name(c) for c in bcu.get_qat_module_classes(torch_cfg)})
        ref = {}
        for e in got["configs"]:
            if "root_module" in e and "reference_quantized_module" in e:
                ref[e["root_module"]] = e["reference_quantized_module"]
        self.assertEqual(ref, {class_name(k): class_name(v) for k, v in
                               bcu.get_root_module_to_quantized_reference_module(torch_cfg).items()})
        n_dtype = {complex_key(e): len(e["dtype_configs"]) for e in got["configs"]}
        self.assertEqual(n_dtype, {torch_key(p): len(v) for p, v in
                                   bcu.get_pattern_to_dtype_configs(torch_cfg).items()})
        idx = {complex_key(e): e["input_type_to_index"] for e in got["configs"] if "input_type_to_index" in e}
        self.assertEqual(idx, {torch_key(p): v for p, v in
                               bcu.get_pattern_to_input_type_to_index(torch_cfg).items() if v})
    return test


for _n in NAMES:
    setattr(Configs, "test_equals_pytorch_" + _n, make_test(_n))


class Tool(unittest.TestCase):
    def test_regenerated_yaml_is_what_ships(self):
        """tools/python/make_builtin_configs.py reproduces patterns/*.yaml from this torch."""
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "tools", "python",
                                                             "make_builtin_configs.py"), d],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in NAMES + ["onednn", "executorch"]:
                with open(os.path.join(d, name + ".yaml")) as a, \
                        open(os.path.join(HERE, "..", "..", "patterns", name + ".yaml")) as b:
                    self.assertEqual(a.read(), b.read(), name)

    def test_ported_python_config_loads(self):
        """A user's Python BackendConfig, ported with `bpcc_torch backend-config`, loads in bpcc
        and keeps every pattern."""
        import tempfile
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "tools", "python"))
        r = subprocess.run([sys.executable, "-m", "bpcc_torch", "backend-config",
                            "torch.ao.quantization.backend_config:get_tensorrt_backend_config"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(r.stdout)
        try:
            got = bpcc_json(f.name)
            self.assertEqual(got, bc.to_dict(bc.get_backend_config("tensorrt")))
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    BPCC = sys.argv[1]
    conftools.run(Configs, Tool)
