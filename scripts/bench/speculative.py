#!/usr/bin/env python3
"""Measures the speed-up of speculative decoding in ``rml-llm generate --draft``.

Builds a random-weight Llama target (hidden 1024, 8 layers, ~92M parameters, F16 in
the file, f32 in memory) that carries the bundled model's tokenizer, makes
same-weights Q8_0 and Q4_0 copies with ``rml-llm quantize`` as drafts, then runs
greedy generation with and without each draft, alternating runs, and prints the
median decode tokens/s, the spread (min-max), the acceptance rate and the speed-up.

Random weights: the drafts agree with the target only as far as quantization noise
allows, so the acceptance rates are those of a same-weights quantized draft, not of a
real small model; the figures show the mechanism (one batched target call per round),
not what a trained draft pair would give.

    python scripts/bench/speculative.py [--rml target/release/rml-llm] [--runs 5] [-n 64] [-k 4]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import gguf

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "models" / "default" / "rml-tiny-llama.gguf"


def field(r: gguf.GGUFReader, key: str):
    f = r.fields[key]
    if f.types[0] == gguf.GGUFValueType.ARRAY:
        if f.types[1] == gguf.GGUFValueType.STRING:
            return [bytes(f.parts[i]).decode() for i in f.data]
        return [f.parts[i][0].item() for i in f.data]
    if f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode()
    return f.parts[f.data[0]][0].item()


def write_target(path: Path, hidden=1024, ff=2816, layers=8, heads=16, kv_heads=4, context=1024) -> None:
    src = gguf.GGUFReader(str(BUNDLED))
    vocab = len(field(src, "tokenizer.ggml.tokens"))
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(context)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model(field(src, "tokenizer.ggml.model"))
    w.add_tokenizer_pre(field(src, "tokenizer.ggml.pre"))
    w.add_token_list(field(src, "tokenizer.ggml.tokens"))
    w.add_token_types(field(src, "tokenizer.ggml.token_type"))
    w.add_token_merges(field(src, "tokenizer.ggml.merges"))
    w.add_bos_token_id(field(src, "tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(field(src, "tokenizer.ggml.eos_token_id"))
    w.add_add_bos_token(field(src, "tokenizer.ggml.add_bos_token"))

    def mat(rows, cols, scale=None):
        scale = scale or 1.0 / np.sqrt(cols)
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float16)

    kv = hidden // heads * kv_heads
    w.add_tensor("token_embd.weight", mat(vocab, hidden, 1.0))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    w.add_tensor("output.weight", mat(vocab, hidden))
    for i in range(layers):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(b + "attn_q.weight", mat(hidden, hidden))
        w.add_tensor(b + "attn_k.weight", mat(kv, hidden))
        w.add_tensor(b + "attn_v.weight", mat(kv, hidden))
        w.add_tensor(b + "attn_output.weight", mat(hidden, hidden))
        w.add_tensor(b + "ffn_gate.weight", mat(ff, hidden))
        w.add_tensor(b + "ffn_up.weight", mat(ff, hidden))
        w.add_tensor(b + "ffn_down.weight", mat(hidden, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def generate(rml: str, model: Path, n: int, draft: Path | None, k: int):
    cmd = [rml, "generate", str(model), "-p", "The for statement", "-n", str(n), "--temp", "0", "-v"]
    if draft:
        cmd += ["--draft", str(draft), "--draft-tokens", str(k)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rate = float(re.search(r"generated: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)", out.stderr)[1])
    acc = re.search(r"\(([\d.]+)%\)", out.stderr)
    return out.stdout, rate, float(acc[1]) if acc else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rml", default=str(ROOT / "target" / "release" / "rml-llm"))
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("-k", type=int, default=4)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "target-f16.gguf"
        write_target(target)
        drafts = {}
        for ty in ("Q8_0", "Q4_0"):
            drafts[ty] = Path(tmp) / f"draft-{ty}.gguf"
            subprocess.run([args.rml, "quantize", str(target), str(drafts[ty]), ty], check=True, capture_output=True)
        rates = {name: [] for name in ["plain", *drafts]}
        acceptance = {}
        texts = {}
        for _ in range(args.runs):
            for name in rates:
                text, rate, acc = generate(args.rml, target, args.n, drafts.get(name), args.k)
                rates[name].append(rate)
                texts.setdefault(name, text)
                if acc is not None:
                    acceptance[name] = acc
        base = statistics.median(rates["plain"])
        print(f"target: random Llama, 92M parameters (F16 file, f32 in memory); greedy, -n {args.n}, k = {args.k}, {args.runs} runs each")
        print("| decoding | median tok/s | min-max | acceptance | speed-up | same text |")
        print("| --- | ---: | ---: | ---: | ---: | --- |")
        for name, r in rates.items():
            med = statistics.median(r)
            acc = f"{acceptance[name]:.1f}%" if name in acceptance else "-"
            label = "plain" if name == "plain" else f"draft {name} (same weights)"
            same = "yes" if texts[name] == texts["plain"] else "NO"
            print(f"| {label} | {med:.1f} | {min(r):.1f}-{max(r):.1f} | {acc} | {med / base:.2f}x | {same} |")


if __name__ == "__main__":
    main()
