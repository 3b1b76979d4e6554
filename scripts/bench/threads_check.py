#!/usr/bin/env python3
"""Checks that 2 threads never cost more than 1 on the zoo graphs.

Runs `rml-host bench GRAPH --batch B --threads 1,2 --json` on every zoo fixture graph
(zoo/fixtures/*/torch/graph.json unless graphs are given) at each batch, `--repeats`
times with the thread counts interleaved, and prints per (graph, batch) the median
wall time and the median process CPU time per run for 1 and 2 threads and their
ratios (2 threads / 1). A cell is flagged when the 2-thread median exceeds the
1-thread one by more than `--noise` (5 % by default) in wall time or CPU time.
Standard library only; build first with `cargo build --release -p rml-host`.
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bench(binary, graph, batch, threads, runs):
    """One `rml-host bench` cell: (wall median us, cpu us per run)."""
    out = subprocess.run(
        [binary, "bench", graph, "--batch", str(batch), "--threads", str(threads),
         "--runs", str(runs), "--json"],
        check=True, capture_output=True, text=True).stdout
    row = json.loads(out)[0]
    return row["median_us"], row["cpu_us"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("graphs", nargs="*", help="graph files (default: the zoo fixtures)")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--runs", type=int, default=50, help="timed runs per cell")
    ap.add_argument("--noise", type=float, default=0.05)
    ap.add_argument("--binary", default=os.path.join(ROOT, "target/release/rml-host"))
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    graphs = args.graphs or sorted(glob.glob(os.path.join(ROOT, "zoo/fixtures/*/torch/graph.json")))
    rows, flagged = [], 0
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'graph':<20} {'batch':>5} {'wall1 us':>10} {'wall2 us':>10} {'wall x':>7} "
          f"{'cpu1 us':>10} {'cpu2 us':>10} {'cpu x':>7}")
    for graph in graphs:
        name = os.path.basename(os.path.dirname(os.path.dirname(graph))) or graph
        for batch in [int(b) for b in args.batches.split(",")]:
            cells = {1: ([], []), 2: ([], [])}
            for _ in range(args.repeats):
                for t in (1, 2):
                    wall, cpu = bench(args.binary, graph, batch, t, args.runs)
                    cells[t][0].append(wall)
                    cells[t][1].append(cpu if cpu is not None else float("nan"))
            w1, w2 = (statistics.median(cells[t][0]) for t in (1, 2))
            c1, c2 = (statistics.median(cells[t][1]) for t in (1, 2))
            wx, cx = w2 / w1, c2 / c1
            bad = wx > 1 + args.noise or cx > 1 + args.noise
            flagged += bad
            print(f"{name:<20} {batch:>5} {w1:>10.1f} {w2:>10.1f} {wx:>7.2f} "
                  f"{c1:>10.1f} {c2:>10.1f} {cx:>7.2f}{'  <-- 2 threads cost more' if bad else ''}")
            rows.append(dict(graph=name, batch=batch, wall1_us=w1, wall2_us=w2, cpu1_us=c1,
                             cpu2_us=c2, wall_ratio=wx, cpu_ratio=cx))
    print(f"load average {os.getloadavg()[0]:.1f}; {flagged} of {len(rows)} cells flagged")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
