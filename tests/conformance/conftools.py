"""What the conformance scripts share: the skip (exit 77, meson's code for it) when PyTorch is not
installed, the import path of the bridge (tools/python), and the runner, which ends with the
"N passed, N failed" line.
"""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "python"))


def require_torch(torchvision=True):
    """Exit 77 unless torch (and torchvision) can be imported."""
    try:
        import torch  # noqa: F401
        if torchvision:
            import torchvision as _tv  # noqa: F401
    except ImportError:
        print("%s not installed: skipping" % ("torch / torchvision" if torchvision else "torch"))
        sys.exit(77)


class TmpCase(unittest.TestCase):
    """A test case with a temporary directory of its own per test (self.tmp), removed after it."""
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)


def refs(gm):
    """{module name: (type name, {attr: value} of its *_qscheme / *_dtype, {buffer: tensor})} of a
    converted model's reference modules"""
    out = {}
    for name, m in gm.named_modules():
        if "quantized.reference" in type(m).__module__:
            attrs = {k: v for k, v in vars(m).items() if k.endswith(("_qscheme", "_dtype"))}
            out[name] = (type(m).__name__, attrs, dict(m.named_buffers()))
    return out


def graph_of(gm):
    """a GraphModule's nodes as (op, name, target, args, kwargs), node arguments by name"""
    import torch.fx

    def arg(a):
        if isinstance(a, torch.fx.Node):
            return "%" + a.name
        if isinstance(a, (tuple, list)):
            return tuple(arg(x) for x in a)
        return str(a)
    return [(n.op, n.name, str(n.target), arg(n.args), arg(tuple(sorted(n.kwargs.items())))) for n in gm.graph.nodes]


def small_mvit(v2, residual_with_cls_embed=False, spatial=(32, 32), frames=8, seed=0):
    """torchvision's MViT (the class mvit_v1_b and mvit_v2_s build) with three small blocks: pooled
    keys and values, a pooled query (stride 2) in the second, 8 to 24 channels, one or two heads.
    v1: absolute positional embedding (PositionalEncoding's in-place adds); v2: the relative
    position bias (_add_rel_pos), residual pooling (_add_shortcut) and the projection after the
    attention. The tables and embeddings torchvision starts at zero are drawn at random, so that
    they count. The input: [N, 3, frames, *spatial]."""
    import torch
    from torchvision.models.video.mvit import MViT, MSBlockConfig
    cfg = [MSBlockConfig(num_heads=1, input_channels=8, output_channels=16, kernel_q=[], kernel_kv=[3, 3, 3],
                         stride_q=[], stride_kv=[1, 2, 2]),
           MSBlockConfig(num_heads=2, input_channels=16, output_channels=16, kernel_q=[3, 3, 3], kernel_kv=[3, 3, 3],
                         stride_q=[1, 2, 2], stride_kv=[1, 1, 1]),
           MSBlockConfig(num_heads=2, input_channels=16, output_channels=24, kernel_q=[], kernel_kv=[3, 3, 3],
                         stride_q=[], stride_kv=[1, 1, 1])]
    torch.manual_seed(seed)
    m = MViT(spatial_size=tuple(spatial), temporal_size=frames, block_setting=cfg, residual_pool=v2,
             residual_with_cls_embed=residual_with_cls_embed, rel_pos_embed=v2, proj_after_attn=v2,
             num_classes=5, dropout=0.0).eval()
    with torch.no_grad():
        for n, p in m.named_parameters():
            if "rel_pos" in n or "pos" in n or "class_token" in n:
                p.normal_()
    return m


def run(*cases):
    """Run the test cases, print the summary line, exit 0 or 1."""
    suite = unittest.TestSuite()
    for case in cases:
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    bad = len(result.failures) + len(result.errors)
    print("%d passed, %d failed" % (result.testsRun - bad, bad))
    sys.exit(0 if bad == 0 else 1)
