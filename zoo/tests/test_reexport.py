"""Re-exporting every zoo model reproduces the committed fixtures.

``graph.json``, ``weights.safetensors`` and ``inputs.npz`` must match byte for byte:
they depend only on the exporters and the seeded weights. ``expected.npz`` holds the
framework's own outputs, whose last bits depend on the CPU's kernels (oneDNN, Eigen and
XLA pick code paths by instruction set), so it is compared with ``rtol = 1e-5`` and
``atol = 1e-5 * max(1, max |committed|)`` instead (fixtures written on an AVX-512 Zen 4
and re-exported on an AVX2 Zen 3 differed by up to 5.2e-6 on tiny_gpt's outputs of
magnitude 14, in all three frameworks); member names and dtypes must match exactly.
"""

from pathlib import Path

import numpy as np
import pytest

from zoo import make_fixtures, models

COMMITTED = make_fixtures.DEST
CASES = [(m, f) for f in models.FRAMEWORKS for m in models.MODELS]


@pytest.mark.parametrize("name,framework", CASES, ids=[f"{m}/{f}" for m, f in CASES])
def test_reexport_matches_committed(name, framework, tmp_path: Path):
    make_fixtures.write_fixture(name, framework, tmp_path)
    fresh, committed = tmp_path / name / framework, COMMITTED / name / framework
    assert sorted(p.name for p in fresh.iterdir()) == sorted(p.name for p in committed.iterdir())
    for file in ("graph.json", "weights.safetensors", "inputs.npz"):
        assert (fresh / file).read_bytes() == (committed / file).read_bytes(), (
            f"{name}/{framework}/{file} differs from the committed fixture; "
            "re-run zoo/make_fixtures.py and review the diff")
    got, want = np.load(fresh / "expected.npz"), np.load(committed / "expected.npz")
    assert list(got) == list(want)
    for key in want:
        assert got[key].dtype == want[key].dtype
        scale = max(1.0, float(np.max(np.abs(want[key]), initial=0.0)))
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5 * scale,
                                   err_msg=f"{name}/{framework}: expected.npz[{key}]")


def test_npz_writer_is_deterministic(tmp_path: Path):
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "ids": np.arange(3)}
    make_fixtures.write_npz(tmp_path / "1.npz", arrays)
    make_fixtures.write_npz(tmp_path / "2.npz", arrays)
    assert (tmp_path / "1.npz").read_bytes() == (tmp_path / "2.npz").read_bytes()
    loaded = np.load(tmp_path / "1.npz")
    assert list(loaded) == ["a", "ids"]
    assert all(np.array_equal(loaded[k], v) for k, v in arrays.items())
