#!/usr/bin/env python3
"""Turns `cargo bench -p rml-kernels --bench vector -- --output-format bencher`
output (stdin) into the markdown speed table of docs/kernels.md.

Columns: L1 time per call for the forced scalar path and the best path (criterion
point estimate ± its spread), their ratio, and the DRAM-sized run as GB/s of bytes
read plus written (the bytes per element each kernel moves are those of
benches/vector.rs).
"""
import re
import sys

BYTES = {"add": 12, "sum": 4, "max": 4, "variance": 4,
         "f16_to_f32": 6, "bf16_to_f32": 6, "f32_to_f16": 6, "f32_to_bf16": 6}
L1, BIG = 2048, 16 << 20


def main():
    rows = {}
    for line in sys.stdin:
        m = re.match(r"test (\S+)/(\w+)/(\w+) \.\.\. bench:\s+([\d,]+) ns/iter \(\+/- ([\d,]+)\)", line)
        if not m:
            continue
        name, case, isa, ns, pm = m.groups()
        rows.setdefault(name, {})[case] = (int(ns.replace(",", "")), int(pm.replace(",", "")), isa)

    print("| kernel | L1 scalar (µs) | L1 best (µs) | best / scalar | DRAM GB/s (best) |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        s, b, d = r.get("l1_scalar"), r.get("l1_best"), r.get("dram_best")
        cell = lambda t: f"{t[0] / 1000:.2f} ± {t[1] / 1000:.2f}" if t else "–"
        ratio = f"{s[0] / b[0]:.1f}×" if s and b else "–"
        gbs = f"{BYTES.get(name, 8) * BIG / d[0]:.1f}" if d else "–"
        print(f"| {name} | {cell(s)} | {cell(b)} ({b[2] if b else ''}) | {ratio} | {gbs} |")


if __name__ == "__main__":
    main()
