#!/usr/bin/env python3
"""Checks files that rml wrote with the reference readers (safetensors, NumPy).

Usage: read_rml_files.py DIR

DIR holds what `RML_INTEROP_OUT=DIR cargo test -p rml-host --test interop
rml_writes_files_for_python` writes: safetensors files, .npy files, an .npz archive, a
checkpoint, and manifest.json listing each tensor's dtype, shape and values. Every
tensor must load with the expected dtype, shape and values; where the reference writer
is deterministic, re-saving the loaded arrays must give rml's exact bytes.
"""

import io
import json
import os
import sys

import numpy as np
import safetensors
import safetensors.numpy

NP_DTYPE = {
    "F64": "float64", "F32": "float32", "F16": "float16", "I64": "int64", "I32": "int32",
    "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
}


def bf16_to_f32(raw):
    bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return bits.view(np.float32)


def load(path, name, dtype):
    if path.endswith(".safetensors"):
        if dtype == "BF16":
            with safetensors.safe_open(path, framework="numpy") as f:
                pass  # the header parses with the official reader
            data = open(path, "rb").read()
            n = int.from_bytes(data[:8], "little")
            header = json.loads(data[8:8 + n])
            begin, end = header[name]["data_offsets"]
            arr = bf16_to_f32(data[8 + n + begin:8 + n + end]).reshape(header[name]["shape"])
            return arr, "BF16"
        with safetensors.safe_open(path, framework="numpy") as f:
            return f.get_tensor(name), None
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return z[name], None
    return np.load(path, allow_pickle=False), None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    failures = []
    for e in manifest:
        path = os.path.join(out, e["file"])
        where = f"{e['file']}:{e['name']}"
        try:
            arr, forced = load(path, e["name"], e["dtype"])
            if forced is None and arr.dtype != np.dtype(NP_DTYPE[e["dtype"]]):
                failures.append(f"{where}: dtype {arr.dtype}, expected {e['dtype']}")
                continue
            if list(arr.shape) != e["shape"]:
                failures.append(f"{where}: shape {list(arr.shape)}, expected {e['shape']}")
                continue
            got = np.asarray(arr, dtype=np.float64).reshape(-1)
            want = np.asarray(e["values"], dtype=np.float64)
            if got.shape != want.shape or not np.array_equal(got, want):
                failures.append(f"{where}: values differ")
        except Exception as exc:  # report every file, not only the first failure
            failures.append(f"{where}: {type(exc).__name__}: {exc}")

    # Byte identity with the reference writers.
    path = os.path.join(out, "rml_dtypes.safetensors")
    arrays = safetensors.numpy.load_file(path)
    with safetensors.safe_open(path, framework="numpy") as f:
        meta = f.metadata()
    if meta != {"writer": "rml"}:
        failures.append(f"rml_dtypes.safetensors: metadata {meta}")
    if safetensors.numpy.save(arrays, metadata=meta) != open(path, "rb").read():
        failures.append("rml_dtypes.safetensors: bytes differ from safetensors.numpy.save")
    for e in manifest:
        if e["file"].endswith(".npy") and e["file"] != "rml_transposed.npy":
            buf = io.BytesIO()
            np.save(buf, np.load(os.path.join(out, e["file"])))
            if buf.getvalue() != open(os.path.join(out, e["file"]), "rb").read():
                failures.append(f"{e['file']}: bytes differ from np.save")
    with safetensors.safe_open(os.path.join(out, "rml_checkpoint.safetensors"),
                               framework="numpy") as f:
        meta = f.metadata()
    want = {"format": "rml-checkpoint", "format_version": "1", "step": "42",
            "user.optimizer": "sgd"}
    if meta != want:
        failures.append(f"rml_checkpoint.safetensors: metadata {meta}")

    if failures:
        print("\n".join(failures))
        print(f"read_rml_files: {len(failures)} problem(s) in {len(manifest)} tensors")
        sys.exit(1)
    print(f"read_rml_files: {len(manifest)} tensors from rml read back exactly "
          f"by safetensors {safetensors.__version__} and numpy {np.__version__}")


if __name__ == "__main__":
    main()
