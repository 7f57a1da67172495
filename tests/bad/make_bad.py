#!/usr/bin/env python3
"""Generate the malformed-input corpus in tests/bad/cases/ from the fixtures (deterministic).

Each case is one input (plus the files it names) that a bpcc command must reject cleanly: a
message `file:line:col: error: ...` (byte offsets for binary files), exit status 1, no crash, no
output file. Which command reads a case follows from its prefix (tests/bad/run_bad.py):
  m_*.bpcc        model text          bpcc fmt CASE -o OUT
  w_*.bpcc        model + weights     bpcc fmt CASE -o OUT   (the case's w_*.safetensors)
  c_*.yaml        backend config      bpcc config check CASE
  q_*.yaml        qconfig mapping     bpcc qconfig check CASE
  b_*.safetensors calibration batch   bpcc calibrate PREPARED(tiny_resnet) --data CASE -o OUT
  r_*.safetensors input batch         bpcc run tiny_resnet --data CASE -o OUT
  x_*.bpcc        a model that loads but the flow must refuse: bpcc quantize CASE -b fbgemm -q fbgemm
The expectations (exit status, location, message) are in tests/bad/expect.txt.

usage: make_bad.py [OUT_DIR]
"""
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures")
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "cases")

MODEL = open(os.path.join(FIX, "conv_bn_relu.bpcc")).read()
WEIGHTS = open(os.path.join(FIX, "conv_bn_relu.safetensors"), "rb").read()
HLEN = struct.unpack("<Q", WEIGHTS[:8])[0]
HEADER = json.loads(WEIGHTS[8:8 + HLEN])
DATA = WEIGHTS[8 + HLEN:]
CASES = {}


def put(name, data):
    CASES[name] = data.encode() if isinstance(data, str) else data


def model(name, text):
    put(name + ".bpcc", text)


def mutate(name, old, new, count=1):
    assert MODEL.count(old) >= 1, old
    model(name, MODEL.replace(old, new, count))


def safetensors(header, data, pad=True):
    h = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def weights(name, blob):
    """w_NAME.bpcc naming w_NAME.safetensors"""
    put(name + ".safetensors", blob)
    model(name, MODEL.replace('"conv_bn_relu.safetensors"', '"%s.safetensors"' % name))


# {---------- model text ----------
model("m_empty", "")
model("m_no_header", MODEL.split("\n", 1)[1])
mutate("m_bad_version", "bpcc-model 1", "bpcc-model 99")
model("m_truncated_in_module", MODEL[:MODEL.index("kernel_size") + 8])
model("m_truncated_in_node", MODEL[:MODEL.index("%bn = call_module") + 12])
model("m_truncated_no_output", MODEL[:MODEL.index("  %output")])
model("m_binary_garbage", bytes(range(256)) * 4)
model("m_nul_byte", MODEL.replace("relu (%bn,)", "relu\0(%bn,)"))
model("m_non_utf8_name", MODEL.encode().replace(b"module relu :", b"module r\xffelu :"))
model("m_non_utf8_string", MODEL.encode().replace(b'"zeros"', b'"ze\xc3\x28ros"'))
mutate("m_unknown_kind", "call_module relu", "call_everything relu")
mutate("m_undefined_node", "relu (%bn,)", "relu (%nope,)")
mutate("m_use_before_def", "conv (%x,)", "conv (%relu,)")
mutate("m_self_reference", "relu (%bn,)", "relu (%relu,)")
mutate("m_duplicate_node", "%bn = call_module bn", "%conv = call_module bn")
mutate("m_duplicate_module", "module relu : torch.nn.ReLU {inplace: False}",
       "module relu : torch.nn.ReLU {inplace: False}\nmodule relu : torch.nn.ReLU {inplace: True}")
