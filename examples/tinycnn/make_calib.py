#!/usr/bin/env python3
"""Writes examples/tinycnn/calib/batch<i>.safetensors: four calibration batches for tinycnn (input
x: float32 [1, 3, 32, 32]), deterministic pseudo-random values in [-2, 2) (no dependencies)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(HERE, "calib")
os.makedirs(out, exist_ok=True)
state = 12345
for b in range(4):
    vals = []
    for _ in range(3 * 32 * 32):
        state = (state * 1103515245 + 12345) % (1 << 31)
        vals.append((state / (1 << 31)) * 4.0 - 2.0)
    data = struct.pack("<%df" % len(vals), *vals)
    header = json.dumps({"x": {"dtype": "F32", "shape": [1, 3, 32, 32], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    with open(os.path.join(out, "batch%d.safetensors" % b), "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + data)
