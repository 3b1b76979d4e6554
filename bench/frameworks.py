"""Benchmark every zoo model (bench size) in rml against PyTorch, JAX and TensorFlow.

Modes: PyTorch eager, ``torch.compile``, JAX ``jit``, TensorFlow eager,
``tf.function(jit_compile=True)`` and rml (the model exported by the torch route, run by
``rml-host bench --json``). For each thread count the sweep runs in its own subprocess
(thread settings must be in the environment before the frameworks load; see
``thread_env``) pinned to that many CPUs. Per (model, batch) cell every mode is built,
warmed up and its outputs checked against PyTorch eager (``close``) before anything is
timed; then the modes are timed round-robin, ``--repeats`` rounds, and each mode's
figure is the median over rounds of its per-run wall time and process CPU time (all
threads). Exported graphs are cached in ``--cache`` (not committed).

    python bench/frameworks.py [--quick] [--models M ...] [--batches 1,8,64]
        [--threads 1,2] [--repeats N] [--out bench/results.json]

``bench/report.py`` turns the JSON into docs/benchmarks.md's tables and plot.
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("torch_eager", "torch_compile", "jax_jit", "tf_eager", "tf_xla", "rml")
QUICK_MODELS = ("mlp", "cnn", "layernorm_gelu")
RTOL = 1e-3
ATOL = 1e-3


def thread_env(threads: int) -> dict:
    """The environment of a worker running ``threads`` threads: OpenMP/MKL (PyTorch's
    intra-op pool), TensorFlow's intra/inter-op pools, and XLA's CPU backend (Eigen
    thread pool off for one thread). PyTorch and TensorFlow are also set in-process
    (``torch.set_num_threads``, ``tf.config.threading``); rml gets ``--threads``."""
    env = dict(os.environ)
    t = str(threads)
    env.update(OMP_NUM_THREADS=t, MKL_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t,
               TF_NUM_INTRAOP_THREADS=t, TF_NUM_INTEROP_THREADS="1",
               TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(ROOT / "rml-export"), str(ROOT)]))
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    return env


def close(got: dict, want: dict):
    """``(ok, max_abs_err)``: every output of ``got`` matches ``want`` within
    ``RTOL``/``ATOL`` (the absolute tolerance scaled by the output's largest magnitude)."""
    import numpy as np

    if sorted(got) != sorted(want):
        return False, float("inf")
    worst, ok = 0.0, True
    for k, w in want.items():
        g = np.asarray(got[k], dtype=np.float64)
        w = np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return False, float("inf")
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        scale = max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
        ok &= bool(np.allclose(g, w, rtol=RTOL, atol=ATOL * scale))
        worst = max(worst, err)
    return ok, worst


class RmlMode:
    """rml through the ``rml-host`` CLI: the torch route's export of the model at this
    batch (cached), checked by ``rml-host run``, timed by ``rml-host bench --json``."""

    def __init__(self, name, batch, inputs, torch_model, threads, rml_host, cache):
        import numpy as np
        import rml_export

        self.dir = Path(cache) / name / f"b{batch}"
        self.graph = self.dir / "graph.json"
        self.threads, self.rml_host = threads, rml_host
        if not self.graph.exists():
            # Exported into a private folder renamed into place, so that sweeps running
            # side by side (one per thread count) never read a half-written export.
            tmp = self.dir.with_name(f"{self.dir.name}.tmp{os.getpid()}")
            shutil.rmtree(tmp, ignore_errors=True)
            (tmp / "inputs").mkdir(parents=True)
            graph = rml_export.export_torch(torch_model, inputs)
            rml_export.save(graph, tmp / "graph.json", weights_file="weights.safetensors")
            dtypes = {"F32": np.float32, "I64": np.int64, "I32": np.int32, "BOOL": np.bool_}
            for k in graph.inputs:
                np.save(tmp / "inputs" / f"{k}.npy",
                        inputs[k].astype(dtypes[graph.types[k].dtype]))
            try:
                tmp.rename(self.dir)
            except OSError:  # another sweep exported it first
                shutil.rmtree(tmp, ignore_errors=True)
                if not self.graph.exists():
                    raise RuntimeError(f"{self.dir} exists without graph.json: remove it")
        self.pairs = [f"--input={p.stem}={p}" for p in sorted((self.dir / "inputs").glob("*.npy"))]

    def outputs(self) -> dict:
        import numpy as np

        out = self.dir / f"out_t{self.threads}"
        subprocess.run([self.rml_host, "run", str(self.graph), "--output-dir", str(out),
                        "--threads", str(self.threads)], check=True, capture_output=True)
        return {p.stem: np.load(p) for p in out.glob("*.npy")}

    def time(self, runs: int):
        """``(median wall µs, mean CPU µs)`` of ``runs`` runs after one warm-up run."""
        res = subprocess.run([self.rml_host, "bench", str(self.graph), *self.pairs,
                              "--threads", str(self.threads), "--runs", str(runs), "--json"],
                             check=True, capture_output=True, text=True)
        cell = json.loads(res.stdout)[0]
        return cell["median_us"], cell["cpu_us"]


def framework_modes(name, inputs, modes):
    """``{mode: zero-argument callable returning outputs as a NumPy dict}`` for the
    framework modes asked for, plus the torch module (for the export)."""
    import numpy as np
    from zoo import shared

    out = {}
    from zoo import torch_models
    import torch

    model = torch_models.build(name, "bench")
    tin = {k: torch.from_numpy(v) for k, v in inputs.items()}

    def torch_call(m):
        def call():
            with torch.inference_mode():
                return shared.named_outputs(m(**tin), lambda t: t.numpy())
        return call

    out["torch_eager"] = torch_call(model)
    if "torch_compile" in modes:
        out["torch_compile"] = torch_call(torch.compile(model))
    if "jax_jit" in modes:
        import jax
        from zoo import jax_models

        fn, params = jax_models.build(name, "bench")
        jfn, jparams = jax.jit(fn), jax.device_put(params)
        jin = {k: jax.device_put(v) for k, v in inputs.items()}
        out["jax_jit"] = lambda: shared.named_outputs(
            jax.block_until_ready(jfn(jparams, **jin)), np.asarray)
    if "tf_eager" in modes or "tf_xla" in modes:
        import tensorflow as tf
        from zoo import tf_models

        module = tf_models.build(name, "bench")
        tfin = {k: tf.constant(v) for k, v in inputs.items()}
        xla = tf.function(module.__call__, jit_compile=True)
        if "tf_eager" in modes:
            out["tf_eager"] = lambda: shared.named_outputs(module(**tfin), lambda t: t.numpy())
        if "tf_xla" in modes:
            out["tf_xla"] = lambda: shared.named_outputs(xla(**tfin), lambda t: t.numpy())
    return out, model


def model_flops(model, inputs) -> int:
    """Floating-point operations of one forward pass of the torch ``model`` on
    ``inputs``, as torch's ``FlopCounterMode`` counts them: 2 per multiply-add of
    the matmuls, convolutions and attention (elementwise work is not counted). With
    the machine's FMA peak this says how near to compute-bound a cell runs."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    tin = {k: torch.from_numpy(v) for k, v in inputs.items()}
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model(**tin)
    return int(counter.get_total_flops())


def add_flops(path: str) -> int:
    """Fills in ``flops`` for every cell of the results file ``path`` that lacks it
    (results of sweeps made before the count was recorded)."""
    from zoo import torch_models, weights

    results = json.loads(Path(path).read_text())
    counted = {}
    for cell in results["cells"]:
        key = (cell["model"], cell["batch"])
        if "flops" not in cell:
            if key not in counted:
                model = torch_models.build(cell["model"], "bench")
                counted[key] = model_flops(model, weights.inputs(key[0], "bench", key[1]))
            cell["flops"] = counted[key]
    Path(path).write_text(json.dumps(results, indent=1) + "\n")
    print(f"{path}: flops of {len(counted)} (model, batch) pairs filled in")
    return 0


def time_calls(call, runs: int):
    """``(median wall µs, mean CPU µs)`` of ``runs`` calls."""
    walls = []
    cpu0 = time.process_time_ns()
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        call()
        walls.append((time.perf_counter_ns() - t0) / 1e3)
    cpu = (time.process_time_ns() - cpu0) / 1e3 / runs
    return statistics.median(walls), cpu


def run_cell(name, batch, threads, args):
    """One (model, batch) cell at this process's thread count: build, check, time."""
    from zoo import weights

    inputs = weights.inputs(name, "bench", batch)
    cell = {"model": name, "batch": batch, "threads": threads, "modes": {}}
    modes = [m for m in MODES if m in args.modes]
    calls, model = framework_modes(name, inputs, modes)
    cell["flops"] = model_flops(model, inputs)
    ref = calls["torch_eager"]()
    if "rml" in modes:
        try:
            rml = RmlMode(name, batch, inputs, model, threads, args.rml_host, args.cache)
            calls["rml"] = rml
        except Exception as e:  # noqa: BLE001 — an export failure is a result, not a crash
            cell["modes"]["rml"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    live = {}
    for mode in modes:
        if mode not in calls:
            continue
        entry = cell["modes"].setdefault(mode, {})
        try:
            t0 = time.perf_counter()
            got = calls[mode].outputs() if mode == "rml" else calls[mode]()
            entry["first_call_s"] = round(time.perf_counter() - t0, 3)
            ok, err = close(got, ref)
            entry.update(ok=ok, max_err=err)
            if not ok:
                entry["error"] = f"outputs differ from torch eager (max abs err {err:.3g})"
                continue
            if mode != "rml":  # warm-up, then an estimate of one call's time
                calls[mode]()
                est, _ = time_calls(calls[mode], 2)
            else:
                est, _ = calls[mode].time(2)
            live[mode] = max(1, min(args.max_runs, int(args.target_s * 1e6 / max(est, 1.0))))
        except Exception as e:  # noqa: BLE001
            entry["error"] = f"{type(e).__name__}: {e}"[:300]
    samples = {m: [] for m in live}
    for r in range(args.repeats):
        order = list(live) if r % 2 == 0 else list(reversed(live))
        for mode in order:
            fn = calls[mode].time if mode == "rml" else (
                lambda runs, c=calls[mode]: time_calls(c, runs))
            samples[mode].append(fn(live[mode]))
    for mode, s in samples.items():
        walls = sorted(w for w, _ in s)
        cpus = [c for _, c in s if c is not None]
        cell["modes"][mode].update(
            runs_per_round=live[mode], rounds=len(s),
            wall_us=statistics.median(walls), wall_min_us=walls[0], wall_max_us=walls[-1],
            cpu_us=statistics.median(cpus) if cpus else None)
    return cell


def worker(args) -> int:
    """The sweep at one thread count (this process): one JSON line per cell on stdout."""
    import torch._dynamo  # noqa: F401 — before jax/tensorflow (LLVM symbol clash)
    import torch

    torch.set_num_threads(args.worker)
    if "tf_eager" in args.modes or "tf_xla" in args.modes:
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.worker)
        tf.config.threading.set_inter_op_parallelism_threads(1)
    for name in args.models:
        for batch in args.batches:
            try:
                cell = run_cell(name, batch, args.worker, args)
            except Exception as e:  # noqa: BLE001
                cell = {"model": name, "batch": batch, "threads": args.worker,
                        "error": f"{type(e).__name__}: {e}"[:300]}
            print(json.dumps(cell), flush=True)
            print(f"[t={args.worker}] {name} b={batch}: " + ", ".join(
                f"{m}={v.get('wall_us', v.get('error', '?'))}"
                for m, v in cell.get("modes", {}).items()), file=sys.stderr, flush=True)
    return 0


def versions() -> dict:
    """Framework versions and the machine, read in a subprocess-free way."""
    from importlib import metadata

    v = {p: metadata.version(p) for p in ("torch", "jax", "jaxlib", "tensorflow-cpu", "numpy")
         if _installed(p)}
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                if ln.startswith("model name")), platform.processor())
    return {"python": platform.python_version(), **v, "cpu": cpu,
            "cpus": os.cpu_count(), "rustc": _rustc()}


