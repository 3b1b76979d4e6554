#!/usr/bin/env python3
"""The rml C API from Python through ctypes: run the bundled rml-graph on NumPy
arrays and generate text with the bundled LLM, streamed through a callback.

    ctypes_demo.py [LIBRARY]    LIBRARY: librml_capi.so (default: target/debug, then release)

Checks the graph output against the committed NumPy reference and the greedy
continuation against the ``transformers`` fixture; exits 1 on a mismatch.
"""

import ctypes as C
import json
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
MAX_RANK = 8
OK, BUFFER_TOO_SMALL = 0, 7
DTYPES = {np.dtype(np.float32): 0, np.dtype(np.int64): 1, np.dtype(np.bool_): 2}
TOKENIZE_PARSE_SPECIAL = 2


class Tensor(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_uint32), ("rank", C.c_size_t),
                ("dims", C.POINTER(C.c_int64)), ("data", C.c_void_p), ("byte_len", C.c_size_t)]


class TensorInfo(C.Structure):
    _fields_ = [("name", C.c_char_p), ("dtype", C.c_uint32), ("rank", C.c_size_t),
                ("dims", C.c_int64 * MAX_RANK), ("byte_len", C.c_size_t)]


class GenerateOptions(C.Structure):
    _fields_ = [("max_tokens", C.c_size_t), ("temperature", C.c_float), ("top_k", C.c_size_t),
                ("top_p", C.c_float), ("min_p", C.c_float), ("repetition_penalty", C.c_float),
                ("seed", C.c_uint64), ("stop_at_eos", C.c_uint32),
                ("stop_strings", C.POINTER(C.c_char_p)), ("n_stop_strings", C.c_size_t),
                ("context", C.c_size_t)]


class Generation(C.Structure):
    _fields_ = [("n_tokens", C.c_size_t), ("prompt_tokens", C.c_size_t), ("stop_reason", C.c_uint32),
                ("prefill_seconds", C.c_double), ("decode_seconds", C.c_double)]


TokenCallback = C.CFUNCTYPE(C.c_int32, C.POINTER(C.c_char), C.c_size_t, C.c_void_p)


class RmlError(RuntimeError):
    pass


def open_library(path):
    lib = C.CDLL(str(path))
    lib.rml_version.restype = C.c_char_p
    lib.rml_last_error.restype = C.c_char_p
    lib.rml_status_name.restype = C.c_char_p
    lib.rml_status_name.argtypes = [C.c_int32]
    sigs = {
        "rml_graph_load": [C.c_char_p, C.c_uint32, C.POINTER(C.c_uint64)],
        "rml_graph_free": [C.c_uint64],
        "rml_graph_describe_input": [C.c_uint64, C.c_size_t, C.POINTER(TensorInfo)],
        "rml_graph_run": [C.c_uint64, C.POINTER(Tensor), C.c_size_t],
        "rml_graph_get_output": [C.c_uint64, C.c_size_t, C.POINTER(TensorInfo), C.c_void_p, C.c_size_t],
        "rml_llm_load": [C.c_char_p, C.POINTER(C.c_uint64)],
        "rml_llm_free": [C.c_uint64],
        "rml_llm_tokenize": [C.c_uint64, C.c_char_p, C.c_uint32, C.POINTER(C.c_uint32), C.c_size_t,
                             C.POINTER(C.c_size_t)],
        "rml_llm_generate": [C.c_uint64, C.POINTER(C.c_uint32), C.c_size_t, C.POINTER(GenerateOptions),
                             TokenCallback, C.c_void_p, C.POINTER(C.c_uint32), C.c_size_t,
                             C.POINTER(Generation)],
    }
    for name, args in sigs.items():
        getattr(lib, name).argtypes = args
        getattr(lib, name).restype = C.c_int32
    lib.rml_generate_options_default.restype = GenerateOptions
    return lib


def check(lib, status, what, allow=(OK,)):
    if status not in allow:
        raise RmlError(f"{what}: {lib.rml_status_name(status).decode()}: {lib.rml_last_error().decode()}")
    return status


