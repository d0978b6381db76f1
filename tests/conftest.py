import os

import numpy as np
import pytest

import nnlib

# Unit tests run every kernel with its default parameters and test each tuning candidate
# explicitly: no search (results would differ from run to run and machine to machine, and
# cost seconds), and nothing written to the user's tuning cache. tests/test_tuning.py sets
# the mode it tests.
os.environ.setdefault("NNLIB_TUNE", "0")
# Every kernel call is compared with its .cl signature (nnlib/launcher.py): a wrong argument
# count or type fails with the kernel's and the argument's name instead of giving garbage.
os.environ.setdefault("NNLIB_CHECK_ARGS", "1")


@pytest.fixture(scope="session")
def rt():
    """The default runtime (PYOPENCL_CTX, else GPU, else CPU): what a reader gets."""
    return nnlib.get_runtime()


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture
def tuning_cache(tmp_path, monkeypatch):
    """Tuning on (NNLIB_TUNE=1, no profile), with an empty cache folder of its own."""
    from nnlib import tuning
    monkeypatch.setenv("NNLIB_TUNING_DIR", str(tmp_path))
    monkeypatch.delenv("NNLIB_PROFILE", raising=False)
    tuning.set_mode("1")
    yield tmp_path
    tuning.set_mode(None)


# The files with the longest tests (each re-executes notebooks or starts a browser, a Lab
# server or whole benchmarks) go first: pytest-xdist (`make test`, --dist loadfile) hands out
# files in collection order, so the other workers fill in around them instead of waiting at
# the end for one long file.
LONGEST_FIRST = ("test_exercises.py", "test_nbgrader.py", "test_browser.py", "test_benchmarks.py")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