def _installed(pkg):
    from importlib import metadata

    try:
        metadata.version(pkg)
        return True
    except metadata.PackageNotFoundError:
        return False


def _rustc():
    try:
        return subprocess.run(["rustc", "--version"], capture_output=True, text=True,
                              cwd=ROOT).stdout.strip()
    except OSError:
        return None


def sweep(args) -> int:
    """Runs one worker per thread count and writes the JSON results file."""
    started = datetime.datetime.now(datetime.timezone.utc)
    meta = {"date": started.isoformat(timespec="seconds"), "load_before": os.getloadavg(),
            "models": args.models, "batches": args.batches, "threads": args.threads,
            "repeats": args.repeats, "target_s": args.target_s, "rtol": RTOL, "atol": ATOL,
            **versions()}
    cells = []
    for t in args.threads:
        cmd = [sys.executable, __file__, "--worker", str(t), "--models", *args.models,
               "--batches", ",".join(map(str, args.batches)), "--repeats", str(args.repeats),
               "--target-s", str(args.target_s), "--max-runs", str(args.max_runs),
               "--modes", *args.modes, "--rml-host", args.rml_host, "--cache", args.cache]
        cpus = sorted(os.sched_getaffinity(0))[:t]
        proc = subprocess.Popen(cmd, env=thread_env(t), stdout=subprocess.PIPE, text=True,
                                preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c))
        for line in proc.stdout:
            cells.append(json.loads(line))
            write_results(args.out, meta, cells, started)  # an interrupted sweep keeps its cells
        proc.wait()
    write_results(args.out, meta, cells, started)
    print(f"wrote {args.out} ({len(cells)} cells, {meta['seconds']} s)")
    return 0


