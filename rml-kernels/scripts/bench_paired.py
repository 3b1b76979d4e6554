#!/usr/bin/env python3
"""Runs each vector kernel's DRAM-sized benchmark beside its own `copy` and `sum`
and prints the markdown table of docs/kernels.md ("Paired DRAM runs").

On a shared machine the memory side and the core's share drift within minutes, so
a one-pass sweep compares kernels with a `copy` measured long before or after
them. Here every kernel runs `RUNS` times in one bench process with `copy` and
`sum` (quick criterion, `RML_BENCH_QUICK=1`), and each run's ratio uses that
run's reference: `sum` (read-only) for max and variance, `copy` for the rest.

    cargo bench -p rml-kernels --bench vector --no-run   # prints the binary's path
    python3 rml-kernels/scripts/bench_paired.py target/release/deps/vector-<hash>
"""
import os
import re
import statistics
import subprocess
import sys

from bench_table import BIG, BYTES

KERNELS = ["exp", "log", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh", "silu",
           "softplus", "relu", "gelu_normal", "add", "mul_row", "softmax",
           "layer_norm", "rms_norm", "max", "variance", "f16_to_f32",
           "bf16_to_f32", "f32_to_f16", "f32_to_bf16"]
READ_ONLY = {"max", "variance"}
RUNS = 3
# glibc's memcpy switches to non-temporal stores only past a threshold it derives
# from the L3 size (beyond 64 MiB on a 260 MiB-L3 Xeon), below which every copied
# line is first read for ownership: ~16 GB/s there against ~30 with streaming
# stores. The kernels stream outputs past 32 MiB, so their peer must too.
NT_MEMCPY = "glibc.cpu.x86_non_temporal_threshold=0x100000"


def run_once(binary, kernel):
    """GB/s of `kernel`, `copy` and `sum` from one bench process."""
    out = subprocess.run(
        [binary, "--bench", "--output-format", "bencher",
         f"^{kernel}/dram|^copy/dram|^sum/dram"],
        env={**os.environ, "RML_BENCH_QUICK": "1", "GLIBC_TUNABLES": NT_MEMCPY},
        capture_output=True, text=True, check=True).stdout
    rates = {}
    for m in re.finditer(r"test (\w+)/dram_best/\w+ \.\.\. bench:\s+([\d,]+) ns/iter", out):
        name, ns = m.group(1), int(m.group(2).replace(",", ""))
        rates[name] = BYTES.get(name, 8) * BIG / ns
    return rates


def main():
    binary = sys.argv[1]
    print("| kernel | GB/s, 3 runs | `copy` GB/s | `sum` GB/s "
          "| % of `copy` (max, variance: of `sum`) per run | median |")
    print("|---|---|---|---|---|---|")
    for kernel in KERNELS:
        runs = [run_once(binary, kernel) for _ in range(RUNS)]
        ref = "sum" if kernel in READ_ONLY else "copy"
        pct = [100 * r[kernel] / r[ref] for r in runs]
        cells = [" / ".join(f"{r[key]:.1f}" for r in runs) for key in (kernel, "copy", "sum")]
        print(f"| {kernel} | {cells[0]} | {cells[1]} | {cells[2]} | "
              f"{' / '.join(f'{p:.0f}' for p in pct)} | {statistics.median(pct):.0f} % |",
              flush=True)


if __name__ == "__main__":
    main()
