"""The numpy maths of every kernel: what the tests compare with and the notebooks show.

Every function works in the dtype it is given (float64 for gradient checks).

Taught in notebooks/01_dense_kernels.
"""

from .dense import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .fft import *  # noqa: F401,F403
from .optim import *  # noqa: F401,F403
from .attention import *  # noqa: F401,F403
from .catch import *  # noqa: F401,F403
from .gumbel import *  # noqa: F401,F403
from .transformer import *  # noqa: F401,F403
