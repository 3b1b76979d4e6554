"""The PyTorch route's op table: every ATen op it lowers, by name.

The lowerings live in :mod:`rml_export.torch_math` (elementwise, linear algebra,
convolution, normalization, reductions) and :mod:`rml_export.torch_layout` (shapes,
indexing, padding, creation); importing this module registers both.
"""

from . import torch_layout, torch_math  # noqa: F401  (they register their lowerings)
from .torch_lower import LOWERINGS

__all__ = ["LOWERINGS"]
