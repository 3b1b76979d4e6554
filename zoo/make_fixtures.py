"""Export every zoo model with every framework's route and write the fixtures.

For each model × framework, ``<out>/<model>/<framework>/`` gets ``graph.json`` and
``weights.safetensors`` (``rml_export.save``), ``inputs.npz`` (the inputs, in the dtypes
the graph declares) and ``expected.npz`` (the framework's own outputs), at tiny size.
The npz files are written with fixed zip timestamps, so a re-run gives identical bytes.
``--size bench`` writes the bench size instead (on demand, default ``target/zoo-bench``).
An export that fails is reported (framework, model, error) and the others still run;
the exit status is 1 if any failed.

    python zoo/make_fixtures.py [--model M ...] [--framework F ...] [--size tiny|bench]
                                [--out DIR] [--print-dest]
"""

import argparse
import io
import shutil
import sys
import traceback
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):
    sys.path[:0] = [str(ROOT), str(ROOT / "rml-export")]

from zoo import models, weights  # noqa: E402

DEST = ROOT / "zoo" / "fixtures"
BENCH_DEST = ROOT / "target" / "zoo-bench"
_DTYPES = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}


def write_npz(path: Path, arrays: dict) -> None:
    """An ``np.savez``-compatible file (stored members ``NAME.npy``) whose bytes depend
    only on the arrays: fixed member dates and attributes, members in dict order."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.ascontiguousarray(array), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            z.writestr(info, buf.getvalue())


def export(name: str, framework: str, size: str, inputs: dict):
    """``(graph, outputs)``: model ``name`` at ``size`` exported by ``framework``'s
    route, and the framework's own outputs on ``inputs``."""
    import rml_export

    if framework == "torch":
        from zoo import torch_models as m

        graph = rml_export.export_torch(m.build(name, size), inputs)
    elif framework == "jax":
        from zoo import jax_models as m

        fn, params = m.build(name, size)
        graph = rml_export.export_jax(fn, params, inputs)
    else:
        from zoo import tf_models as m

        graph = rml_export.export_tf(m.build(name, size), inputs)
    return graph, m.run(name, size, inputs)


def write_fixture(name: str, framework: str, out: Path, size: str = "tiny") -> None:
    """Exports one model with one framework into ``out/<name>/<framework>/``."""
    import rml_export

    inputs = weights.inputs(name, size)
    graph, outputs = export(name, framework, size, inputs)
    if sorted(graph.outputs) != sorted(outputs):
        raise ValueError(f"graph outputs {graph.outputs} are not the model's {list(outputs)}")
    dest = out / name / framework
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    graph.metadata.setdefault("model", f"zoo/{name}")
    rml_export.save(graph, dest / "graph.json", weights_file="weights.safetensors")
    declared = {k: _DTYPES[graph.types[k].dtype] for k in graph.inputs}
    write_npz(dest / "inputs.npz", {k: inputs[k].astype(declared[k]) for k in graph.inputs})
    write_npz(dest / "expected.npz", {k: outputs[k] for k in graph.outputs})


def main(argv=None) -> int:
    """The command line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", choices=models.MODELS,
                    help="a model to export (repeatable; default: all)")
    ap.add_argument("--framework", action="append", choices=models.FRAMEWORKS,
                    help="a framework (repeatable; default: all)")
    ap.add_argument("--size", choices=models.SIZES, default="tiny",
                    help="model size (default tiny, the committed fixtures)")
    ap.add_argument("--out", type=Path,
                    help=f"output folder (default {DEST}; {BENCH_DEST} for bench)")
    ap.add_argument("--print-dest", action="store_true", help="print the default folder and exit")
    ap.add_argument("--traceback", action="store_true", help="print the traceback of failures")
    args = ap.parse_args(argv)
    out = args.out or (DEST if args.size == "tiny" else BENCH_DEST)
    if args.print_dest:
        print(DEST)
        return 0
    failed = []
    for framework in args.framework or models.FRAMEWORKS:
        for name in args.model or models.MODELS:
            try:
                write_fixture(name, framework, out, args.size)
                print(f"ok    {name}/{framework}", flush=True)
            except Exception as e:  # report every failure and go on with the others
                failed.append(f"{name}/{framework}")
                first = str(e).strip().splitlines()[0] if str(e).strip() else ""
                print(f"FAIL  {name}/{framework}: {type(e).__name__}: {first}", flush=True)
                if args.traceback:
                    traceback.print_exc()
    if failed:
        print(f"{len(failed)} failed: {' '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
