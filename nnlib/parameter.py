"""Parameter: a trainable float32 tensor on the device with its gradient.

Taught in notebooks/01_dense_kernels, notebooks/04_optimizers.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

from .runtime import Runtime, check_shape, resolve_runtime
from .sizes import round_up


class Parameter:
    """``value`` and ``grad`` are pyopencl Arrays of the same shape (float32).

    ``block_size`` tells block-wise optimizers (Adam-mini) how the tensor splits into
    blocks of consecutive elements: a dense weight uses one block per output row, a bias
    ``1`` (one block per element); ``None`` means one block for the whole tensor.

    A model lays its parameters end to end when it is built (:class:`FlatLayout`:
    ``Sequential``, CATCH's network); ``layout`` is then that layout, and ``value`` and
    ``grad`` are views of its two buffers from then on. Nothing else ever replaces them: an
    optimizer over exactly a layout's parameters updates them in one launch, over any other
    list one launch per tensor.
    """

    def __init__(self, array, name: str = "param", block_size: int | None = None,
                 runtime: Runtime | None = None):
        self.runtime = resolve_runtime(runtime)
        if not isinstance(name, str):
            raise TypeError(f"a parameter's name must be a str, got {type(name).__name__}")
        host = array.get() if isinstance(array, cla.Array) else np.asarray(array)
        if not np.issubdtype(host.dtype, np.floating):
            raise TypeError(f"{name}: a parameter needs floating-point values, got {host.dtype}")
        self.value = self.runtime.to_device(host, name=name)
        self.grad = self.runtime.zeros(self.value.shape)
        self.name = name
        if block_size is not None and (isinstance(block_size, bool) or not isinstance(
                block_size, (int, np.integer)) or block_size < 1 or self.value.size % block_size):
            raise ValueError(f"{name}: block_size {block_size} does not divide size {self.size}")
        self.block_size = block_size
        self.layout: FlatLayout | None = None

    @property
    def shape(self) -> tuple:
        return self.value.shape

    @property
    def size(self) -> int:
        return self.value.size

    def numpy(self) -> np.ndarray:
        return self.value.get()

    def set(self, array) -> None:
        """Overwrite the value from real numbers of the same shape (numpy or device arrays;
        NaN and infinity are allowed here: a test may plant a diverged weight)."""
        host = array.get() if isinstance(array, cla.Array) else np.asarray(array)
        if not (np.issubdtype(host.dtype, np.number) or host.dtype == bool) \
                or np.iscomplexobj(host):
            raise TypeError(f"{self.name}: expected real numbers, got dtype {host.dtype}")
        check_shape(self.name, host.shape, self.shape)
        with np.errstate(over="ignore"):
            self.value.set(np.ascontiguousarray(host, dtype=np.float32))

    def zero_grad(self) -> None:
        self.runtime.fill(self.grad, 0)

    def __repr__(self):
        return f"Parameter({self.name}, shape={self.shape})"


class FlatLayout:
    """Several parameters laid end to end in one device buffer for values and one for
    gradients, so that an optimizer checks and updates all of them with one launch each.

    Made once, by the model that owns the parameters, when it is built
    (:meth:`lay_out`): each parameter's ``value`` and ``grad`` become views of the two flat
    arrays (current contents copied) and stay so for good. The gaps that align each start
    to the device's base-address alignment hold zeros, which every update rule leaves at
    zero. ``arena()`` gives a zeroed flat array of the same layout for optimizer state,
    ``views(arena)`` its per-parameter arrays.
    """

    @classmethod
    def lay_out(cls, params) -> FlatLayout | None:
        """Lay ``params`` end to end, unless one already belongs to a layout (a layer shared
        by two models stays in its first model's): None then, and optimizers update these
        parameters one tensor at a time."""
        params = list(params)
        if not params or any(p.layout is not None for p in params):
            return None
        return cls(params)

    @staticmethod
    def of(params) -> FlatLayout | None:
        """The layout that holds exactly ``params``, in this order, if there is one."""
        params = list(params)
        layout = params[0].layout if params else None
        return layout if layout is not None and layout.params == params else None

    def __init__(self, params):
        self.params = list(params)
        self.runtime = self.params[0].runtime
        align = max(self.runtime.device.mem_base_addr_align // 32, 1)  # bits -> floats
        self.offsets, end = [], 0
        for p in self.params:
            self.offsets.append(end)
            end = round_up(end + p.size, align)
        self.size = end
        self.value, self.grad = self.arena(), self.arena()
        queue = self.runtime.queue
        for p, value, grad in zip(self.params, self.views(self.value), self.views(self.grad)):
            for new, old in ((value, p.value), (grad, p.grad)):
                cl.enqueue_copy(queue, new.data, old.data, byte_count=new.nbytes)
            p.value, p.grad, p.layout = value, grad, self

    def arena(self) -> cla.Array:
        """A zeroed flat float32 array of this layout (a plain buffer: sub-buffers need one)."""
        rt = self.runtime
        out = cla.Array(rt.queue, (self.size,), np.float32,
                        data=cl.Buffer(rt.context, cl.mem_flags.READ_WRITE, 4 * self.size))
        rt.fill(out, 0)
        return out

    def views(self, arena: cla.Array) -> list:
        """One array per parameter, of its shape, on a sub-buffer of ``arena``."""
        return [cla.Array(self.runtime.queue, p.shape, np.float32,
                          data=arena.data.get_sub_region(4 * offset, 4 * p.size))
                for p, offset in zip(self.params, self.offsets)]
