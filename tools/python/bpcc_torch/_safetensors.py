"""safetensors reading and writing with the layout bpcc's C writer uses (docs/FORMAT.md):
entries ordered by element size (largest first) then key, compact JSON header with
{"__metadata__": {"format": "bpcc"}}, padded with spaces to a multiple of 8 bytes."""
import json
import os
import struct
import tempfile

import numpy as np
import torch

# torch dtype -> (safetensors name, element size, numpy dtype of the carrier, IR short name)
DTYPES = {
    torch.float32: ("F32", 4, np.float32, "f32"),
    torch.float64: ("F64", 8, np.float64, "f64"),
    torch.float16: ("F16", 2, np.float16, "f16"),
    torch.bfloat16: ("BF16", 2, np.int16, "bf16"),
    torch.int64: ("I64", 8, np.int64, "i64"),
    torch.int32: ("I32", 4, np.int32, "i32"),
    torch.int16: ("I16", 2, np.int16, "i16"),
    torch.int8: ("I8", 1, np.int8, "i8"),
    torch.uint8: ("U8", 1, np.uint8, "u8"),
    torch.bool: ("BOOL", 1, np.uint8, "bool"),
}
BY_NAME = {v[0]: k for k, v in DTYPES.items()}


def tensor_bytes(t):
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    elif t.dtype == torch.bool:
        t = t.to(torch.uint8)
    return t.numpy().tobytes()


def _check_target(path):
    """An output path must name a regular file or nothing: a directory would fail only at the
    rename, after the files written before it had taken their places, and a device or FIFO
    would be replaced by a regular file."""
    if not path:
        raise ValueError("cannot write output: its file name is empty")
    if os.path.exists(path) and not os.path.isfile(path):
        raise ValueError("cannot write output '%s': it is %s (give a file name)" % (
            path, "a directory" if os.path.isdir(path) else "not a regular file"))


def atomic_write_all(files):
    """files: (path, byte chunks) pairs. Each is written to a temporary file beside its path, and
    only when all are complete are they renamed over their paths, in order (a model's weights
    before its text); a failure before that leaves every path as it was and no temporary."""
    for path, _ in files:
        _check_target(path)
    tmps = []
    try:
        umask = os.umask(0)
        os.umask(umask)
        for path, chunks in files:
            d = os.path.dirname(os.path.abspath(path))
            fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp", dir=d)
            tmps.append(tmp)
            with os.fdopen(fd, "wb") as f:
                for c in chunks:
                    f.write(c)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~umask)
        for (path, _), tmp in zip(files, tmps):
            os.replace(tmp, path)
    except BaseException:
        for tmp in tmps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise


def atomic_write(path, chunks):
    """Write the byte chunks to a temporary file beside path, then rename it over path."""
    atomic_write_all([(path, chunks)])


# a quantized tensor's dtype -> the dtype of its integer values
QUANTIZED = {torch.quint8: torch.uint8, torch.qint8: torch.int8, torch.qint32: torch.int32}
INTEGERS = {v: k for k, v in QUANTIZED.items()}


def quantized_entries(key, t):
    """A quantized tensor as bpcc's batches and `bpcc run` store one (docs/FORMAT.md): its integer
    values under its key, beside them `<key>.scale`, `<key>.zero_point` and, per channel,
    `<key>.axis`."""
    out = [(key, t.int_repr())]
    if t.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        out += [(key + ".scale", torch.tensor(t.q_scale(), dtype=torch.float32)),
                (key + ".zero_point", torch.tensor(t.q_zero_point(), dtype=torch.int64))]
    else:
        out += [(key + ".scale", t.q_per_channel_scales().float()),
                (key + ".zero_point", t.q_per_channel_zero_points().long()),
                (key + ".axis", torch.tensor(t.q_per_channel_axis(), dtype=torch.int64))]
    return out


def encode(tensors):
    """tensors: list of (key, torch.Tensor), quantized ones stored by quantized_entries. Returns the
    file's byte chunks."""
    items = []
    for key, t in tensors:
        if t.is_quantized:
            items += quantized_entries(key, t)
            continue
        if t.dtype not in DTYPES:
            raise ValueError("tensor '%s' has dtype %s, which bpcc cannot store" % (key, t.dtype))
        items.append((key, t))
    seen = set()
    for key, _ in items:
        if key in seen:  # the header would keep one of them, the other's bytes no one's
            raise ValueError("two tensors under one name '%s'" % key)
        seen.add(key)
    items.sort(key=lambda kt: (-DTYPES[kt[1].dtype][1], kt[0]))
    header = {"__metadata__": {"format": "bpcc"}}
    blobs = []
    off = 0
    for key, t in items:
        b = tensor_bytes(t)
        header[key] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape),
                       "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    return [struct.pack("<Q", len(h)), h] + blobs


def write(path, tensors):
    atomic_write(path, encode(tensors))


def read(path, quantized=False):
    """Returns {key: torch.Tensor} (copies, writable); with `quantized`, a tensor stored with its
    qparams beside it (quantized_entries) as one quantized tensor."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("%s: header length runs past the end of the file" % path)
    header = json.loads(data[8:8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for key, e in header.items():
        if key == "__metadata__":
            continue
        dtype = BY_NAME.get(e["dtype"])
        if dtype is None:
            raise ValueError("%s: tensor '%s' has unsupported dtype %s" % (path, key, e["dtype"]))
        b, end = e["data_offsets"]
        arr = np.frombuffer(data, dtype=DTYPES[dtype][2], count=(end - b) // DTYPES[dtype][1],
                            offset=base + b).copy()
        t = torch.from_numpy(arr)
        if dtype == torch.bfloat16:
            t = t.view(torch.bfloat16)
        elif dtype == torch.bool:
            t = t.to(torch.bool)
        out[key] = t.reshape(e["shape"])
    for key in [k for k in out if quantized and k + ".scale" in out and out[k].dtype in INTEGERS]:
        scale, zero_point = out.pop(key + ".scale"), out.pop(key + ".zero_point")
        axis = out.pop(key + ".axis", None)
        if axis is None:
            out[key] = torch._make_per_tensor_quantized_tensor(out[key], float(scale), int(zero_point))
        else:
            out[key] = torch._make_per_channel_quantized_tensor(out[key], scale.double(), zero_point, int(axis))
    return out
