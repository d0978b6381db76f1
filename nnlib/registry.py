"""Registries: the classes that other parts of nnlib look up by name, each registered where
it is defined, so that nothing keeps a second list of them.

``MODELS``: what a checkpoint may hold (``Sequential``, ``CATCH``); ``LAYERS``: the layers a
``Sequential`` checkpoint may name; ``OPTIMIZERS``: every update rule (a checkpoint's
optimizer state, the tests' lists). Both are filled when
``nnlib`` is imported (its ``__init__`` imports every module that registers).

Taught in notebooks/02_train_fractal_classifier.
"""

from __future__ import annotations


class Registry(dict):
    """Classes by their ``__name__``, in the order they were registered."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def register(self, cls: type) -> type:
        """Add ``cls`` (a class decorator)."""
        if self.get(cls.__name__, cls) is not cls:
            raise ValueError(f"two {self.what} classes are named {cls.__name__}")
        self[cls.__name__] = cls
        return cls


MODELS = Registry("model")
LAYERS = Registry("layer")
OPTIMIZERS = Registry("optimizer")
