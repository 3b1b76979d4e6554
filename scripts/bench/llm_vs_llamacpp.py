#!/usr/bin/env python3
"""``rml-llm bench`` and llama.cpp side by side on the same GGUF files.

Builds the random-weight 92M-parameter Llama of ``speculative.py`` (F16) and
``rml-llm quantize`` copies (Q8_0, Q4_0, Q4_K), then for each file and thread count
runs ``rml-llm bench -o json`` and the same two tests through llama-cpp-python (``ppN``:
N random tokens evaluated from an empty context in one batch; ``tgN``: N one-token
evaluations), one warm-up then ``--runs`` timed repetitions, and prints the median
tokens/s of both with their ratio. Needs llama-cpp-python (not in CI):

    /work/llamavenv/bin/python scripts/bench/llm_vs_llamacpp.py [--rml target/release/rml-llm] [-p 128] [-n 32] [-t 1] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import llama_cpp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from speculative import ROOT, write_target  # noqa: E402


def llama_bench(path: Path, p: int, n: int, threads: int, runs: int) -> dict[str, float]:
    llm = llama_cpp.Llama(model_path=str(path), n_ctx=p + n + 8, n_batch=max(p, 1), n_threads=threads,
                          n_threads_batch=threads, verbose=False)
    rng = np.random.default_rng(0)
    vocab = llm.n_vocab()
    out = {}
    for test, count in (("pp", p), ("tg", n)):
        tokens = [int(t) for t in rng.integers(0, vocab, count)]
        rates = []
        for i in range(runs + 1):
            llm.reset()
            start = time.perf_counter()
            if test == "pp":
                llm.eval(tokens)
            else:
                for t in tokens:
                    llm.eval([t])
            dt = time.perf_counter() - start
            if i:
                rates.append(count / dt)
        out[f"{test}{count}"] = statistics.median(rates)
    return out


def rml_bench(rml: str, path: Path, p: int, n: int, threads: int, runs: int) -> dict[str, float]:
    res = subprocess.run([rml, "bench", str(path), "-p", str(p), "-n", str(n), "-t", str(threads),
                          "-r", str(runs), "-o", "json"], capture_output=True, text=True, check=True)
    return {t["test"]: t["median_ts"] for t in json.loads(res.stdout)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rml", default=str(ROOT / "target" / "release" / "rml-llm"))
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-t", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"random Llama, 92M parameters; {args.t} thread(s); median of {args.runs} runs; tok/s")
    print("| file | test | rml | llama.cpp | rml / llama.cpp |")
    print("| --- | --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        f16 = Path(tmp) / "F16.gguf"
        write_target(f16)
        files = {"F16": f16}
        for ty in ("Q8_0", "Q4_0", "Q4_K"):
            files[ty] = Path(tmp) / f"{ty}.gguf"
            subprocess.run([args.rml, "quantize", str(f16), str(files[ty]), ty], check=True, capture_output=True)
        for name, path in files.items():
            ours = rml_bench(args.rml, path, args.p, args.n, args.t, args.runs)
            theirs = llama_bench(path, args.p, args.n, args.t, args.runs)
            for test in ours:
                print(f"| {name} | {test} | {ours[test]:.1f} | {theirs[test]:.1f} | {ours[test] / theirs[test]:.2f} |")


if __name__ == "__main__":
    main()