mutate("m_duplicate_attr", "{inplace: False}", "{inplace: False, inplace: True}")
mutate("m_duplicate_tensor", "  param bias : f32[4]\nmodule bn", "  param bias : f32[4]\n  param bias : f32[4]\nmodule bn")
mutate("m_two_outputs", "  %output = output output (%relu,)", "  %output = output output (%relu,)\n  %output_1 = output output (%relu,)")
mutate("m_node_after_output", "  %output = output output (%relu,)", "  %output = output output (%relu,)\n  %late = call_module relu (%relu,)")
mutate("m_unknown_module", "call_module relu (%bn,)", "call_module missing (%bn,)")
mutate("m_unknown_dtype", "param bias : f32[4]", "param bias : f99[4]")
mutate("m_negative_dim", "param bias : f32[4]", "param bias : f32[-4]")
mutate("m_huge_shape", "param bias : f32[4]", "param bias : f32[1000000000, 1000000000, 1000000000]")
mutate("m_overflow_shape", "param bias : f32[4]", "param bias : f32[9223372036854775807, 9223372036854775807]")
mutate("m_too_many_dims", "param bias : f32[4]", "param bias : f32[" + ", ".join(["1"] * 9) + "]")
mutate("m_int_overflow", "groups: 1", "groups: 99999999999999999999999")
mutate("m_bad_float", "eps: 1e-05", "eps: 1e-05e3")
mutate("m_unterminated_string", 'padding_mode: "zeros"}', 'padding_mode: "zeros}')
mutate("m_bad_escape", 'padding_mode: "zeros"', 'padding_mode: "ze\\qros"')
mutate("m_unclosed_paren", "conv (%x,)", "conv (%x,")
mutate("m_unclosed_brace", "{inplace: False}", "{inplace: False")
mutate("m_deep_nesting", "conv (%x,)", "conv (%x, " + "(" * 5000 + ")" * 5000 + ")")
mutate("m_deep_list_attr", "{inplace: False}", "{inplace: False, x: " + "[" * 100 + "]" * 100 + "}")
mutate("m_weights_missing", '"conv_bn_relu.safetensors"', '"no_such_file.safetensors"')
mutate("m_weights_is_dir", '"conv_bn_relu.safetensors"', '"."')
mutate("m_shape_mismatch_decl", "param weight : f32[4, 3, 3, 3]", "param weight : f32[4, 3, 3, 2]")
mutate("m_dtype_mismatch_decl", "param bias : f32[4]\nmodule bn", "param bias : i64[4]\nmodule bn")
mutate("m_tensor_not_in_weights", "  param bias : f32[4]\nmodule bn", "  param bias : f32[4]\n  param extra : f32[4]\nmodule bn")
mutate("m_placeholder_args", "placeholder x ()", "placeholder x (%x,)")
mutate("m_output_no_args", "output output (%relu,)", "output output ()")
mutate("m_bad_meta", ": f32[1, 4, 8, 8]\n  %bn", ": f32[1, 4, 8\n  %bn")
mutate("m_garbage_after_node", "relu (%bn,) : f32[1, 4, 8, 8]", "relu (%bn,) : f32[1, 4, 8, 8] trailing junk")
mutate("m_inf_in_shape", "param bias : f32[4]", "param bias : f32[inf]")
# }

