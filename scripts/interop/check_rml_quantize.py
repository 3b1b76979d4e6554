#!/usr/bin/env python3
"""Checks ``rml-llm quantize`` against the ``gguf`` package.

Writes a small GGUF with gguf-py's ``GGUFWriter`` (F32 and F16 matrices with rows of
256 and 96 values, a row length of 40 that fits no block, a 1-D norm, an MoE router,
token embedding and output), runs the given ``rml-llm`` binary to quantize it to
every type, reads each output with ``gguf.GGUFReader`` and checks:

- the metadata is kept, ``general.file_type`` is llama.cpp's ``LlamaFileType`` for
  the type and ``general.quantization_version`` is 2;
- each tensor's type follows llama-quantize's rules, written here from its
  description: 2-D ``*weight`` tensors are quantized, 1-D tensors, the router
  (``ffn_gate_inp``) keep their type, ``--token-embedding-type`` /
  ``--output-tensor-type`` override, and a row length that is not a whole number of
  blocks falls back (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then
  F16);
- shapes are kept, and the bytes of every tensor whose type ``gguf.quants`` can
  quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, F16, F32) equal ``gguf.quants.quantize``
  of the source values; K-quant tensors (which gguf-py only dequantizes) must
  dequantize with ``gguf.quants.dequantize`` to the source within the type's error.

    python scripts/interop/check_rml_quantize.py PATH/TO/rml-llm
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import quants

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"]
FILE_TYPE = {
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "Q4_1": gguf.LlamaFileType.MOSTLY_Q4_1,
    "Q5_0": gguf.LlamaFileType.MOSTLY_Q5_0,
    "Q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "Q2_K": gguf.LlamaFileType.MOSTLY_Q2_K,
    "Q3_K": gguf.LlamaFileType.MOSTLY_Q3_K_S,
    "Q4_K": gguf.LlamaFileType.MOSTLY_Q4_K_S,
    "Q5_K": gguf.LlamaFileType.MOSTLY_Q5_K_S,
    "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K,
}
FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
# Relative RMS error bounds for Gaussian data (observed values are about 2/3 of these).
K_BOUND = {"Q2_K": 0.45, "Q3_K": 0.25, "Q4_K": 0.12, "Q5_K": 0.06, "Q6_K": 0.03}


def source_tensors() -> dict[str, np.ndarray]:
    """Tensors in numpy (row-major) shape: [rows, row length]."""
    rng = np.random.default_rng(7)
    n = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "token_embd.weight": n(64, 256),
        "blk.0.attn_norm.weight": 1.0 + 0.1 * n(256),
        "blk.0.ffn_up.weight": n(96, 256).astype(np.float16),
        "blk.0.ffn_down.weight": n(256, 96),
        "blk.0.ffn_gate_inp.weight": n(4, 256),
        "blk.0.odd.weight": n(8, 40),
        "output.weight": n(64, 256),
    }


def write_source(path: Path, tensors: dict[str, np.ndarray]) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_string("rml.test.note", "quantize me")
    w.add_uint32("llama.block_count", 1)
    for name, data in tensors.items():
        w.add_tensor(name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def expected_type(name: str, data: np.ndarray, ty: str, overrides: dict[str, str]) -> str:
    if data.ndim < 2 or "ffn_gate_inp" in name:
        return "F16" if data.dtype == np.float16 else "F32"
    want = overrides.get(name, ty)
    block = gguf.GGML_QUANT_SIZES[Q[want]][0]
    if data.shape[-1] % block == 0:
        return want
    fallback = FALLBACK.get(want, "F16")
    if data.shape[-1] % gguf.GGML_QUANT_SIZES[Q[fallback]][0] == 0:
        return fallback
    return "F16"


def field(reader: gguf.GGUFReader, key: str):
    f = reader.fields[key]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]][0].item()


def check(reader: gguf.GGUFReader, ty: str, tensors, overrides, errors: list[str]) -> None:
    tag = f"{ty} {overrides or ''}".strip()
    if field(reader, "general.architecture") != "llama" or field(reader, "rml.test.note") != "quantize me":
        errors.append(f"{tag}: metadata not kept")
    if field(reader, "general.file_type") != int(FILE_TYPE[ty]):
        errors.append(f"{tag}: general.file_type {field(reader, 'general.file_type')}")
    if field(reader, "general.quantization_version") != 2:
        errors.append(f"{tag}: general.quantization_version")
    got = {t.name: t for t in reader.tensors}
    if list(got) != list(tensors):
        errors.append(f"{tag}: tensors {list(got)}")
        return
    for name, src in tensors.items():
        t = got[name]
        want = expected_type(name, src, ty, overrides)
        if t.tensor_type.name != want:
            errors.append(f"{tag}: {name} is {t.tensor_type.name}, expected {want}")
            continue
        if list(t.shape) != list(reversed(src.shape)):
            errors.append(f"{tag}: {name} shape {list(t.shape)}")
            continue
        values = src.astype(np.float32)
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        if want in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "F16", "F32"):
            ref = quants.quantize(values, Q[want]).view(np.uint8).reshape(-1)
            if src.dtype == np.float16 and want == "F16":
                ref = src.view(np.uint8).reshape(-1)
            if not np.array_equal(raw, ref):
                bad = int(np.count_nonzero(raw != ref))
                errors.append(f"{tag}: {name} ({want}) differs from gguf.quants in {bad} bytes")
        else:
            deq = quants.dequantize(raw, Q[want]).reshape(values.shape)
            rel = float(np.sqrt(np.mean((deq - values) ** 2) / np.mean(values**2)))
            if not rel <= K_BOUND[want]:
                errors.append(f"{tag}: {name} ({want}) relative RMS error {rel:.4f} > {K_BOUND[want]}")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    tensors = source_tensors()
    errors: list[str] = []
    runs = [(ty, {}) for ty in TYPES] + [
        ("Q4_K", {"token_embd.weight": "Q8_0", "output.weight": "Q6_K"}),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "source.gguf"
        write_source(src, tensors)
        for ty, overrides in runs:
            out = Path(tmp) / f"out-{ty}.gguf"
            cmd = [binary, "quantize", str(src), str(out), ty.lower()]
            if "token_embd.weight" in overrides:
                cmd += ["--token-embedding-type", overrides["token_embd.weight"]]
            if "output.weight" in overrides:
                cmd += ["--output-tensor-type", overrides["output.weight"]]
            run = subprocess.run(cmd, capture_output=True, text=True)
            if run.returncode != 0:
                errors.append(f"{' '.join(cmd)} failed: {run.stderr.strip()}")
                continue
            check(gguf.GGUFReader(str(out)), ty, tensors, overrides, errors)
    for e in errors:
        print("FAIL", e)
    print(f"check_rml_quantize: {len(runs)} files, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