def write_results(out: str, meta: dict, cells: list, started) -> None:
    """Writes the results file with the load average and duration so far."""
    meta["load_after"] = os.getloadavg()
    meta["seconds"] = round((datetime.datetime.now(datetime.timezone.utc) - started)
                            .total_seconds())
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"meta": meta, "cells": cells}, indent=1) + "\n")


def main(argv=None) -> int:
    from zoo import models

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"models {', '.join(QUICK_MODELS)}, batch 1 and 8, 3 rounds")
    p.add_argument("--models", nargs="+", choices=models.MODELS)
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")])
    p.add_argument("--threads", type=lambda s: [int(t) for t in s.split(",")], default=[1, 2])
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--repeats", type=int, help="timed rounds per cell (default 7, quick 3)")
    p.add_argument("--target-s", type=float, default=0.1, help="seconds per mode per round")
    p.add_argument("--max-runs", type=int, default=200, help="most runs per mode per round")
    p.add_argument("--out", default=str(ROOT / "bench" / "results.json"))
    p.add_argument("--cache", default="/tmp/rml-bench-cache", help="exported graphs")
    p.add_argument("--rml-host", default=str(ROOT / "target" / "release" / "rml-host"))
    p.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    p.add_argument("--add-flops", metavar="RESULTS",
                   help="only fill in the FLOP counts of an existing results file")
    args = p.parse_args(argv)
    if args.add_flops:
        return add_flops(args.add_flops)
    args.models = args.models or list(QUICK_MODELS if args.quick else models.MODELS)
    args.batches = args.batches or ([1, 8] if args.quick else [1, 8, 64])
    args.repeats = args.repeats or (3 if args.quick else 7)
    if args.worker:
        return worker(args)
    if not Path(args.rml_host).exists():
        p.error(f"{args.rml_host} not found: cargo build --release -p rml-host")
    return sweep(args)


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "rml-export")]
    sys.exit(main())
