"""Tables and a plot from ``bench/frameworks.py``'s JSON results.

For each (model, batch, threads) cell the ratio is (fastest framework mode's time) /
(rml's time): above 1 rml wins. ``--metric cpu`` (default) uses process CPU time per
run (all threads), ``wall`` the median wall-clock time. Prints Markdown (the per-cell
table, geometric means per batch × threads row, cells won, the worst cell, and rml's
2-thread / 1-thread wall ratio) and writes a PNG bar chart of the ratios. With
``--peak`` (the single-core FMA peak in GFLOP/s, as ``scripts/bench/gemm_peers.sh``
measures it) and FLOP counts in the cells, it adds each cell's compute rate against
that peak and its *ceiling*: the ratio rml would reach running the model's
multiply-adds at the peak, which bounds what any kernel work can buy in that cell.

    python bench/report.py RESULTS.json [MORE.json …] [--metric cpu|wall]
        [--peak GFLOPS] [--plot docs/benchmarks.png] [--merged-out MERGED.json]
"""

import argparse
import json
import math
import sys
from collections import defaultdict

FRAMEWORK_MODES = ("torch_eager", "torch_compile", "jax_jit", "tf_eager", "tf_xla")


def timed(mode: dict, metric: str):
    """The mode's time in µs under ``metric``, or ``None`` (failed, or not timed)."""
    if not mode or mode.get("error") or not mode.get("ok"):
        return None
    return mode.get("cpu_us" if metric == "cpu" else "wall_us")


def ratios(cells: list, metric: str) -> list:
    """``(cell, best framework mode, its time, rml time, ratio)`` for cells where rml
    and at least one framework mode were timed."""
    rows = []
    for c in cells:
        modes = c.get("modes", {})
        fw = {m: timed(modes.get(m), metric) for m in FRAMEWORK_MODES}
        fw = {m: t for m, t in fw.items() if t}
        rml = timed(modes.get("rml"), metric)
        if fw and rml:
            best = min(fw, key=fw.get)
            rows.append((c, best, fw[best], rml, fw[best] / rml))
    return rows


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def fmt_ms(us):
    return "—" if us is None else f"{us / 1e3:.3g}"


def markdown(results: dict, metric: str) -> str:
    """The report's Markdown."""
    cells = results["cells"]
    rows = ratios(cells, metric)
    out = [f"Metric: **{metric}** time per run, ms (ratio = fastest framework / rml; "
           "> 1 means rml is faster).", "",
           "| model | batch | threads | " + " | ".join(FRAMEWORK_MODES)
           + " | rml | fastest | ratio |",
           "|---|---|---|" + "---|" * (len(FRAMEWORK_MODES) + 3)]
    by_cell = {(r[0]["model"], r[0]["batch"], r[0]["threads"]): r for r in rows}
    for c in cells:
        modes = c.get("modes", {})
        times = [fmt_ms(timed(modes.get(m), metric)) if not modes.get(m, {}).get("error")
                 else "fail" for m in (*FRAMEWORK_MODES, "rml")]
        r = by_cell.get((c["model"], c["batch"], c["threads"]))
        tail = [r[1], f"{r[4]:.2f}"] if r else ["—", "—"]
        out.append(f"| {c['model']} | {c['batch']} | {c['threads']} | "
                   + " | ".join(times + tail) + " |")
    groups = defaultdict(list)
    for c, _, _, _, ratio in rows:
        groups[(c["batch"], c["threads"])].append(ratio)
    out += ["", "| batch | threads | cells | rml won | geomean ratio |", "|---|---|---|---|---|"]
    for (b, t), rs in sorted(groups.items()):
        out.append(f"| {b} | {t} | {len(rs)} | {sum(r > 1 for r in rs)} | {geomean(rs):.2f} |")
    all_r = [r[4] for r in rows]
    if rows:
        worst = min(rows, key=lambda r: r[4])
        c = worst[0]
        out += ["", f"All cells: rml won {sum(r > 1 for r in all_r)} of {len(all_r)}, "
                f"geometric mean ratio {geomean(all_r):.2f}; worst cell {c['model']} batch "
                f"{c['batch']} threads {c['threads']}: {worst[4]:.3g} (rml {fmt_ms(worst[3])} ms "
                f"vs {worst[1]} {fmt_ms(worst[2])} ms)."]
    scaling = []
    for c in cells:
        if c["threads"] != 2:
            continue
        one = next((d for d in cells if (d["model"], d["batch"], d["threads"])
                    == (c["model"], c["batch"], 1)), None)
        a = timed(one and one.get("modes", {}).get("rml"), "wall")
        b = timed(c.get("modes", {}).get("rml"), "wall")
        if a and b:
            scaling.append(f"{c['model']}/{c['batch']}: {b / a:.2f}")
    if scaling:
        out += ["", "rml wall time, 2 threads / 1 thread: " + ", ".join(scaling) + "."]
    return "\n".join(out) + "\n"


