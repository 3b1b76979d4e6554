#!/usr/bin/env python3
"""Checks that llama.cpp loads and runs the GGUF files ``rml-llm quantize`` converts
from Hugging Face safetensors directories (on demand; needs ``llama-cpp-python`` and
NumPy, not run by ci/test).

1. Each tiny random-weight family fixture of ``rml-llm/tests/fixtures/decoder`` (with
   a 256-token byte-level tokenizer added, as the fixtures have none) is converted to
   F32 and Q8_0; llama.cpp evaluates the reference prompts and its logits are compared
   with ``transformers``' (``reference.safetensors``), which rml matches in CI
   (``rml-llm/tests/convert_hf.rs``). So llama.cpp agreeing means both runtimes read
   the converted file the same way.
2. The bundled model's HF directory (``models/default/hf``) is converted to F32 and
   Q8_0; llama.cpp must tokenize the prompt as rml does and its 24 greedy tokens are
   compared with ``rml-llm generate --temp 0`` on the same file.

It fails if llama.cpp cannot load or run a file or tokenizes differently, and prints
every relative logit error (llama.cpp ignores some settings the fixtures use on
purpose, e.g. Gemma's ``query_pre_attn_scalar``; those differences are reported).

    /work/llamavenv/bin/python scripts/interop/llamacpp_runs_rml_converted.py target/release/rml-llm
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "rml-llm" / "tests" / "fixtures" / "decoder"
FAMILIES = ["llama", "llama_yarn", "mistral", "mixtral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "phi3_longrope"]
PROMPT = "The for statement"
STEPS = 24


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    kinds = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def byte_tokenizer() -> dict:
    """A byte-level BPE over the 256 byte symbols, no merges (GPT-2 pre-tokenizer)."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    vocab = {chars[b]: b for b in range(256)}
    return {
        "version": "1.0",
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def convert(rml: str, src: Path, out: Path, ty: str) -> None:
    subprocess.run([rml, "quantize", str(src), str(out), ty], check=True, capture_output=True, text=True)


def llama_logits(llm: llama_cpp.Llama, tokens: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def families(rml: str, tmp: Path) -> None:
    print("| fixture | type | llama.cpp vs transformers (max rel. logit error) | top-1 agreement |")
    print("| --- | --- | ---: | ---: |")
    for fam in FAMILIES:
        # Not named after the family: llama.cpp looks up Phi-3's `<|end|>` token when
        # `general.name` (the directory's name) says phi3, and the byte vocabulary has none.
        src = tmp / f"tiny-{fam.replace('phi3', 'p3')}"
        shutil.copytree(FIXTURES / fam, src)
        (src / "tokenizer.json").write_text(json.dumps(byte_tokenizer()))
        ref = read_safetensors(FIXTURES / fam / "reference.safetensors")
        for ty in ["F32", "Q8_0"]:
            out = tmp / f"{fam}-{ty}.gguf"
            convert(rml, src, out, ty)
            worst, agree, total = 0.0, 0, 0
            longest = max(v.size for k, v in ref.items() if k.startswith("tokens."))
            llm = llama_cpp.Llama(model_path=str(out), n_ctx=longest, n_batch=longest, n_threads=1,
                                  logits_all=True, verbose=False)
            p = 0
            while f"tokens.{p}" in ref:
                tokens = [int(t) for t in ref[f"tokens.{p}"].reshape(-1)]
                want = ref[f"logits.{p}"].reshape(len(tokens), -1)
                got = llama_logits(llm, tokens)
                worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max()))
                agree += int((got.argmax(-1) == want.argmax(-1)).sum())
                total += len(tokens)
                p += 1
            llm.close()
            print(f"| {fam} | {ty} | {worst:.2e} | {agree}/{total} |")


def bundled(rml: str, tmp: Path) -> None:
    for ty in ["F32", "Q8_0"]:
        out = tmp / f"bundled-{ty}.gguf"
        convert(rml, ROOT / "models" / "default" / "hf", out, ty)
        llm = llama_cpp.Llama(model_path=str(out), n_ctx=256, n_threads=1, verbose=False)
        prompt = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
        rml_ids = subprocess.run([rml, "tokenize", "--tokenizer", str(out), PROMPT], check=True,
                                 capture_output=True, text=True).stdout
        toks = []
        for tok in llm.generate(prompt, top_k=1, temp=0.0, repeat_penalty=1.0):
            toks.append(tok)
            if len(toks) == STEPS:
                break
        theirs = llm.detokenize(toks).decode(errors="replace")
        llm.close()
        ours = subprocess.run([rml, "generate", str(out), "-p", PROMPT, "-n", str(STEPS), "--temp", "0"],
                              check=True, capture_output=True, text=True).stdout.rstrip("\n")
        print(f"bundled {ty}: llama.cpp prompt ids {prompt}; rml tokenize:\n{rml_ids.strip()}")
        print(f"  llama.cpp: {theirs!r}\n  rml:       {ours!r}\n  same text: {theirs == ours}")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rml = sys.argv[1]
    with tempfile.TemporaryDirectory() as d:
        families(rml, Path(d))
        bundled(rml, Path(d))
    return 0


if __name__ == "__main__":
    sys.exit(main())
