from .base import Layer
from .dense import Dense
from .conv import ComplexConv1d, Conv1d

__all__ = ["Layer", "Dense"]
__all__ += ["Conv1d", "ComplexConv1d"]
