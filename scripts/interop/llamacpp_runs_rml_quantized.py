#!/usr/bin/env python3
"""Checks that llama.cpp loads and runs the GGUF files ``rml-llm quantize`` writes (on demand).

Not run by ci/test: it needs ``llama-cpp-python`` (see
``scripts/fixtures-ondemand/quant_llamacpp.py`` for installing it). For each type it
quantizes the bundled model with the given ``rml-llm`` binary, loads the output with
``llama_cpp.Llama`` (the K-quant mixes included), generates 24 greedy tokens after a prompt, and compares the text
with ``rml-llm generate --temp 0`` on the same file. It fails if llama.cpp cannot
load or run a file, or tokenizes the prompt differently; it reports (and does not
fail on) greedy texts that differ, as quantization noise can flip a near-tie in one
runtime and not the other.

    /work/llamavenv/bin/python scripts/interop/llamacpp_runs_rml_quantized.py target/release/rml-llm
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import llama_cpp

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = ROOT / "models" / "default" / "rml-tiny-llama.gguf"
TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
         "Q3_K_M", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M"]
PROMPT = "The for statement"
STEPS = 24


def llama_greedy(path: Path) -> tuple[list[int], str]:
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, verbose=False)
    prompt = llm.tokenize(PROMPT.encode(), add_bos=True, special=True)
    out = []
    for tok in llm.generate(prompt, top_k=1, temp=0.0, repeat_penalty=1.0):
        out.append(tok)
        if len(out) == STEPS:
            break
    return prompt, llm.detokenize(out).decode(errors="replace")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rml = sys.argv[1]
    rml_prompt = subprocess.run(
        [rml, "tokenize", "--tokenizer", str(BUNDLED), PROMPT], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    failures = 0
    print("| type | llama.cpp runs it | greedy text equal to rml's |")
    print("| --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for ty in TYPES:
            path = Path(tmp) / f"{ty}.gguf"
            subprocess.run([rml, "quantize", str(BUNDLED), str(path), ty], check=True, capture_output=True)
            try:
                prompt, text = llama_greedy(path)
            except Exception as e:  # noqa: BLE001 - any failure to load or run is the finding
                print(f"| {ty} | NO: {e} | |")
                failures += 1
                continue
            if f"[{', '.join(map(str, prompt))}]" not in rml_prompt:
                print(f"| {ty} | prompt ids differ: {prompt} vs {rml_prompt} | |")
                failures += 1
                continue
            ours = subprocess.run(
                [rml, "generate", str(path), "-p", PROMPT, "-n", str(STEPS), "--temp", "0"],
                capture_output=True, text=True, check=True,
            ).stdout[:-1]
            print(f"| {ty} | yes | {'yes' if ours == text else f'no: {text!r} vs {ours!r}'} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
