#!/usr/bin/env python3
"""Generates the safetensors fixtures used by test/worker/io/.

Run from anywhere:  python3 test/data/safetensors/make_golden.py
Needs `pip install safetensors numpy` (the reference implementation, Rust behind a Python binding).
The outputs are committed; rerunning must reproduce them byte for byte.

  golden.safetensors         F32/F16/BF16 tensors incl. a scalar and an empty tensor, with metadata,
                             written by the reference writer (values asserted in golden_test.cc)
  golden_f32.safetensors     F32 only, with metadata: our writer must produce the identical bytes
  sharded/                   model.safetensors.index.json + two shards
  single/model.safetensors   a one-file model directory
  bad/*.safetensors          malformed files (each must be rejected with INVALID_ARGUMENT)
  bad/index_*/               malformed sharded model directories
"""
import json
import os
import shutil
import struct

import numpy as np
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))


def bf16_bits(values):
    """float32 values that are exactly representable in bf16 -> their bf16 bit patterns."""
    bits = np.array(values, dtype=np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "value not exact in bf16"
    return (bits >> 16).astype(np.uint16)


def save_with_bf16(numpy_tensors, bf16_tensors, path, metadata=None):
    """Reference writer for numpy tensors plus bf16 ones given as uint16 bit patterns."""
    keep = []
    specs = {}
    for name, arr in numpy_tensors.items():
        assert arr.flags.c_contiguous  # (np.ascontiguousarray would turn a scalar into shape [1])
        keep.append(arr)
        specs[name] = TensorSpec(dtype=arr.dtype.name, shape=arr.shape, data_ptr=arr.ctypes.data,
                                 data_len=arr.nbytes)
    for name, arr in bf16_tensors.items():
        assert arr.dtype == np.uint16 and arr.flags.c_contiguous
        keep.append(arr)
        specs[name] = TensorSpec(dtype="bfloat16", shape=arr.shape, data_ptr=arr.ctypes.data,
                                 data_len=arr.nbytes)
    serialize_file(specs, path, metadata=metadata)


def raw_file(header, data=b"", pad=True, header_len=None):
    """A safetensors file written by hand, for the malformed corpus."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    n = len(text) if header_len is None else header_len
    return struct.pack("<Q", n) + text + data


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def make_golden():
    f32 = np.array([[1.0, -2.5, 3.25], [0.0, -0.0, 1e-3]], dtype=np.float32)
    f16 = np.array([1.0, -2.0, 0.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08, np.inf,
                    -np.inf], dtype=np.float16)
    scalar = np.array(42.5, dtype=np.float32)
    empty = np.zeros((0, 3), dtype=np.float16)
    bf16 = bf16_bits([1.0, -2.0, 3.140625, 1.5 * 2.0**100, -0.0, 2.0**-130])
    save_with_bf16({"f32": f32, "f16": f16, "scalar": scalar, "empty": empty}, {"bf16": bf16},
                   os.path.join(HERE, "golden.safetensors"),
                   metadata={"format": "pt"})  # one key: the reference's map order is random
    save_file({"b": np.arange(6, dtype=np.float32).reshape(2, 3),
               "a": np.array([0.5, -1.5], dtype=np.float32),
               "s": np.array(7.0, dtype=np.float32)},
              os.path.join(HERE, "golden_f32.safetensors"), metadata={"format": "pt"})


def make_models():
    single = os.path.join(HERE, "single")
    os.makedirs(single, exist_ok=True)
    save_file({"w": np.array([1.0, 2.0], dtype=np.float32)}, os.path.join(single, "model.safetensors"))

    sharded = os.path.join(HERE, "sharded")
    os.makedirs(sharded, exist_ok=True)
    shard1 = {"embed.weight": np.arange(4, dtype=np.float32).reshape(2, 2),
              "layer.0.w": np.array([1.5, -1.5], dtype=np.float16)}
    shard2 = {"layer.1.w": np.array([2.0, 4.0, 8.0], dtype=np.float32),
              "lm_head.weight": np.array([-1.0], dtype=np.float32)}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    save_file(shard1, os.path.join(sharded, names[0]))
    save_file(shard2, os.path.join(sharded, names[1]))
    weight_map = {k: names[0] for k in shard1}
    weight_map.update({k: names[1] for k in shard2})
    index = {"metadata": {"total_size": 32}, "weight_map": dict(sorted(weight_map.items()))}
    write(os.path.join(sharded, "model.safetensors.index.json"),
          (json.dumps(index, indent=2) + "\n").encode())


def make_bad():
    bad = os.path.join(HERE, "bad")
    shutil.rmtree(bad, ignore_errors=True)
    ok = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    eight = b"\0" * 8
    files = {
        "too_short.safetensors": b"\x10\0\0",
        "header_len_too_big.safetensors": raw_file({"t": ok}, eight, header_len=1 << 40),
        "header_len_past_end.safetensors": raw_file({"t": ok}, b"", header_len=4096),
        "truncated_data.safetensors": raw_file({"t": ok}, b"\0" * 5),
        "bad_json.safetensors": raw_file(b'{"t": {"dtype": "F32", "shape": [2]', eight),
        "not_object.safetensors": raw_file(b"[1, 2, 3]", eight),
        "unknown_dtype.safetensors": raw_file({"t": {"dtype": "I64", "shape": [1],
                                                     "data_offsets": [0, 8]}}, eight),
        "overlapping_offsets.safetensors": raw_file(
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 12),
        "out_of_range_offsets.safetensors": raw_file(
            {"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, eight),
        "begin_after_end.safetensors": raw_file(
            {"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}}, eight),
        "shape_size_mismatch.safetensors": raw_file(
            {"t": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, eight),
        "negative_shape.safetensors": raw_file(
            {"t": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, eight),
        "shape_overflow.safetensors": raw_file(
            {"t": {"dtype": "F32", "shape": [2**62, 2**62], "data_offsets": [0, 8]}}, eight),
        "missing_data_offsets.safetensors": raw_file({"t": {"dtype": "F32", "shape": [2]}}, eight),
        "bad_metadata.safetensors": raw_file({"__metadata__": {"k": 1}, "t": ok}, eight),
    }
    for name, content in files.items():
        write(os.path.join(bad, name), content)

    weights = {"w": np.array([1.0], dtype=np.float32)}
    d = os.path.join(bad, "index_missing_shard")
    os.makedirs(d)
    save_file(weights, os.path.join(d, "shard1.safetensors"))
    write(os.path.join(d, "model.safetensors.index.json"), json.dumps(
        {"weight_map": {"w": "shard1.safetensors", "v": "shard2.safetensors"}}).encode())

    d = os.path.join(bad, "index_parent_path")
    os.makedirs(d)
    write(os.path.join(d, "model.safetensors.index.json"), json.dumps(
        {"weight_map": {"w": "../single/model.safetensors"}}).encode())

    d = os.path.join(bad, "index_tensor_not_in_shard")
    os.makedirs(d)
    save_file(weights, os.path.join(d, "shard1.safetensors"))
    write(os.path.join(d, "model.safetensors.index.json"), json.dumps(
        {"weight_map": {"w": "shard1.safetensors", "missing": "shard1.safetensors"}}).encode())


if __name__ == "__main__":
    make_golden()
    make_models()
    make_bad()
