from .base import Layer
from .conv import ComplexConv1d, Conv1d
from .dense import Dense

__all__ = ["ComplexConv1d", "Conv1d", "Dense", "Layer"]
