from .base import Layer
from .dense import Dense

__all__ = ["Layer", "Dense"]