def run_graph(lib, path, inputs):
    """Runs the graph at `path` on a dict of NumPy arrays; returns its first output."""
    graph = C.c_uint64()
    check(lib, lib.rml_graph_load(str(path).encode(), 1, C.byref(graph)), "rml_graph_load")
    try:
        arrays = {name: np.ascontiguousarray(a) for name, a in inputs.items()}
        dims = {name: (C.c_int64 * a.ndim)(*a.shape) for name, a in arrays.items()}
        tensors = (Tensor * len(arrays))(*[
            Tensor(name.encode(), DTYPES[a.dtype], a.ndim, dims[name], a.ctypes.data, a.nbytes)
            for name, a in arrays.items()])
        check(lib, lib.rml_graph_run(graph, tensors, len(arrays)), "rml_graph_run")
        info = TensorInfo()
        check(lib, lib.rml_graph_get_output(graph, 0, C.byref(info), None, 0), "rml_graph_get_output")
        out = np.empty(tuple(info.dims[:info.rank]), dtype=np.float32)
        check(lib, lib.rml_graph_get_output(graph, 0, None, out.ctypes.data, out.nbytes), "rml_graph_get_output")
        return info.name.decode(), out
    finally:
        check(lib, lib.rml_graph_free(graph), "rml_graph_free")


def generate(lib, llm, ids, max_tokens):
    """Greedy generation after `ids`, streaming to stdout; returns the generated ids."""
    options = lib.rml_generate_options_default()
    options.temperature, options.max_tokens, options.stop_at_eos = 0.0, max_tokens, 0

    @TokenCallback
    def on_text(text, length, _user):
        sys.stdout.write(C.string_at(text, length).decode("utf-8"))
        sys.stdout.flush()
        return 0

    prompt = (C.c_uint32 * len(ids))(*ids)
    out = (C.c_uint32 * max_tokens)()
    result = Generation()
    check(lib, lib.rml_llm_generate(llm, prompt, len(ids), C.byref(options), on_text, None, out, max_tokens,
                                    C.byref(result)), "rml_llm_generate")
    print()
    return list(out[:result.n_tokens])


def tokenize(lib, llm, text):
    count = C.c_size_t()
    check(lib, lib.rml_llm_tokenize(llm, text.encode(), TOKENIZE_PARSE_SPECIAL, None, 0, C.byref(count)),
          "rml_llm_tokenize", allow=(OK, BUFFER_TOO_SMALL))
    ids = (C.c_uint32 * count.value)()
    check(lib, lib.rml_llm_tokenize(llm, text.encode(), TOKENIZE_PARSE_SPECIAL, ids, count.value, C.byref(count)),
          "rml_llm_tokenize")
    return list(ids)


def main():
    default = [ROOT / "target" / kind / "librml_capi.so" for kind in ("debug", "release")]
    path = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else next((p for p in default if p.exists()), default[0])
    lib = open_library(path)
    print("rml", lib.rml_version().decode())
    bad = False

    graph_dir = ROOT / "models" / "graph-default"
    x = np.load(graph_dir / "inputs" / "x.npy")
    name, y = run_graph(lib, graph_dir / "transformer_block.json", {"x": x})
    err = float(np.max(np.abs(y - np.load(graph_dir / "expected" / "y.npy"))))
    print(f"graph: x {list(x.shape)} -> {name} {list(y.shape)}, max error vs NumPy: {err:.3g}")
    bad |= not err < 1e-5

    fixture = json.loads((ROOT / "rml-llm/tests/fixtures/generate/generate.json").read_text())
    case = fixture["cases"][0]
    llm = C.c_uint64()
    check(lib, lib.rml_llm_load(str(ROOT / "models/default/rml-tiny-llama.gguf").encode(), C.byref(llm)),
          "rml_llm_load")
    try:
        ids = tokenize(lib, llm, case["prompt"])
        print(f"prompt ids {ids} (transformers: {case['prompt_ids']})")
        sys.stdout.write(case["prompt"])
        out = generate(lib, llm, ids, len(case["greedy_ids"]))
        same = ids == case["prompt_ids"] and out == case["greedy_ids"]
        print(f"greedy ids match transformers: {same}")
        bad |= not same
    finally:
        check(lib, lib.rml_llm_free(llm), "rml_llm_free")
    print("FAILED" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
