#!/usr/bin/env python3
"""Times rml-llm and llama.cpp (through llama-cpp-python) on the same GGUF files.

Builds, on demand and not committed, a random-weight model of one of the issue's shapes
(--shape; see SHAPES: `tinyllama` = TinyLlama-1.1B, `qwen3` = Qwen3-0.6B with tied
embeddings and q/k norms, `small` = a 245M Llama) as an F16 GGUF with the `gguf`
package, quantizes it with llama.cpp's own `llama_model_quantize` to each of --quants
(Q4_0, Q8_0, Q4_K_M), and deletes the F16 intermediate (the cache under --scratch then
holds only the quantized files; --clean deletes it at the end). For each file, thread
count and prompt length it runs --rounds rounds; in each round rml (the `llm_bench`
example, a fresh process) and llama.cpp (a worker process with the model kept loaded,
fresh KV cache per round) are timed in turn, so machine noise hits both alike. A round
prefills PROMPT fixed token ids in one call (prompt tok/s) then decodes --decode tokens
one at a time (decode tok/s), wall clock; both use a KV cache of --kv-type (f32 by
default, or f16; llama.cpp's GGML types 0 and 1). Prints medians,
min-max and the rml / llama.cpp ratio, the 1-minute load average before and after,
and peak RSS: rml's `VmHWM` (mapped file pages included) against the budget
`file size + KV cache + 10%`, and llama.cpp's worker's `VmHWM` minus what the
interpreter held before loading the model.

Usage (with llama-cpp-python, gguf and numpy, e.g. /work/llamavenv/bin/python):
  cargo build --release -p rml-llm --example llm_bench
  python scripts/bench/llm_llama_cpp.py --shape qwen3 --quants q4_0 --threads 1
  python scripts/bench/llm_llama_cpp.py --shape tinyllama --prompts 64 512 --clean
Exits with status 77 when llama-cpp-python is missing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

SHAPES = {
    "tinyllama": {"arch": "llama", "vocab": 32000, "hidden": 2048, "ff": 5632, "layers": 22,
                  "heads": 32, "kv_heads": 4, "head_dim": 64, "tied": False, "qk_norm": False},
    "qwen3": {"arch": "qwen3", "vocab": 151936, "hidden": 1024, "ff": 3072, "layers": 28,
              "heads": 16, "kv_heads": 8, "head_dim": 128, "tied": True, "qk_norm": True},
    "small": {"arch": "llama", "vocab": 32000, "hidden": 1024, "ff": 2816, "layers": 16,
              "heads": 16, "kv_heads": 4, "head_dim": 64, "tied": False, "qk_norm": False},
}

FTYPES = {"q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
          "q4_k_m": "LLAMA_FTYPE_MOSTLY_Q4_K_M"}


def write_f16(path, s):
    """A random-weight F16 GGUF of shape `s` (norms F32), one tensor drawn at a time."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(1)
    h, hd = s["hidden"], s["head_dim"]
    w = gguf.GGUFWriter(path, s["arch"])
    w.add_context_length(4096)
    w.add_embedding_length(h)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ff"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(s["vocab"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("none")

    def matrix(rows, cols, scale=None):
        x = rng.standard_normal((rows, cols), dtype=np.float32)
        x *= 1 / np.sqrt(cols) if scale is None else scale
        return x.astype(np.float16)

    def norm(n):
        return np.ones(n, dtype=np.float32)

    # Tied tables are the output projection too: scaled like one.
    w.add_tensor("token_embd.weight", matrix(s["vocab"], h, 1 / np.sqrt(h) if s["tied"] else 1.0))
    w.add_tensor("output_norm.weight", norm(h))
    if not s["tied"]:
        w.add_tensor("output.weight", matrix(s["vocab"], h))
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    for layer in range(s["layers"]):
        p = f"blk.{layer}."
        w.add_tensor(p + "attn_norm.weight", norm(h))
        w.add_tensor(p + "attn_q.weight", matrix(q, h))
        w.add_tensor(p + "attn_k.weight", matrix(kv, h))
        w.add_tensor(p + "attn_v.weight", matrix(kv, h))
        if s["qk_norm"]:
            w.add_tensor(p + "attn_q_norm.weight", norm(hd))
            w.add_tensor(p + "attn_k_norm.weight", norm(hd))
        w.add_tensor(p + "attn_output.weight", matrix(h, q))
        w.add_tensor(p + "ffn_norm.weight", norm(h))
        w.add_tensor(p + "ffn_gate.weight", matrix(s["ff"], h))
        w.add_tensor(p + "ffn_up.weight", matrix(s["ff"], h))
        w.add_tensor(p + "ffn_down.weight", matrix(h, s["ff"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def build(scratch, shape, quants):
    """The quantized files of `shape` (built when missing; the F16 one is deleted)."""
    import llama_cpp

    os.makedirs(scratch, exist_ok=True)
    f16 = os.path.join(scratch, f"{shape}-f16.gguf")
    files = {tag: os.path.join(scratch, f"{shape}-{tag}.gguf") for tag in quants}
    missing = [tag for tag, path in files.items() if not os.path.exists(path)]
    try:
        if missing and not os.path.exists(f16):
            print(f"writing {f16}", file=sys.stderr, flush=True)
            write_f16(f16 + ".tmp", SHAPES[shape])
            os.replace(f16 + ".tmp", f16)
        for tag in missing:
            print(f"quantizing {files[tag]}", file=sys.stderr, flush=True)
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = getattr(llama_cpp, FTYPES[tag])
            params.nthread = 2
            tmp = files[tag] + ".tmp"
            if llama_cpp.llama_model_quantize(f16.encode(), tmp.encode(), params):
                raise SystemExit(f"quantizing {tag} failed")
            os.replace(tmp, files[tag])
    finally:
        for path in (f16, f16 + ".tmp"):
            if os.path.exists(path):
                os.remove(path)
    return files


def prompt_ids(n, vocab):
    return [(i * 7919 + 13) % vocab for i in range(n)]


def vm_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


# --kv-type -> llama.cpp's GGML type id.
KV_TYPES = {"f32": 0, "f16": 1}


def llama_worker(path, threads, n_ctx, vocab, kv_type):
    """Serves rounds over stdin/stdout: `PP TG` -> {"pp_tok_s", "tg_tok_s"}; `rss` ->
    {"peak_rss_kb", "base_rss_kb"} (peak, and the resident set before the model)."""
    import numpy as np
    from llama_cpp import Llama

    base = vm_kb("VmRSS")
    # n_batch = n_ctx: llama-cpp-python keeps n_batch rows of scores; the compute
    # batch (n_ubatch) stays 512.
    llm = Llama(model_path=path, n_ctx=n_ctx, n_batch=n_ctx, n_ubatch=512, n_threads=threads,
                n_threads_batch=threads, flash_attn=False, type_k=KV_TYPES[kv_type],
                type_v=KV_TYPES[kv_type], verbose=False)

    def round_(pp, tg):
        llm.reset()
        start = time.perf_counter()
        llm.eval(prompt_ids(pp, vocab))
        prefill = time.perf_counter() - start
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        start = time.perf_counter()
        for _ in range(tg):
            llm.eval([token])
            token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        decode = time.perf_counter() - start
        return {"pp_tok_s": pp / prefill, "tg_tok_s": tg / max(decode, 1e-9)}

    round_(8, 2)  # warm-up: reads every weight once, as rml's
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "rss":
            print(json.dumps({"peak_rss_kb": vm_kb("VmHWM"), "base_rss_kb": base}), flush=True)
            break
        pp, tg = map(int, line.split())
        print(json.dumps(round_(pp, tg)), flush=True)
    llm.close()


class Llama:
    """A llama.cpp worker process for one file and thread count."""

    def __init__(self, path, threads, n_ctx, vocab, kv_type):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--llama-worker", path, str(threads),
             str(n_ctx), str(vocab), kv_type], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("llama.cpp worker failed to start")

    def ask(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def round(self, pp, tg):
        r = self.ask(f"{pp} {tg}")
        return r["pp_tok_s"], r["tg_tok_s"]

    def close(self):
        r = self.ask("rss")
        self.proc.wait()
        return r


def rml_round(binary, path, threads, pp, tg, kv_type):
    out = subprocess.run([binary, path, str(threads), str(pp), str(tg), "1", kv_type],
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(line) for line in out.strip().splitlines()]
    return (lines[0]["pp_tok_s"], lines[0]["tg_tok_s"]), lines[1]


def cell(values):
    return f"{statistics.median(values):.1f} ({min(values):.1f}–{max(values):.1f})"


def ratio(a, b):
    return f"{statistics.median(a) / statistics.median(b):.2f}"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--llama-worker":
        path, threads, n_ctx, vocab = sys.argv[2], *map(int, sys.argv[3:6])
        return llama_worker(path, threads, n_ctx, vocab, sys.argv[6])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen3", choices=list(SHAPES), help="model shape (default qwen3)")
    ap.add_argument("--quants", nargs="+", default=list(FTYPES), choices=list(FTYPES))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompts", type=int, nargs="+", default=[64], help="prompt lengths (default 64)")
    ap.add_argument("--decode", type=int, default=32, help="decode tokens per round (default 32)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kv-type", default="f32", choices=list(KV_TYPES),
                    help="KV cache element type of both sides (default f32)")
    ap.add_argument("--scratch", default="/tmp/rml-llm-bench", help="model cache directory")
    ap.add_argument("--clean", action="store_true", help="delete the model cache at the end")
    ap.add_argument("--binary", default=os.path.join(ROOT, "target", "release", "examples", "llm_bench"))
    args = ap.parse_args()
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:
        print(f"llm_llama_cpp.py: needs llama-cpp-python ({e})", file=sys.stderr)
        sys.exit(77)
    if not os.path.exists(args.binary):
        raise SystemExit(f"{args.binary} missing: cargo build --release -p rml-llm --example llm_bench")
    shape = SHAPES[args.shape]
    files = build(args.scratch, args.shape, args.quants)
    print(f"shape {args.shape} {shape}; load average before: {os.getloadavg()[0]:.2f}; "
          f"{args.rounds} rounds, decode {args.decode}, {args.kv_type} KV cache; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print("| file | MB | threads | prompt | rml pp tok/s | llama.cpp pp tok/s | pp ratio "
          "| rml decode tok/s | llama.cpp decode tok/s | decode ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rss_rows = []
    for tag, path in files.items():
        size = os.path.getsize(path)
        for threads in args.threads:
            llm = Llama(path, threads, max(args.prompts) + args.decode + 64, shape["vocab"], args.kv_type)
            rss = None
            for pp in args.prompts:
                res = {"rml": ([], []), "llama": ([], [])}
                for _ in range(args.rounds):
                    (p, t), rss_pp = rml_round(args.binary, path, threads, pp, args.decode, args.kv_type)
                    if rss is None or rss_pp["peak_rss_kb"] > rss["peak_rss_kb"]:
                        rss = rss_pp
                    res["rml"][0].append(p)
                    res["rml"][1].append(t)
                    p, t = llm.round(pp, args.decode)
                    res["llama"][0].append(p)
                    res["llama"][1].append(t)
                (rp, rt), (lp, lt) = res["rml"], res["llama"]
                print(f"| {tag} | {size / 1e6:.0f} | {threads} | {pp} | {cell(rp)} | {cell(lp)} | {ratio(rp, lp)} "
                      f"| {cell(rt)} | {cell(lt)} | {ratio(rt, lt)} |", flush=True)
            lr = llm.close()
            budget = (size + rss["kv_bytes"]) * 1.1
            rss_rows.append(
                f"| {tag} | {threads} | {size / 2**20:.0f} | {rss['kv_bytes'] / 2**20:.1f} | {budget / 2**20:.0f} "
                f"| {rss['peak_rss_kb'] / 1024:.0f} | {rss['peak_rss_kb'] * 1024 / budget:.2f} "
                f"| {(lr['peak_rss_kb'] - lr['base_rss_kb']) / 1024:.0f} |")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print("\nPeak RSS (MiB; rml's KV cache sized for the longest prompt + decode; budget = "
          "(file + KV) x 1.1; llama.cpp = worker peak minus the interpreter before loading)")
    print("| file | threads | file MiB | rml KV MiB | budget | rml peak RSS | rml / budget | llama.cpp peak RSS |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rss_rows))
    if args.clean:
        for path in files.values():
            os.remove(path)


if __name__ == "__main__":
    main()
