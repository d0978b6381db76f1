"""The tests' finite differences are nnlib's own (notebooks use them too)."""

from nnlib.gradcheck import numeric_grad  # noqa: F401
