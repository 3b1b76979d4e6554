#!/usr/bin/env python3
"""Times rml-llm and llama.cpp (through llama-cpp-python) on the same GGUF files.

Builds, on demand and not committed, a random-weight Llama-architecture model (default
hidden 1024, 16 layers, 16 query / 4 KV heads of 64, FFN 2816, vocab 32000: 245M
parameters) as an F16 GGUF with the `gguf` package, quantizes it with llama.cpp's own
`llama_model_quantize` to Q4_0, Q4_K_M and Q8_0 (cached in --scratch), then for each
file and thread count runs ROUNDS rounds; in each round rml (the `llm_bench` example,
a fresh process) and llama.cpp (one model kept loaded, fresh KV cache per round) are
timed in turn, so machine noise hits both alike. A round prefills PROMPT fixed token
ids (prompt processing tok/s) then decodes DECODE tokens one at a time (decode tok/s),
wall clock; both use an f32 KV cache in llama.cpp and rml. Prints medians, min–max and
the rml / llama.cpp ratio, plus the 1-minute load average before and after.

Usage (with llama-cpp-python and gguf installed, e.g. /work/llamavenv/bin/python):
  cargo build --release -p rml-llm --example llm_bench
  python scripts/bench/llm_llama_cpp.py [--rounds 5] [--threads 1 2] [--quants q4_0 ...]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

SHAPE = {"vocab": 32000, "hidden": 1024, "ff": 2816, "layers": 16, "heads": 16,
         "kv_heads": 4, "head_dim": 64}

FTYPES = {"q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M",
          "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0"}


def write_f16(path, s):
    import gguf
    import numpy as np

    rng = np.random.default_rng(1)
    h, hd = s["hidden"], s["head_dim"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(4096)
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(s["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("none")

    def matrix(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) / np.sqrt(cols)).astype(np.float16)

    def norm():
        return np.ones(h, dtype=np.float32)

    w.add_tensor("token_embd.weight", rng.standard_normal((s["vocab"], h), dtype=np.float32).astype(np.float16))
    w.add_tensor("output_norm.weight", norm())
    w.add_tensor("output.weight", matrix(s["vocab"], h))
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    for layer in range(s["layers"]):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", norm())
        w.add_tensor(p + "attn_q.weight", matrix(q, h))
        w.add_tensor(p + "attn_k.weight", matrix(kv, h))
        w.add_tensor(p + "attn_v.weight", matrix(kv, h))
        w.add_tensor(p + "attn_output.weight", matrix(h, q))
        w.add_tensor(p + "ffn_norm.weight", norm())
        w.add_tensor(p + "ffn_gate.weight", matrix(s["ff"], h))
        w.add_tensor(p + "ffn_up.weight", matrix(s["ff"], h))
        w.add_tensor(p + "ffn_down.weight", matrix(h, s["ff"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build(scratch, quants):
    import llama_cpp

    os.makedirs(scratch, exist_ok=True)
    f16 = os.path.join(scratch, "bench-f16.gguf")
    if not os.path.exists(f16):
        write_f16(f16 + ".tmp", SHAPE)
        os.replace(f16 + ".tmp", f16)
    files = {}
    for tag in quants:
        path = os.path.join(scratch, f"bench-{tag}.gguf")
        if not os.path.exists(path):
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = getattr(llama_cpp, FTYPES[tag])
            params.nthread = 2
            if llama_cpp.llama_model_quantize(f16.encode(), (path + ".tmp").encode(), params):
                raise SystemExit(f"quantizing {tag} failed")
            os.replace(path + ".tmp", path)
        files[tag] = path
    return files


def prompt_ids(n, vocab):
    return [(i * 7919 + 13) % vocab for i in range(n)]


def llama_round(llm, pp, tg):
    import numpy as np

    llm.reset()
    start = time.perf_counter()
    llm.eval(prompt_ids(pp, SHAPE["vocab"]))
    prefill = time.perf_counter() - start
    token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    start = time.perf_counter()
    for _ in range(tg):
        llm.eval([token])
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
    decode = time.perf_counter() - start
    return pp / prefill, tg / decode


def rml_round(binary, path, threads, pp, tg):
    out = subprocess.run([binary, path, str(threads), str(pp), str(tg), "1"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["pp_tok_s"], r["tg_tok_s"]


def summary(values):
    return statistics.median(values), min(values), max(values)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scratch", default="/tmp/rml-llm-bench")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quants", nargs="+", default=list(FTYPES), choices=list(FTYPES))
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "examples", "llm_bench"))
    args = ap.parse_args()
    try:
        from llama_cpp import Llama
    except ImportError as e:
        print(f"llm_llama_cpp.py: needs llama-cpp-python ({e})", file=sys.stderr)
        sys.exit(77)
    if not os.path.exists(args.binary):
        raise SystemExit(f"{args.binary} missing: cargo build --release -p rml-llm --example llm_bench")
    files = build(args.scratch, args.quants)
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.rounds} rounds, prompt {args.prompt}, "
          f"decode {args.decode}")
    print("| file | MB | threads | rml pp tok/s | llama.cpp pp tok/s | pp ratio "
          "| rml decode tok/s | llama.cpp decode tok/s | decode ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tag, path in files.items():
        mb = os.path.getsize(path) / 1e6
        for threads in args.threads:
            llm = Llama(model_path=path, n_ctx=args.prompt + args.decode + 64, n_batch=512,
                        n_ubatch=512, n_threads=threads, n_threads_batch=threads,
                        flash_attn=False, type_k=0, type_v=0, verbose=False)
            llama_round(llm, args.prompt, 4)  # warm-up
            res = {"rml": ([], []), "llama": ([], [])}
            for _ in range(args.rounds):
                for who in ("rml", "llama"):
                    if who == "rml":
                        p, t = rml_round(args.binary, path, threads, args.prompt, args.decode)
                    else:
                        p, t = llama_round(llm, args.prompt, args.decode)
                    res[who][0].append(p)
                    res[who][1].append(t)
            llm.close()
            cells = []
            for i in (0, 1):
                r, rl, rh = summary(res["rml"][i])
                ll, ll_lo, ll_hi = summary(res["llama"][i])
                cells.append(f"{r:.1f} ({rl:.1f}–{rh:.1f}) | {ll:.1f} ({ll_lo:.1f}–{ll_hi:.1f}) | {r / ll:.2f}")
            print(f"| {tag} | {mb:.0f} | {threads} | {cells[0]} | {cells[1]} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
