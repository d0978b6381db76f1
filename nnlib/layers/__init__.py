"""The layers: Dense, Conv1d, ComplexConv1d, all following :class:`Layer`.

Taught in notebooks/01_dense_kernels.
"""
from .base import Layer
from .conv import ComplexConv1d, Conv1d
from .dense import Dense

__all__ = ["ComplexConv1d", "Conv1d", "Dense", "Layer"]
