"""Run an exported rml-graph through rml (the ``rml-host run`` CLI) from a Python test.

The exporter tests check a framework's own output against rml's, so they need the
``rml-host`` binary: :func:`rml_host` finds it (``$RML_HOST``, else
``target/release/rml-host`` of this repository, else it runs
``cargo build --release -p rml-host`` once). Typical use::

    from rml_runner import run_exported, assert_outputs_close

    graph = rml_export.export_torch(model, inputs)
    got = run_exported(graph, inputs, tmp_path)          # {output name: np.ndarray}
    assert_outputs_close(got, expected)                  # rtol = atol = 1e-4
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
_BINARY: Path | None = None


def rml_host() -> Path:
    """The ``rml-host`` binary, built (release) on first use when it is missing."""
    global _BINARY
    if _BINARY is not None:
        return _BINARY
    if os.environ.get("RML_HOST"):
        _BINARY = Path(os.environ["RML_HOST"])
        return _BINARY
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    binary = target / "release" / "rml-host"
    if not binary.exists():
        subprocess.run(
            ["cargo", "build", "--release", "-p", "rml-host"], cwd=REPO, check=True
        )
    _BINARY = binary
    return binary


def run_graph(
    graph_json: str | Path,
    inputs: dict[str, np.ndarray],
    out_dir: str | Path,
    *,
    fusion: bool = True,
    threads: int = 1,
) -> dict[str, np.ndarray]:
    """Run ``graph_json`` on ``inputs`` (by input name); returns the outputs by name.

    The inputs are written as ``out_dir/inputs/NAME.npy`` and the outputs read back from
    ``out_dir/outputs/NAME.npy``. A failing run raises ``RuntimeError`` with rml's message.
    """
    out_dir = Path(out_dir)
    (out_dir / "inputs").mkdir(parents=True, exist_ok=True)
    args = [str(rml_host()), "run", str(graph_json), "--threads", str(threads)]
    for name, value in inputs.items():
        file = out_dir / "inputs" / f"{name}.npy"
        np.save(file, np.ascontiguousarray(value))
        args += ["--input", f"{name}={file}"]
    outputs = out_dir / "outputs"
    args += ["--output-dir", str(outputs)]
    if not fusion:
        args.append("--no-fusion")
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"rml-host run {graph_json} failed:\n{done.stderr}{done.stdout}")
    names = [o["name"] for o in json.loads(Path(graph_json).read_text())["outputs"]]
    return {name: np.load(outputs / f"{name}.npy") for name in names}


def run_exported(graph, inputs: dict[str, np.ndarray], out_dir: str | Path, **options):
    """Save an exporter :class:`~rml_export.Graph` under ``out_dir`` and run it in rml."""
    import rml_export

    path = rml_export.save(graph, Path(out_dir) / "graph.json",
                           weights_file="weights.safetensors")
    return run_graph(path, inputs, out_dir, **options)


def assert_outputs_close(
    got: dict[str, np.ndarray],
    want: dict[str, np.ndarray],
    rtol: float = 1e-4,
    atol: float = 1e-4,
) -> None:
    """Same output names, shapes and dtypes kinds, values within ``rtol``/``atol``."""
    assert list(got) == list(want), f"outputs {list(got)} != expected {list(want)}"
    for name, expected in want.items():
        actual = got[name]
        assert actual.shape == expected.shape, (
            f"output {name!r}: shape {actual.shape} != expected {expected.shape}"
        )
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol,
                                   err_msg=f"output {name!r}")
