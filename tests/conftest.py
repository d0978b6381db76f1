import numpy as np
import pytest

import nnlib


@pytest.fixture(scope="session")
def rt():
    """The default runtime (PYOPENCL_CTX, else GPU, else CPU): what a reader gets."""
    return nnlib.get_runtime()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
