"""Checks output rows printed by an embedded run against a fixture's expected.npz.

Usage: compare_rows.py EXPECTED_NPZ [KEY] < output

The run prints one line per output row, `y[i]: v v v ...` (other lines are ignored).
The rows must match `KEY` (default `y`) of EXPECTED_NPZ in shape and agree within
1e-4 relative plus 1e-4 absolute.
"""

import re
import sys

import numpy as np

ROW = re.compile(r"^y\[(\d+)\]:((?:\s+\S+)*)\s*$")


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    key = sys.argv[2] if len(sys.argv) == 3 else "y"
    expected = np.load(sys.argv[1])[key].astype(np.float64)
    rows = {}
    for line in sys.stdin:
        match = ROW.match(line.strip())
        if match:
            rows[int(match.group(1))] = [float(v) for v in match.group(2).split()]
    if sorted(rows) != list(range(len(rows))) or not rows:
        print(f"compare_rows: expected rows y[0]..y[n-1], got indices {sorted(rows)}")
        return 1
    got = np.array([rows[i] for i in range(len(rows))], dtype=np.float64)
    if got.shape != expected.reshape(expected.shape[0], -1).shape:
        print(f"compare_rows: got shape {got.shape}, expected {expected.shape}")
        return 1
    expected = expected.reshape(got.shape)
    err = np.abs(got - expected)
    bound = 1e-4 + 1e-4 * np.abs(expected)
    print(f"compare_rows: {got.size} values, max abs error {err.max():.3g}")
    if (err > bound).any():
        r, c = (int(v) for v in np.unravel_index(np.argmax(err - bound), err.shape))
        print(f"compare_rows: y[{r}][{c}] = {got[r, c]}, expected {expected[r, c]}: out of tolerance")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
