"""Codes and constants shared by the kernels, the layers and the numpy reference: the one
home of each (taught in notebook 01, and 05 for the complex activations).

The kernels get them as ``-D`` build options (:func:`build_defines`, added to every build by
:meth:`nnlib.Runtime.program`), so ``kernels/*.cl`` name them (``ACT_TANH``, ``LOSS_MSE``,
``CACT_MODRELU``, ``LEAKY_SLOPE``) without defining them; the layers pass the integer codes
as kernel arguments; the reference imports the constants from here. The activations' codes
come from the activation table (:mod:`nnlib.activations`). A launcher refuses a kernel
argument named in :data:`CODED_ARGUMENTS` whose value is not one of its table's codes.
"""

from __future__ import annotations

import math

from .activations import LEAKY_SLOPE, TABLE

ACTIVATIONS = {a.name: a.code for a in TABLE}
# complex activations (kernels/complex.cl, layers.conv.ComplexConv1d)
COMPLEX_ACTIVATIONS = {"none": 0, "tanh": 1, "split_sigmoid": 2, "modrelu": 3}
LOSSES = {"mse": 0, "cross_entropy": 1}  # kernels/loss.cl
# The masked attention's "large negative" for masked-out scores: the official CATCH code's
# -log(1e10), added before the scaling (kernels/attention.cl takes it as an argument).
FINITE_FILL = -math.log(1e10)
# The kernels' scalar arguments that carry a code, by name, and the table of their codes.
CODED_ARGUMENTS = {"act": ACTIVATIONS, "below_act": ACTIVATIONS, "cact": COMPLEX_ACTIVATIONS,
                   "loss": LOSSES}


def _code(kind: str, table: dict, name) -> int:
    if name not in table:
        raise ValueError(f"unknown {kind} {name!r}; choose one of {list(table)}")
    return table[name]


def activation_code(name: str) -> int:
    return _code("activation", ACTIVATIONS, name)


def complex_activation_code(name: str) -> int:
    return _code("complex activation", COMPLEX_ACTIVATIONS, name)


def loss_code(name: str) -> int:
    return _code("loss", LOSSES, name)


def build_defines() -> tuple:
    """The ``-D`` options that give every kernel the codes above."""
    tables = (("ACT", ACTIVATIONS), ("CACT", COMPLEX_ACTIVATIONS), ("LOSS", LOSSES))
    return (*(f"-D{prefix}_{name.upper()}={code}" for prefix, table in tables
              for name, code in table.items()),
            f"-DLEAKY_SLOPE={LEAKY_SLOPE!r}f")
