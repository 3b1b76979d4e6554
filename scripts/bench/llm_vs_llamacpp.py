#!/usr/bin/env python3
"""``rml-llm bench`` and llama.cpp side by side on the same GGUF files.

Uses the random-weight models of the decoder issue's shapes that
``llm_llama_cpp.py`` builds (``--shape``, quantized by llama.cpp to each of
``--quants``; cached under ``--scratch``). For each file, thread count and depth it
runs ``rml-llm bench -o json`` (a fresh process) and then the same tests through
llama-cpp-python, llama-bench's way: ``ppN`` evaluates N random tokens in one call,
``tgN`` N one-token calls, each on a cache already holding ``-d`` random tokens
(filled untimed; labelled ``@ dD``), one warm-up then ``--runs`` timed repetitions,
wall clock, both sides on the same KV cache type (``--cache-type``, f32 by
default). Prints the median tokens/s of both, their ratio and each prompt's time to
first token. Needs llama-cpp-python, gguf and numpy (not in CI):

    cargo build --release -p rml-llm
    /work/llamavenv/bin/python scripts/bench/llm_vs_llamacpp.py --shape qwen3 \\
        --quants q4_0 q8_0 q4_k_m -p 64,512 -n 32 -d 0,512 -t 1,2 --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llm_llama_cpp import FTYPES, ROOT, SHAPES, build  # noqa: E402

# GGML type ids of the cache types both runtimes take.
CACHE_TYPES = {"f32": 0, "f16": 1}


def ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def llama_bench(path: str, args, threads: int, depth: int) -> dict[str, float]:
    """llama.cpp's tok/s per test name, median of `args.runs` runs after a warm-up."""
    longest = max(args.p + args.n)
    n_ctx = depth + longest + 8
    # n_batch = n_ctx: llama-cpp-python keeps n_batch rows of scores; the compute
    # batch (n_ubatch) stays 512, as in rml's default `-b`.
    llm = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=512, n_threads=threads,
                          n_threads_batch=threads, flash_attn=False, type_k=CACHE_TYPES[args.cache_type],
                          type_v=CACHE_TYPES[args.cache_type], verbose=False)
    rng = np.random.default_rng(0)
    vocab = llm.n_vocab()
    out = {}
    tests = [("pp", n) for n in args.p if n] + [("tg", n) for n in args.n if n]
    for test, count in tests:
        earlier = [int(t) for t in rng.integers(0, vocab, depth)]
        tokens = [int(t) for t in rng.integers(0, vocab, count)]
        rates = []
        for i in range(args.runs + 1):
            llm.reset()
            if earlier:
                llm.eval(earlier)
            start = time.perf_counter()
            if test == "pp":
                llm.eval(tokens)
            else:
                for t in tokens:
                    llm.eval([t])
            dt = time.perf_counter() - start
            if i:
                rates.append(count / dt)
        name = f"{test}{count}" + (f" @ d{depth}" if depth else "")
        out[name] = statistics.median(rates)
    llm.close()
    return out


def rml_bench(path: str, args, threads: int, depth: int) -> dict[str, float]:
    """rml's tok/s per test name (`rml-llm bench -o json`)."""
    cmd = [args.rml, "bench", path, "-p", ",".join(map(str, args.p)), "-n", ",".join(map(str, args.n)),
           "-d", str(depth), "-t", str(threads), "-r", str(args.runs), "--cache-type", args.cache_type,
           "-o", "json"]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return {t["test"]: t["median_ts"] for t in json.loads(res.stdout)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rml", default=os.path.join(ROOT, "target", "release", "rml-llm"))
    ap.add_argument("--shape", default="qwen3", choices=list(SHAPES))
    ap.add_argument("--quants", nargs="+", default=list(FTYPES), choices=list(FTYPES))
    ap.add_argument("--scratch", default="/tmp/rml-llm-bench", help="model cache directory")
    ap.add_argument("-p", type=ints, default=[64, 512], help="prompt lengths (comma list)")
    ap.add_argument("-n", type=ints, default=[32], help="decode lengths (comma list)")
    ap.add_argument("-d", type=ints, default=[0, 512], help="cache depths (comma list)")
    ap.add_argument("-t", type=ints, default=[1, 2], help="thread counts (comma list)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cache-type", default="f32", choices=list(CACHE_TYPES))
    args = ap.parse_args()
    if not os.path.exists(args.rml):
        raise SystemExit(f"{args.rml} missing: cargo build --release -p rml-llm")
    files = build(args.scratch, args.shape, args.quants)
    print(f"{args.shape} shape, random weights; {args.cache_type} KV cache; median of {args.runs} runs; "
          f"tok/s; load average {os.getloadavg()[0]:.2f}")
    print("| file | threads | test | rml | llama.cpp | rml / llama.cpp |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    ttft = []
    for tag, path in files.items():
        for threads in args.t:
            for depth in args.d:
                ours = rml_bench(path, args, threads, depth)
                theirs = llama_bench(path, args, threads, depth)
                for test, rate in ours.items():
                    print(f"| {tag} | {threads} | {test} | {rate:.1f} | {theirs[test]:.1f} "
                          f"| {rate / theirs[test]:.2f} |", flush=True)
                    if test.startswith("pp") and not depth:
                        n = int(test[2:])
                        ttft.append((tag, threads, n, n / rate, n / theirs[test]))
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\nTime to first token (prompt evaluated from an empty cache, seconds)")
    print("| file | threads | prompt | rml | llama.cpp |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for tag, threads, n, ours, theirs in ttft:
        print(f"| {tag} | {threads} | {n} | {ours:.2f} | {theirs:.2f} |")


if __name__ == "__main__":
    main()
