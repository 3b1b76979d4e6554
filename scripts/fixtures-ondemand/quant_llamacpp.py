#!/usr/bin/env python3
"""Writes K-quant quantization fixtures produced by llama.cpp itself (on demand).

NOT run by ci/test, which runs every ``scripts/fixtures/*.py`` with its own venv (this
script lives in ``scripts/fixtures-ondemand/`` for that reason). It needs
``llama-cpp-python``, which builds llama.cpp from source (``python -m venv
/work/llamavenv && /work/llamavenv/bin/pip install llama-cpp-python gguf numpy``, 10+
minutes on 2 cores; the committed files came from llama-cpp-python 0.3.36, i.e.
llama.cpp 0.5.0 / ggml 0.25.3). Run it with that venv's Python; a llama.cpp built
elsewhere can be used by pointing ``LLAMA_CPP_LIB_PATH`` at its ``libllama.so``:

    /work/llamavenv/bin/python scripts/fixtures-ondemand/quant_llamacpp.py [--out DIR]
    quant_llamacpp.py --print-dest    print the committed folder and exit

It writes a tiny but valid llama-architecture F32 GGUF (one layer, n_embd 256, a
16-token vocabulary), fills ``token_embd.weight`` and ``output.weight`` (16 × 256 each)
with deterministic random data of varied scale (plus an all-zero row and a constant row),
quantizes the model with ``llama_cpp.llama_model_quantize`` (``pure=True``, so every
2-D weight gets the file type's base type) for each type below, reads the quantized
tensors back with ``gguf.GGUFReader``, and saves:

- ``input.f32``: the 32 × 256 f32 values (token_embd rows then output rows),
- ``NAME.blocks``: llama.cpp's blocks for those values, in the same order.

rml-core's tests require its reference quantizers to reproduce every byte. The bytes
depend only on llama.cpp's reference quantizers (``quantize_row_*_ref`` in
ggml-quants.c, used when no importance matrix is given), so reruns are byte-identical.
"""

import argparse
import ctypes
import pathlib
import sys
import tempfile

import numpy as np

DEST = pathlib.Path(__file__).resolve().parents[2] / "rml-core" / "tests" / "fixtures" / "quant_llamacpp"

# (fixture name, llama_ftype, ggml type id of the pure base type)
TYPES = [
    ("q2_k", 10, 10),  # LLAMA_FTYPE_MOSTLY_Q2_K
    ("q3_k", 12, 11),  # LLAMA_FTYPE_MOSTLY_Q3_K_M (pure → Q3_K)
    ("q4_k", 15, 12),  # LLAMA_FTYPE_MOSTLY_Q4_K_M (pure → Q4_K)
    ("q5_k", 17, 13),  # LLAMA_FTYPE_MOSTLY_Q5_K_M (pure → Q5_K)
    ("q6_k", 18, 14),  # LLAMA_FTYPE_MOSTLY_Q6_K
    ("q4_0", 2, 2),
    ("q4_1", 3, 3),
    ("q5_0", 8, 6),
    ("q5_1", 9, 7),
    ("q8_0", 7, 8),
]

N_EMBD = 256
N_VOCAB = 16
N_FF = 256


def weights():
    rng = np.random.default_rng(20261130)
    rows = []
    for r in range(2 * N_VOCAB):
        scale = [0.02, 1.0, 0.001, 7.0][r % 4]
        row = rng.standard_normal(N_EMBD) * scale
        if r % 5 == 1:
            row = rng.laplace(size=N_EMBD) * scale  # heavy tails
        if r % 7 == 3:
            row[rng.integers(0, N_EMBD, 8)] *= 20.0  # outliers
        if r % 6 == 4:
            row = np.abs(row)  # one-signed: exercises the min search
        rows.append(row)
    rows[9] = np.zeros(N_EMBD)
    rows[10] = np.full(N_EMBD, 0.3)
    rows[11][:128] = 0.0  # half-zero: some all-zero sub-blocks
    return np.array(rows, dtype=np.float32)


def write_model(path, x):
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("rml-quant-fixture")
    w.add_context_length(64)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(1)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(2)
    w.add_head_count_kv(2)
    w.add_rope_dimension_count(N_EMBD // 2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(0)  # ALL_F32
    w.add_tokenizer_model("llama")
    w.add_token_list([f"<t{i}>".encode() for i in range(N_VOCAB)])
    w.add_token_scores([0.0] * N_VOCAB)
    w.add_token_types([1] * N_VOCAB)
    z = lambda *shape: np.zeros(shape, dtype=np.float32)  # noqa: E731
    one = np.ones(N_EMBD, dtype=np.float32)
    w.add_tensor("token_embd.weight", x[:N_VOCAB])
    w.add_tensor("output_norm.weight", one)
    w.add_tensor("output.weight", x[N_VOCAB:])
    w.add_tensor("blk.0.attn_norm.weight", one)
    for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{t}.weight", z(N_EMBD, N_EMBD))
    w.add_tensor("blk.0.ffn_norm.weight", one)
    w.add_tensor("blk.0.ffn_gate.weight", z(N_FF, N_EMBD))
    w.add_tensor("blk.0.ffn_up.weight", z(N_FF, N_EMBD))
    w.add_tensor("blk.0.ffn_down.weight", z(N_EMBD, N_FF))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize(src, dst, ftype):
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.nthread = 1
    params.ftype = ftype
    params.pure = True
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed for ftype {ftype}: {rc}")


def tensor_bytes(path, name, want_type):
    import gguf

    r = gguf.GGUFReader(str(path))
    for t in r.tensors:
        if t.name == name:
            if int(t.tensor_type) != want_type:
                raise SystemExit(f"{name} in {path} has type {t.tensor_type.name}, expected id {want_type}")
            return np.asarray(t.data).tobytes()
    raise SystemExit(f"{name} not found in {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=DEST)
    ap.add_argument("--print-dest", action="store_true")
    args = ap.parse_args()
    if args.print_dest:
        print(DEST)
        return
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        sys.exit("quant_llamacpp.py needs llama-cpp-python (see the module docstring)")

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    x = weights()
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "f32.gguf"
        write_model(src, x)
        (out / "input.f32").write_bytes(x.astype("<f4").tobytes())
        for name, ftype, tid in TYPES:
            dst = pathlib.Path(tmp) / f"{name}.gguf"
            quantize(src, dst, ftype)
            data = tensor_bytes(dst, "token_embd.weight", tid) + tensor_bytes(dst, "output.weight", tid)
            (out / f"{name}.blocks").write_bytes(data)


if __name__ == "__main__":
    main()
