#!/usr/bin/env python3
"""Single-thread encode throughput: rml's tokenizer vs Hugging Face ``tokenizers``.

For each committed fixture tokenizer (``rml-llm/tests/fixtures/tokenizers/*.tokenizer.json``)
both encode the same ~1 MB text (the fixture corpus, shuffled and repeated with a fixed
seed) without adding special tokens. The two are interleaved run by run, so load on this
shared machine hits both alike; the script first checks that both produce the same ids
(count and checksum), then reports the median time of each, the spread (min–max) and the
ratio (HF time / rml time: above 1 means rml is faster).

    python scripts/bench/tokenizer_throughput.py [--repeats 7] [--mb 1.0] [--only NAME ...]

Needs ``tokenizers`` (the ci/requirements.txt pin) and cargo; builds the
``tokenize_throughput`` example in release mode.
"""

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "rml-llm" / "tests" / "fixtures" / "tokenizers"


def corpus(megabytes: float) -> str:
    """The fixture texts, shuffled with a fixed seed and repeated to the wanted size."""
    texts = []
    for path in sorted(FIXTURES.glob("*.expected.json")):
        texts += [c["text"] for c in json.loads(path.read_text())["cases"]]
    rng = random.Random(20261130)
    out, size = [], 0
    while size < megabytes * 1e6:
        rng.shuffle(texts)
        for t in texts:
            out.append(t)
            size += len(t.encode())
    return "\n".join(out)


def checksum(ids) -> int:
    p = (1 << 61) - 1
    return sum((i + 1) * (x + 1) % p for i, x in enumerate(ids)) % p


def rml_binary() -> pathlib.Path:
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "rml-llm", "--example", "tokenize_throughput"],
        cwd=ROOT, check=True,
    )
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "examples" / "tokenize_throughput"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    binary = rml_binary()
    text = corpus(args.mb)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        text_path = f.name
    print(f"text: {len(text.encode()) / 1e6:.2f} MB, {args.repeats} interleaved runs each, one thread")
    print("| tokenizer | tokens | HF median s (min–max) | rml median s (min–max) | HF / rml |")
    print("|---|---|---|---|---|")
    ratios = []
    for path in sorted(FIXTURES.glob("*.tokenizer.json")):
        name = path.name.removesuffix(".tokenizer.json")
        if args.only and name not in args.only:
            continue
        hf = Tokenizer.from_file(str(path))
        hf_times, rml_times, hf_ids = [], [], None
        for _ in range(args.repeats):
            start = time.perf_counter()
            hf_ids = hf.encode(text, add_special_tokens=False).ids
            hf_times.append(time.perf_counter() - start)
            out = subprocess.run([binary, path, text_path, "1"], capture_output=True, text=True,
                                 check=True)
            run = json.loads(out.stdout)
            rml_times += run["seconds"]
        if (run["tokens"], run["checksum"]) != (len(hf_ids), checksum(hf_ids)):
            raise SystemExit(f"{name}: rml and HF ids differ ({run['tokens']} vs {len(hf_ids)} tokens)")
        hf_med, rml_med = statistics.median(hf_times), statistics.median(rml_times)
        ratios.append(hf_med / rml_med)
        print(f"| {name} | {len(hf_ids)} | {hf_med:.3f} ({min(hf_times):.3f}–{max(hf_times):.3f}) "
              f"| {rml_med:.3f} ({min(rml_times):.3f}–{max(rml_times):.3f}) | {hf_med / rml_med:.2f} |")
    if ratios:
        print(f"geometric mean HF / rml: {statistics.geometric_mean(ratios):.2f}")
    os.unlink(text_path)


if __name__ == "__main__":
    main()