# {---------- weights (safetensors) ----------
weights("w_empty", b"")
weights("w_seven_bytes", b"\x10\x00\x00\x00\x00\x00\x00")
weights("w_header_past_eof", struct.pack("<Q", 1 << 20) + b"{}")
weights("w_header_huge", struct.pack("<Q", 1 << 62) + b"{}")
weights("w_header_not_json", struct.pack("<Q", 8) + b"{nope!!}")
weights("w_header_not_object", safetensors([1, 2, 3], b""))
weights("w_truncated_data", WEIGHTS[:-10])
weights("w_truncated_header", WEIGHTS[:8 + HLEN // 2])
weights("w_trailing_bytes", WEIGHTS + b"\0" * 16)


def edit(**change):
    h = json.loads(json.dumps(HEADER))
    for k, v in change.items():
        key = k.replace("__", ".")
        if v is None:
            del h[key]
        else:
            h[key] = v
    return h


weights("w_bad_dtype", safetensors(edit(bn__bias={"dtype": "F99", "shape": [4], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
weights("w_negative_shape", safetensors(edit(bn__bias={"dtype": "F32", "shape": [-4], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
weights("w_shape_not_list", safetensors(edit(bn__bias={"dtype": "F32", "shape": 4, "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
weights("w_offsets_past_eof", safetensors(edit(bn__bias={"dtype": "F32", "shape": [4], "data_offsets": [8, 1 << 40]}), DATA))
weights("w_offsets_reversed", safetensors(edit(bn__bias={"dtype": "F32", "shape": [4], "data_offsets": [24, 8]}), DATA))
o = HEADER["bn.running_mean"]["data_offsets"]
weights("w_overlap", safetensors(edit(bn__bias={"dtype": "F32", "shape": [4], "data_offsets": o}), DATA))
weights("w_size_mismatch", safetensors(edit(bn__bias={"dtype": "F32", "shape": [5], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
weights("w_huge_shape", safetensors(edit(bn__bias={"dtype": "F32", "shape": [1 << 40, 1 << 40], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
weights("w_missing_tensor", safetensors(edit(conv__weight=None), DATA))
weights("w_metadata_not_strings", safetensors(dict(HEADER, __metadata__={"format": 1}), DATA))
weights("w_too_many_dims", safetensors(edit(bn__bias={"dtype": "F32", "shape": [1] * 9 + [4], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
dup = WEIGHTS[8:8 + HLEN].decode().rstrip()
dup = dup[:-1] + ',"bn.bias":' + json.dumps(HEADER["bn.bias"], separators=(",", ":")) + "}"
dup = dup.encode() + b" " * (-len(dup) % 8)
weights("w_duplicate_key", struct.pack("<Q", len(dup)) + dup + DATA)
nan_data = bytearray(DATA)
b0, b1 = HEADER["bn.running_var"]["data_offsets"]
nan_data[b0:b1] = struct.pack("<4f", float("nan"), 1, 1, 1)
weights("w_wrong_dtype_for_model", safetensors(edit(bn__bias={"dtype": "I32", "shape": [4], "data_offsets": HEADER["bn.bias"]["data_offsets"]}), DATA))
# }

# {---------- backend configs ----------
put("c_empty.yaml", "")
put("c_not_a_mapping.yaml", "- just\n- a list\n")
put("c_tab.yaml", "name: t\nconfigs:\n\t- pattern: torch.nn.Linear\n")
put("c_unclosed_flow.yaml", "name: t\nconfigs: [{pattern: torch.nn.Linear\n")
put("c_non_utf8.yaml", b"name: t\xff\xfe\nconfigs: []\n")
put("c_binary.yaml", bytes(range(1, 256)))
put("c_billion_laughs.yaml", "a: &a [x, x, x, x, x, x, x, x, x, x]\n" +
    "".join("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((chr(98 + i), chr(98 + i)) + (chr(97 + i),) * 10)
            for i in range(8)) + "name: t\nconfigs: *i\n")
put("c_deep_nesting.yaml", "name: t\nconfigs: " + "[" * 2000 + "]" * 2000 + "\n")
put("c_alias_cycle_like.yaml", "name: t\nconfigs:\n  - &p {pattern: torch.nn.Linear, fused_module: *p}\n")
put("c_duplicate_key.yaml", "name: t\nname: u\nconfigs: []\n")
put("c_unknown_key.yaml", "name: t\nconfigs:\n  - pattern: torch.nn.Linear\n    observation: yes\n")
put("c_pattern_wrong_type.yaml", "name: t\nconfigs:\n  - pattern: 42\n")
put("c_pattern_empty_list.yaml", "name: t\nconfigs:\n  - pattern: []\n")
put("c_nan_bound.yaml", "name: t\nconfigs:\n  - pattern: torch.nn.Linear\n    dtype_configs:\n      - {input_dtype: {dtype: quint8, scale_min_lower_bound: .nan}, output_dtype: quint8}\n")
put("c_inf_bound.yaml", "name: t\nconfigs:\n  - pattern: torch.nn.Linear\n    dtype_configs:\n      - {input_dtype: {dtype: quint8, scale_max_upper_bound: -.inf}, output_dtype: quint8}\n")
put("c_huge_int.yaml", "name: t\nconfigs:\n  - pattern: torch.nn.Linear\n    dtype_configs:\n      - {input_dtype: {dtype: quint8, quant_min_lower_bound: 99999999999999999999999}, output_dtype: quint8}\n")
put("c_bad_dtype.yaml", "name: t\nconfigs:\n  - pattern: torch.nn.Linear\n    dtype_configs:\n      - {input_dtype: quint9, output_dtype: quint8}\n")
put("c_multiple_documents.yaml", "name: t\nconfigs: []\n---\nname: u\nconfigs: []\n")
put("c_extends_missing.yaml", "name: t\nextends: no_such_backend\nconfigs: []\n")
put("c_extends_self.yaml", "name: t\nextends: c_extends_self.yaml\nconfigs: []\n")
put("c_anchor_undefined.yaml", "name: t\nconfigs: *nothing\n")
# }

# {---------- qconfig mappings ----------
put("q_empty.yaml", "")
put("q_not_a_mapping.yaml", "42\n")
put("q_unknown_observer.yaml", "name: q\nglobal: {activation: {observer: GuessObserver}, weight: {observer: MinMaxObserver}}\n")
put("q_bad_dtype.yaml", "name: q\nglobal: {activation: {observer: MinMaxObserver, dtype: float99}, weight: {observer: MinMaxObserver}}\n")
put("q_quant_range_inverted.yaml", "name: q\nglobal: {activation: {observer: MinMaxObserver, quant_min: 200, quant_max: 10}, weight: {observer: MinMaxObserver, dtype: qint8}}\n")
put("q_nan_eps.yaml", "name: q\nglobal: {activation: {observer: MinMaxObserver, eps: .nan}, weight: {observer: MinMaxObserver, dtype: qint8}}\n")
put("q_negative_bins.yaml", "name: q\nglobal: {activation: {observer: HistogramObserver, bins: -5}, weight: {observer: MinMaxObserver, dtype: qint8}}\n")
put("q_bad_regex.yaml", "name: q\nmodule_name_regex:\n  - {regex: 'features[', qconfig: null}\n")
put("q_billion_laughs.yaml", "a: &a [x, x, x, x, x, x, x, x, x, x]\n" +
    "".join("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n" % ((chr(98 + i), chr(98 + i)) + (chr(97 + i),) * 10)
            for i in range(8)) + "name: q\nobject_type: *i\n")
put("q_deep_nesting.yaml", "name: q\nglobal: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n")
put("q_non_utf8.yaml", b"name: q\xc3\x28\nglobal: null\n")
put("q_type_wrong.yaml", "name: q\nobject_type:\n  - {type: 7, qconfig: null}\n")
put("q_order_index_negative.yaml", "name: q\nmodule_name_object_type_order:\n  - {name: '', type: torch.add, index: -1, qconfig: null}\n")
put("q_fixed_qparams_no_scale.yaml", "name: q\nglobal: {activation: {observer: FixedQParamsObserver}, weight: {observer: MinMaxObserver, dtype: qint8}}\n")
# }


# {---------- batches ----------
def batch(name, header, data):
    put(name + ".safetensors", safetensors(header, data))


ok = struct.pack("<%df" % (2 * 3 * 8 * 8), *[((i * 7919) % 23 - 11) / 8.0 for i in range(2 * 3 * 8 * 8)])
batch("b_wrong_dtype", {"x": {"dtype": "F64", "shape": [2, 3, 8, 4], "data_offsets": [0, len(ok)]}}, ok)
batch("b_wrong_shape", {"x": {"dtype": "F32", "shape": [2, 4, 8, 6], "data_offsets": [0, len(ok)]}}, ok)
batch("b_missing_input", {"y": {"dtype": "F32", "shape": [2, 3, 8, 8], "data_offsets": [0, len(ok)]}}, ok)
batch("b_wrong_rank", {"x": {"dtype": "F32", "shape": [6, 8, 8], "data_offsets": [0, len(ok)]}}, ok)
# an image's bytes for a float input: PyTorch's convolutions refuse them, and calibrating on
# 0..255 where the model takes normalized values would give wrong qparams
batch("b_integers_for_a_float_input", {"x": {"dtype": "U8", "shape": [2, 3, 8, 8], "data_offsets": [0, 2 * 3 * 8 * 8]}},
      bytes(range(256)) * 1 + bytes(2 * 3 * 8 * 8 - 256))
put("b_truncated.safetensors", safetensors({"x": {"dtype": "F32", "shape": [2, 3, 8, 8], "data_offsets": [0, len(ok)]}}, ok)[:-100])
put("b_not_safetensors.safetensors", b"this is not a safetensors file at all, just text\n")
nan = bytearray(ok)
nan[40:44] = struct.pack("<f", float("nan"))
batch("b_nan_values", {"x": {"dtype": "F32", "shape": [2, 3, 8, 8], "data_offsets": [0, len(ok)]}}, bytes(nan))
# quantized batches (docs/FORMAT.md): integer values with their qparams beside them
q8 = bytes(range(256)) + bytes(2 * 3 * 8 * 8 - 256)
f1, i1 = struct.pack("<f", 0.05), struct.pack("<q", 128)


def quantized(name, values_dtype, values, scale=f1, zero_point=i1, extra=None, drop=()):
    h = {"x": {"dtype": values_dtype, "shape": [2, 3, 8, 8], "data_offsets": [0, len(values)]}}
    data = values
    for key, dt, b in ((".scale", "F32", scale), (".zero_point", "I64", zero_point)) + tuple(extra or ()):
        if key in drop:
            continue
        n = len(b) // (8 if dt == "I64" else 4)
        h["x" + key] = {"dtype": dt, "shape": [n] if n > 1 else [],
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    batch(name, h, data)


quantized("b_quantized_without_zero_point", "U8", q8, drop=(".zero_point",))
quantized("b_quantized_float_values", "F32", ok)
quantized("b_quantized_negative_scale", "U8", q8, scale=struct.pack("<f", -0.05))
quantized("b_quantized_zero_point_out_of_range", "U8", q8, zero_point=struct.pack("<q", 300))
quantized("b_quantized_axis_out_of_range", "U8", q8, extra=((".axis", "I64", struct.pack("<q", 4)),))
quantized("b_quantized_channel_count", "U8", q8, scale=struct.pack("<2f", 0.1, 0.2), zero_point=struct.pack("<2q", 0, 0),
          extra=((".axis", "I64", struct.pack("<q", 1)),))
batch("r_wrong_shape", {"x": {"dtype": "F32", "shape": [2, 3, 4, 16], "data_offsets": [0, len(ok)]}}, ok)
batch("r_missing_input", {"input": {"dtype": "F32", "shape": [2, 3, 8, 8], "data_offsets": [0, len(ok)]}}, ok)
put("r_empty.safetensors", b"")
# }

# {---------- models that load but the flow refuses ----------
x = MODEL.replace('"conv_bn_relu.safetensors"', '"x_nan_running_var.safetensors"')
put("x_nan_running_var.bpcc", x)
put("x_nan_running_var.safetensors", safetensors(HEADER, bytes(nan_data)))
x2 = MODEL.replace('"conv_bn_relu.safetensors"', '"x_unknown_op.safetensors"').replace(
    "%relu = call_module relu (%bn,)", "%relu = call_function torch.frobnicate (%bn,)")
put("x_unknown_op.bpcc", x2)
put("x_unknown_op.safetensors", WEIGHTS)
# convolution padding the interpreter must refuse: reflect padding as large as the input (it read
# outside the image), and a padding mode that does not exist (it ran as zeros)
for name, mode, pad in (("x_reflect_pad_too_large", "reflect", "(8, 1)"), ("x_padding_mode_unknown", "mirror", "(1, 1)")):
    put(name + ".bpcc", MODEL.replace('"conv_bn_relu.safetensors"', '"%s.safetensors"' % name).replace(
        'padding: (1, 1), dilation: (1, 1), groups: 1, bias: True, padding_mode: "zeros"',
        'padding: %s, dilation: (1, 1), groups: 1, bias: True, padding_mode: "%s"' % (pad, mode)))
    put(name + ".safetensors", WEIGHTS)
# batch-norm statistics for 5 channels after a conv with 4: folding must refuse
x3 = MODEL.replace('"conv_bn_relu.safetensors"', '"x_bn_size_mismatch.safetensors"').replace("num_features: 4", "num_features: 5")
x3 = x3.replace("param weight : f32[4]\n  param bias : f32[4]\n  buffer running_mean : f32[4]\n  buffer running_var : f32[4]",
                "param weight : f32[5]\n  param bias : f32[5]\n  buffer running_mean : f32[5]\n  buffer running_var : f32[5]")
put("x_bn_size_mismatch.bpcc", x3)
tensors, blob = {}, b""
for key in sorted(HEADER):
    if key == "__metadata__":
        continue
    t = HEADER[key]
    raw = DATA[t["data_offsets"][0]:t["data_offsets"][1]]
    shape = t["shape"]
    if key.startswith("bn.") and key != "bn.num_batches_tracked":
        raw, shape = raw + raw[:4], [5]
    tensors[key] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [len(blob), len(blob) + len(raw)]}
    blob += raw
put("x_bn_size_mismatch.safetensors", safetensors(tensors, blob))
# a graph input the calibration batches do not have
x4 = MODEL.replace('"conv_bn_relu.safetensors"', '"x_second_input.safetensors"').replace(
    "  %x = placeholder x () : f32[1, 3, 8, 8]", "  %x = placeholder x () : f32[1, 3, 8, 8]\n  %mask = placeholder mask () : f32[1, 3, 8, 8]")
put("x_second_input.bpcc", x4)
put("x_second_input.safetensors", WEIGHTS)
# }

put("conv_bn_relu.safetensors", WEIGHTS)  # the weights the m_ cases name (not a case)
os.makedirs(OUT, exist_ok=True)
for f in os.listdir(OUT):
    os.unlink(os.path.join(OUT, f))
for name, data in sorted(CASES.items()):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print("%d files in %s" % (len(CASES), OUT))