def compute_rates(results: dict, metric: str, peak: float) -> str:
    """Markdown: per cell, the FLOPs of one run, rml's and the fastest framework's
    GFLOP/s and their share of the FMA peak (``peak`` GFLOP/s per core; per CPU-second
    under the cpu metric, times the thread count under wall), and the ceiling ratio
    (fastest framework time / time at the peak)."""
    rows = [r for r in ratios(results["cells"], metric) if r[0].get("flops")]
    if not rows:
        return ""
    out = ["", f"Compute rate ({metric} time; FMA peak {peak:g} GFLOP/s per core; "
           "ceiling = the ratio at the peak):", "",
           "| model | batch | threads | GFLOP | rml GFLOP/s | % peak | fastest GFLOP/s "
           "| % peak | ratio | ceiling |", "|---|---|---|---|---|---|---|---|---|---|"]
    for c, _, best_us, rml_us, ratio in rows:
        top = peak * (1 if metric == "cpu" else c["threads"])
        gflop = c["flops"] / 1e9
        rml_rate, best_rate = gflop / (rml_us / 1e6), gflop / (best_us / 1e6)
        out.append(f"| {c['model']} | {c['batch']} | {c['threads']} | {gflop:.3g} | "
                   f"{rml_rate:.1f} | {100 * rml_rate / top:.0f} | {best_rate:.1f} | "
                   f"{100 * best_rate / top:.0f} | {ratio:.2f} | {top / best_rate:.2f} |")
    return "\n".join(out) + "\n"


def plot(results: dict, metric: str, path: str) -> None:
    """A bar per cell (log ratio), colored by thread count, a line at 1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ratios(results["cells"], metric)
    labels = [f"{c['model']}\nb{c['batch']} t{c['threads']}" for c, *_ in rows]
    values = [r[4] for r in rows]
    colors = ["tab:blue" if c["threads"] == 1 else "tab:orange" for c, *_ in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows)), 3.6), dpi=90)
    ax.bar(range(len(rows)), values, color=colors)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=90)
    ax.set_ylabel(f"fastest framework / rml ({metric})")
    ax.set_title("rml vs fastest of torch/torch.compile/jax.jit/tf/tf+XLA (>1: rml faster)",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def merge(parts: list) -> dict:
    """One results dict from several: the cells of all (a cell measured twice keeps
    the first file's), sorted by threads, the first file's model order and batch;
    ``meta`` is the first file's, with each file's own kept under ``parts``."""
    if len(parts) == 1:
        return parts[0]
    order = {}
    for p in parts:
        for m in p["meta"].get("models", []):
            order.setdefault(m, len(order))
    unique = {}
    for p in parts:
        for c in p["cells"]:
            unique.setdefault((c["model"], c["batch"], c["threads"]), c)
    cells = sorted(unique.values(),
                   key=lambda c: (c["threads"], order.get(c["model"], 0), c["batch"]))
    return {"meta": {**parts[0]["meta"], "parts": [p["meta"] for p in parts]}, "cells": cells}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+",
                   help="results files; several (e.g. one sweep per thread count run side "
                        "by side) are merged")
    p.add_argument("--metric", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--plot", help="write a PNG of the ratios here")
    p.add_argument("--merged-out", help="write the merged results file here")
    p.add_argument("--peak", type=float,
                   help="single-core FMA peak, GFLOP/s: adds the compute-rate table")
    args = p.parse_args(argv)
    results = merge([json.load(open(path)) for path in args.results])
    if args.merged_out:
        with open(args.merged_out, "w") as f:
            f.write(json.dumps(results, indent=1) + "\n")
    sys.stdout.write(markdown(results, args.metric))
    if args.peak:
        sys.stdout.write(compute_rates(results, args.metric, args.peak))
    if args.plot:
        plot(results, args.metric, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
