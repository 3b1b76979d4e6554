#!/usr/bin/env python3
"""Checks the GGUF files rml wrote with gguf-py's reader.

``cargo test -p rml-host --test gguf_interop rml_writes_files_for_gguf_py`` with
``RML_INTEROP_OUT=DIR`` writes ``rml_basic.gguf``, ``rml_align64.gguf`` and
``rml_v2.gguf`` into DIR (their contents are defined in
``rml-host/tests/gguf_interop.rs``, ``interop_files``); this script reads them with
``gguf.GGUFReader`` and checks every key, type, tensor and byte it expects.

    python scripts/interop/read_rml_gguf.py DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V


def field_value(field: gguf.ReaderField):
    """The value of a scalar, string or flat array field, and its type(s)."""
    types = list(field.types)
    if types[0] == V.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8"), types
    if types[0] == V.ARRAY:
        if types[1] == V.STRING:
            return [bytes(field.parts[i]).decode("utf-8") for i in field.data], types
        return [field.parts[i][0].item() for i in field.data], types
    return field.parts[field.data[0]][0].item(), types


def expect(cond: bool, what: str, errors: list[str]) -> None:
    if not cond:
        errors.append(what)


def check_fields(reader: gguf.GGUFReader, want: dict, errors: list[str], name: str) -> None:
    keys = [k for k in reader.fields if not k.startswith("GGUF.")]
    expect(keys == list(want), f"{name}: keys {keys} != {list(want)}", errors)
    for key, (types, value) in want.items():
        field = reader.fields.get(key)
        if field is None:
            errors.append(f"{name}: key {key} missing")
            continue
        got, got_types = field_value(field)
        expect(got_types == types, f"{name}: {key} types {got_types} != {types}", errors)
        expect(got == value, f"{name}: {key} = {got!r} != {value!r}", errors)


def f32s(n: int) -> np.ndarray:
    return (np.arange(n, dtype=np.float32) * 0.25 - 1.0).astype(np.float32)


def check_tensors(reader: gguf.GGUFReader, want: list, errors: list[str], name: str) -> None:
    got = [(t.name, t.tensor_type, [int(d) for d in t.shape]) for t in reader.tensors]
    expect(got == [(n, q, s) for n, q, s, _ in want], f"{name}: tensors {got}", errors)
    for t, (tname, _, _, data) in zip(reader.tensors, want):
        raw = bytes(reader.data[t.data_offset:t.data_offset + t.n_bytes])
        expect(raw == data, f"{name}: tensor {tname} bytes differ", errors)
        expect(t.data_offset % reader.alignment == 0, f"{name}: {tname} misaligned", errors)


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    errors: list[str] = []

    f16 = np.array([1.0, -2.0, 0.5, 0.0], dtype=np.float16).tobytes()
    q8 = (b"\x00\x38" + bytes((i - 16) & 0xFF for i in range(32))) * 2
    q4k = bytes(i * 7 % 256 for i in range(144))

    r = gguf.GGUFReader(out / "rml_basic.gguf")
    expect(r.fields["GGUF.version"].parts[0][0] == 3, "rml_basic: version", errors)
    check_fields(r, {
        "general.architecture": ([V.STRING], "llama"),
        "general.name": ([V.STRING], "rml interop ✓"),
        "llama.block_count": ([V.UINT32], 2),
        "t.u8": ([V.UINT8], 200),
        "t.i8": ([V.INT8], -100),
        "t.u16": ([V.UINT16], 60000),
        "t.i16": ([V.INT16], -30000),
        "t.i32": ([V.INT32], -2_000_000_000),
        "t.f32": ([V.FLOAT32], 1.5),
        "t.bool": ([V.BOOL], True),
        "t.u64": ([V.UINT64], 2**64 - 1),
        "t.i64": ([V.INT64], -(2**63)),
        "t.f64": ([V.FLOAT64], -0.125),
        "tokenizer.ggml.tokens": ([V.ARRAY, V.STRING], ["<s>", "</s>", "▁hi", ""]),
        "tokenizer.ggml.scores": ([V.ARRAY, V.FLOAT32], [0.0, -1.0, -2.5, 3.0]),
        "t.arr_i64": ([V.ARRAY, V.INT64], [-(2**63), 0, 2**63 - 1]),
    }, errors, "rml_basic")
    check_tensors(r, [
        ("f32.weight", Q.F32, [4, 3], f32s(12).tobytes()),
        ("f16.weight", Q.F16, [4], f16),
        ("q8_0.weight", Q.Q8_0, [64], q8),
        ("q4_k.weight", Q.Q4_K, [256], q4k),
    ], errors, "rml_basic")
    # gguf-py's own dequantizer agrees with the Q8_0 bytes rml wrote.
    q8_tensor = r.get_tensor(2)
    deq = gguf.quants.dequantize(q8_tensor.data, Q.Q8_0).reshape(-1)
    want = np.tile((np.arange(32) - 16) * 0.5, 2).astype(np.float32)
    expect(np.array_equal(deq, want), "rml_basic: Q8_0 dequantization", errors)

    r = gguf.GGUFReader(out / "rml_align64.gguf")
    expect(r.alignment == 64, f"rml_align64: alignment {r.alignment}", errors)
    check_fields(r, {
        "general.architecture": ([V.STRING], "llama"),
        "general.alignment": ([V.UINT32], 64),
    }, errors, "rml_align64")
    check_tensors(r, [
        ("a", Q.F32, [3], f32s(3).tobytes()),
        ("b", Q.F16, [2, 2], f16),
    ], errors, "rml_align64")

    r = gguf.GGUFReader(out / "rml_v2.gguf")
    expect(r.fields["GGUF.version"].parts[0][0] == 2, "rml_v2: version", errors)
    check_tensors(r, [("w", Q.F32, [12], f32s(12).tobytes())], errors, "rml_v2")

    for e in errors:
        print(f"read_rml_gguf: {e}", file=sys.stderr)
    if errors:
        return 1
    print(f"read_rml_gguf: 3 rml-written GGUF files in {out} read correctly by gguf.GGUFReader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
