"""nnlib.gradcheck: central differences and the relative error the notebooks compare."""

import numpy as np
import pytest

from nnlib.gradcheck import max_rel_error, numeric_grad


def test_numeric_grad_of_a_cubic_and_x_restored(rng):
    x = rng.standard_normal((3, 4))
    keep = x.copy()
    np.testing.assert_allclose(numeric_grad(lambda: np.sum(x ** 3), x, 1e-5), 3 * x ** 2,
                               rtol=1e-8)
    assert np.array_equal(x, keep)


def test_max_rel_error_is_relative_to_the_largest_gradient():
    assert max_rel_error([1.0, 100.1], [1.0, 100.0]) == pytest.approx(1e-3)
    assert max_rel_error([0.0, 0.0], [0.0, 0.0]) == 0.0
    assert max_rel_error([1e-9], [0.0]) > 0.05
