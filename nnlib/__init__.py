"""nnlib: a small neural-network library whose every operation is an OpenCL kernel.

Taught in notebooks/00_devices.
"""

from . import catch, data, fft, fused, optim, reference, tuning
from .checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from .environment import EnvironmentSettingError, ForkedProcessError
from .layers import ComplexConv1d, Conv1d, Dense, Layer
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
    use_kernels,
)

__all__ = [
    "Checkpoint", "CheckpointError", "ComplexConv1d", "Conv1d", "Dense", "DeviceNotFoundError",
    "EnvironmentSettingError", "ForkedProcessError", "KernelBuildError", "Layer", "NoPlatformError", "Parameter", "Runtime", "Sequential",
    "catch", "data", "devices", "fft", "fused", "get_runtime", "load_checkpoint", "optim",
    "reference", "save_checkpoint", "source", "tuning", "use_device", "use_kernels",
]
__version__ = "0.1.0"
