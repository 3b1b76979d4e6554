"""Constants and helpers every framework's zoo definitions share."""

import math

import numpy as np

#: Offset ``s`` of the cosine noise schedule (Nichol & Dhariwal).
COSINE_S = 0.008


def time_frequencies(dim: int) -> np.ndarray:
    """The ``dim // 2`` frequencies of a sinusoidal timestep embedding,
    ``exp(-ln(10000) * i / (dim // 2))``; the embedding is ``[sin(t f), cos(t f)]``."""
    half = dim // 2
    return np.exp(-math.log(10000.0) * np.arange(half, dtype=np.float64) / half).astype(np.float32)


def causal_mask(seq: int) -> np.ndarray:
    """``[seq, seq]`` booleans, true where query ``i`` may see key ``j`` (``j <= i``)."""
    return np.tril(np.ones((seq, seq), dtype=bool))


def named_outputs(out, to_numpy) -> dict:
    """A model's output as the exporters name it: one tensor is ``y``, a dict keeps its
    keys, a tuple becomes ``y0``, ``y1``, …"""
    if isinstance(out, dict):
        return {k: np.asarray(to_numpy(v)) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return {f"y{i}": np.asarray(to_numpy(v)) for i, v in enumerate(out)}
    return {"y": np.asarray(to_numpy(out))}
