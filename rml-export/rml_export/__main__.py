"""``python -m rml_export torch|jax|tf MODEL --inputs inputs.npz --out graph.json``.

``MODEL`` is ``package.module:factory``: a callable returning, for ``torch``, an
``nn.Module``; for ``jax``, a ``(fn, params)`` pair; for ``tf``, a ``tf.Module`` or
function. The example inputs come from an ``.npz`` whose keys are the input names.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import numpy as np

from . import ExportError, export_jax, export_tf, export_torch, save


def _factory(spec: str):
    module_name, _, attr = spec.partition(":")
    if not attr:
        raise SystemExit(f"rml_export: MODEL must be 'module:factory', got {spec!r}")
    return getattr(importlib.import_module(module_name), attr)


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, export, write; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m rml_export", description=__doc__)
    parser.add_argument("framework", choices=["torch", "jax", "tf"])
    parser.add_argument("model", help="module:factory returning the model")
    parser.add_argument("--inputs", required=True, help=".npz of example inputs by name")
    parser.add_argument("--out", required=True, help="graph JSON path to write")
    parser.add_argument("--weights", help="safetensors file name (default: <stem>.safetensors)")
    args = parser.parse_args(argv)

    sys.path.insert(0, ".")
    built = _factory(args.model)()
    with np.load(args.inputs) as npz:
        inputs = {k: npz[k] for k in npz.files}
    try:
        if args.framework == "torch":
            graph = export_torch(built, inputs)
        elif args.framework == "jax":
            fn, params = built
            graph = export_jax(fn, params, inputs)
        else:
            graph = export_tf(built, inputs)
    except ExportError as e:
        print(f"rml_export: error: {e}", file=sys.stderr)
        return 1
    path = save(graph, args.out, weights_file=args.weights)
    print(f"wrote {path} ({len(graph.nodes)} nodes, {len(graph.constants)} constants)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
