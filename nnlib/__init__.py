"""nnlib: a small neural-network library whose every operation is an OpenCL kernel."""

from . import optim, reference
from .layers import Dense, Layer
from . import fft
from .layers import ComplexConv1d, Conv1d
from .network import Sequential
from .parameter import Parameter
from .runtime import (
    DeviceNotFoundError,
    KernelBuildError,
    NoPlatformError,
    Runtime,
    devices,
    get_runtime,
    source,
    use_device,
)

__all__ = [
    "Dense", "DeviceNotFoundError", "KernelBuildError", "Layer", "NoPlatformError",
    "Parameter", "Runtime", "Sequential", "devices", "get_runtime", "optim", "reference",
    "source", "use_device",
]
__all__ += ["ComplexConv1d", "Conv1d", "fft"]
__version__ = "0.1.0"
