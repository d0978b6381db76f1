"""The activation table: each activation's code, its numpy forward and derivative, and what
the derivative is written with (the one home of these facts; taught in notebook 01).

Built from it: the codes of :mod:`nnlib.codes` (the kernels' ``ACT_*`` build options), the
numpy reference (:func:`nnlib.reference.activate`, :func:`nnlib.reference.activate_grad`),
the tests' lists of activations, and the derivative formulas the exercises show. The
kernels' cases live in ``kernels/activation.cl``; tests/test_activations.py checks that every
switch there has a case for every code of this table.

``needs`` says what the derivative is written with: ``"y"``, the output y = f(z) (the
article's design: a layer keeps only y), or ``"z"``, the pre-activation (silu: y does not
determine z), which a layer then keeps as well; softmax's ``"row"``: not elementwise, its
Jacobian acts on a whole row (``softmax_backward_rows``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["Activation", "TABLE", "BY_NAME", "LEAKY_SLOPE", "ELEMENTWISE", "FROM_Y",
           "DERIVATIVE_FORMULAS", "activation", "softmax"]

LEAKY_SLOPE = 0.01


@dataclass(frozen=True)
class Activation:
    name: str
    code: int  # ACT_<NAME> in the kernels
    forward: Callable  # y = f(z), numpy
    derivative: Callable | None  # f'(z) from what `needs` names (None: not elementwise)
    needs: str  # "y", "z" or "row" (see the module docstring)
    formula: str | None  # the derivative as the exercises write it

    @property
    def elementwise(self) -> bool:
        return self.needs != "row"


def softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _silu_grad(z):
    s = _sigmoid(z)
    return s * (1 + z * (1 - s))


TABLE = (
    Activation("none", 0, lambda z: z, np.ones_like, "y", "1"),
    Activation("tanh", 1, np.tanh, lambda y: 1 - y * y, "y", "1 - y*y"),
    Activation("sigmoid", 2, _sigmoid, lambda y: y * (1 - y), "y", "y * (1 - y)"),
    Activation("relu", 3, lambda z: np.maximum(z, 0), lambda y: (y > 0).astype(y.dtype), "y",
               "1 where y > 0, else 0"),
    Activation("leaky_relu", 4, lambda z: np.where(z > 0, z, LEAKY_SLOPE * z),
               lambda y: np.where(y > 0, 1, LEAKY_SLOPE).astype(y.dtype), "y",
               "1 where y > 0, else LEAKY_SLOPE"),
    Activation("softmax", 5, softmax, None, "row", None),
    Activation("silu", 6, lambda z: z * _sigmoid(z), _silu_grad, "z",
               "sigmoid(z) (1 + z (1 - sigmoid(z)))"),
)

BY_NAME = {a.name: a for a in TABLE}
ELEMENTWISE = [a.name for a in TABLE if a.elementwise]
FROM_Y = [a.name for a in TABLE if a.needs == "y"]  # what a layer keeping only y supports
DERIVATIVE_FORMULAS = {a.name: a.formula for a in TABLE if a.formula}


def activation(name: str) -> Activation:
    """The table's entry ``name``; a clear error for any other name."""
    if name not in BY_NAME:
        raise ValueError(f"unknown activation {name!r}; choose one of {list(BY_NAME)}")
    return BY_NAME[name]
