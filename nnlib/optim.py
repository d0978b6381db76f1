"""Optimizers whose update rules run as kernels (kernels/optim.cl).

Every optimizer takes a list of :class:`~nnlib.Parameter` and never waits for the device.
Rules that treat every element alike (SGD, Adam, AdamW, Adan) update all the parameters
with one launch when they are exactly one model's flat layout (a ``Sequential``'s, each of
CATCH's two groups: :class:`~nnlib.parameter.FlatLayout`), otherwise one launch per tensor;
Adam-mini launches per tensor. A step whose gradients hold NaN or infinity is *skipped* on the
device: weights and state stay as they were, and the step is counted in ``skipped_steps``
(reading it waits for the device). The host's step counter, behind the bias corrections,
still advances (the host does not wait to learn of the skip), so the steps after a skip use
the corrections of one step later than PyTorch would. ``Sequential.fit`` raises an error at
the end of an epoch that skipped steps. Every optimizer registers itself in
:data:`nnlib.registry.OPTIMIZERS`, where checkpoints and the tests find it.

Taught in notebooks/04_optimizers.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyopencl as cl

from . import tuning
from .checkpoint import CheckpointError
from .launcher import Launcher
from .parameter import FlatLayout, Parameter
from .registry import OPTIMIZERS
from .sizes import ceil_div, vector_width

TUNE_SIZE = 1 << 18  # elements of the tuning problem's Adam step (the benchmarks' MLP has 255k)
# Elements of its SGD step (with momentum): notebook 02's 240-128-64-3 network has 39k, in
# the caches, where the loads' form matters more than at TUNE_SIZE: on Intel's CPU runtime
# VW 8 with loads by hand tied the fastest at TUNE_SIZE and ran sgd_update several times
# slower here.
SMALL_TUNE_SIZE = 40_000
# Vectors of VW gradient elements per work-item of check_finite: a CPU runtime pays for each
# work-item it runs, more than one vector's check costs (nnlib.bench.profile_step shows the
# check's time in a step).
CHECK_VECTORS = 8


def default_params(rt) -> dict:
    """Elementwise update kernels without tuning: the device's vector width per work-item
    (``Limits.explicit_vector_width``), vloadN where the compiler inlines it
    (``Limits.inlines_vector_loads``), and there also max() in check_finite (CHECK_MAX: PoCL
    3.0 calls both as functions; with comparisons OR-ed instead, its check of notebook 02's
    39k gradients took 3-4 us, against 8-9 with max()), work-groups as the launcher's rule
    chooses them (LOCAL 0)."""
    inlines = int(rt.limits.inlines_vector_loads)
    return {"VW": vector_width(rt.limits.explicit_vector_width), "VLOAD": inlines,
            "CHECK_MAX": inlines, "LOCAL": 0}


def candidates(rt) -> list:
    """What the tuner tries: 1, half, the device's and twice the device's width per
    work-item (each with vloadN and with loads by hand), and work-groups of twice the
    device's preferred multiple (64 work-items on a GPU with warps of 32). Half: on AVX-512
    (Debian's PoCL on Zen 4, width 16) these loops of a few loads and one FMA ran fastest at
    8 lanes."""
    base = default_params(rt)
    twice = vector_width(2 * base["VW"], widest=rt.limits.widest_vector)
    widths = sorted({1, max(1, base["VW"] // 2), base["VW"], twice})
    out = [base] + ([dict(base, VLOAD=0)] if base["VW"] > 1 else [])  # most promising first
    out += [dict(base, VW=w, VLOAD=v) for w in widths for v in ((1, 0) if w > 1 else (1,))]
    out.append(dict(base, LOCAL=2 * rt.work_group_multiple))
    return [c for i, c in enumerate(out) if c not in out[:i]]


def kernel_options(params: dict, n: int | None = None) -> tuple:
    """The build options of kernels/optim.cl with ``params`` for tensors of ``n`` elements:
    WHOLE_VECTORS where ``n`` is a multiple of VW (kernels/floatv.h's load_v then tests no
    tail), as every flat layout is (its size is a multiple of the base-address alignment)."""
    whole = ("-DWHOLE_VECTORS=1",) if n is not None and n % params["VW"] == 0 else ()
    return (f"-DVW={params['VW']}", f"-DVLOAD={params['VLOAD']}",
            f"-DCHECK_MAX={params['CHECK_MAX']}", *whole)


def measure(rt, params: dict) -> float:
    """Seconds of an Adam step of TUNE_SIZE elements and an SGD step (momentum) of
    SMALL_TUNE_SIZE with ``params``: each the two launches a step runs, the finiteness check
    and the update."""
    check, adam, sgd = (rt.launcher("optim", name, kernel_options(params, size))
                        for name, size in (("check_finite", TUNE_SIZE),
                                           ("adam_update", TUNE_SIZE),
                                           ("sgd_update", SMALL_TUNE_SIZE)))
    w, g, m, v = (rt.zeros((TUNE_SIZE,)) for _ in range(4))
    skip = rt.zeros((2,), dtype=np.int32)  # no gradient is flagged: it stays 0, as last
    f32, vw = np.float32, params["VW"]

    def local(kernel):
        return (min(params["LOCAL"], kernel.work_group_size),) if params["LOCAL"] else None

    def checked(n):  # the step's check of n gradient elements; returns its update's grid
        check((ceil_div(n, vw * CHECK_VECTORS),), local(check), g.data, np.int32(n),
              skip.data, skip.data)
        return (ceil_div(n, vw),)

    def run():
        n = TUNE_SIZE
        adam(checked(n), local(adam), w.data, g.data, m.data, v.data, skip.data, np.int32(n),
             f32(1e-3), f32(0.9), f32(0.999), f32(1e-8), f32(0), np.int32(0), f32(1e-3), f32(1))
        n = SMALL_TUNE_SIZE
        sgd(checked(n), local(sgd), w.data, g.data, m.data, skip.data, np.int32(n), f32(1e-2),
            f32(0.9), np.int32(0), f32(0))
    return tuning.time_launches(run, rt.queue.finish, launches=10)


def elementwise_params(rt) -> dict:
    """The parameters of the elementwise update kernels on ``rt``'s device (tuned)."""
    return tuning.tuned(rt, "optim.elementwise", "flat", candidates(rt),
                        lambda p: measure(rt, p), default_params(rt),
                        problem={"adam": TUNE_SIZE, "sgd": SMALL_TUNE_SIZE})


FLOAT32_MAX = float(np.finfo(np.float32).max)  # the kernels take hyperparameters as float


def _check_range(name: str, value, low: float, high: float | None = None) -> float:
    """``value`` as a float if it is a real number (a Python or numpy scalar, or an array
    of one value) in [low, high) that float32 holds, else a clear error."""
    number = None
    if isinstance(value, (bool, np.bool_)):
        pass
    elif isinstance(value, (int, float)):
        number = float(value) if abs(value) <= FLOAT32_MAX else math.inf
    elif isinstance(value, (np.generic, np.ndarray)) and value.size == 1 \
            and value.dtype.kind in "iuf":
        number = float(np.reshape(value, ()))
    ok = number is not None and math.isfinite(number) and abs(number) <= FLOAT32_MAX \
        and number >= low and (high is None or number < high)
    if not ok:
        span = f"[{low}, {high})" if high is not None else f">= {low}"
        shown = repr(value) if number is None or isinstance(value, (int, float)) \
            else f"{number!r} ({type(value).__name__})"
        raise ValueError(f"{name} must be a finite number in {span} that float32 holds "
                         f"(at most {FLOAT32_MAX:.3g}), got {shown}")
    return number


def _check_betas(betas, count: int) -> tuple:
    if isinstance(betas, np.ndarray) and betas.shape == (count,):
        betas = tuple(betas)
    if not isinstance(betas, (tuple, list)) or len(betas) != count:
        shape = f" of shape {betas.shape}" if isinstance(betas, np.ndarray) else ""
        raise ValueError(f"betas must be a tuple of {count} numbers (or a list, or an array "
                         f"of shape ({count},)), got {betas!r}{shape}")
    return tuple(_check_range(f"beta{i + 1}", b, 0.0, 1.0) for i, b in enumerate(betas))


class Hyperparameter:
    """An optimizer's number, checked by :func:`_check_range` whenever it is set: in the
    constructor and later (``opt.lr = 0.5`` between epochs, a schedule)."""

    def __init__(self, label: str, low: float, high: float | None = None):
        self.label, self.low, self.high = label, low, high

    def __set_name__(self, owner, name):
        self.slot = f"_{name}"

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        try:
            return obj.__dict__[self.slot]
        except KeyError:
            raise AttributeError(self.slot[1:]) from None

    def __set__(self, obj, value):
        obj.__dict__[self.slot] = _check_range(self.label, value, self.low, self.high)


SECOND_MOMENTS = ("v", "n")  # state buffers that must not be negative (Adam's v, Adan's n)


class State(list):
    """One state array per parameter; ``flat`` is the array they are views of, if any."""

    flat = None


@dataclass(frozen=True)
class Tensors:
    """What one update launch works on: ``size`` elements of ``value``, ``grad`` and the
    rule's ``state`` arrays (None for a rule's unused buffer). ``key`` names it: "flat" (every
    parameter, laid end to end) or the index of one parameter."""

    key: object
    size: int
    value: object
    grad: object
    state: tuple


class Optimizer:
    """Holds the parameters and the per-parameter state buffers of one update rule.

    Subclasses implement ``_update(t)``, which enqueues the update of the :class:`Tensors`
    ``t`` (the whole flat layout, ``flat = True`` rules only, or one parameter) and returns
    its event.
    """

    flat = True  # the rule is the same for every element: update all tensors in one launch
    lr = Hyperparameter("learning rate", 0.0)
    weight_decay = Hyperparameter("weight_decay", 0.0)

    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Parameter):
                raise TypeError(f"optimizer parameters must be nnlib.Parameter, got {type(p)}")
            if p.grad is None:
                raise ValueError(f"parameter {p.name} has no gradient buffer")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError("a parameter appears more than once in the optimizer's list")
        if any(p.runtime is not self.params[0].runtime for p in self.params):
            raise ValueError("the optimizer's parameters live on different runtimes (devices "
                             "or contexts); one optimizer updates the parameters of one")
        self.lr = lr
        self.runtime = self.params[0].runtime
        self.steps = 0
        self.events: list = []  # the last step's update kernels, for profiling
        rt = self.runtime
        # the model's layout of exactly these parameters: one launch updates them all
        self.layout = FlatLayout.of(self.params) if self.flat else None
        # Two pairs [skipped before, this step skipped] (kernels/optim.cl), each at an address
        # the device can start a sub-buffer at; steps use them in turns, the next one _turn.
        ints = max(2, rt.device.mem_base_addr_align // 32)
        # (a buffer of its own, made by to_device: pooled buffers have no sub-buffers)
        self._skip = rt.to_device(np.zeros(2 * ints, np.int32), "skip counts", dtype=np.int32)
        self._skip_pairs = tuple(self._skip.data.get_sub_region(k * 4 * ints, 8)
                                 for k in (0, 1))
        self._turn = 0
        self.kernel_params = elementwise_params(rt)
        self._vw = self.kernel_params["VW"]  # elements per work-item of elementwise kernels
        self._group = self.kernel_params["LOCAL"]  # their work-group size (0: the rule's)
        self._launchers: dict = {}  # (kernel name, tensor size) -> its launcher from kernels/
        self._targets = None  # what each step launches on (_update_targets), made once

    def _launcher(self, name: str, n: int | None = None) -> Launcher:
        """The launcher of kernel ``name`` of kernels/optim.cl, built with this rule's options
        for tensors of ``n`` elements; kept per name and size, except where ``use_kernels``
        names a folder (whose files the runtime reads again each time: edits count)."""
        rt = self.runtime
        if rt.kernel_folder is not None:
            return rt.launcher("optim", name, kernel_options(self.kernel_params, n))
        launcher = self._launchers.get((name, n))
        if launcher is None:
            launcher = self._launchers[name, n] = rt.launcher(
                "optim", name, kernel_options(self.kernel_params, n))
        return launcher

    def _elementwise(self, name: str, n: int, *args, vectors: int = 1) -> cl.Event:
        """Kernel ``name`` of kernels/optim.cl over ``n`` elements, ``vectors`` vectors of
        ``VW`` per work-item, in work-groups of the tuned ``LOCAL`` work-items (0: as the
        launcher's rule chooses)."""
        launcher = self._launcher(name, n)
        local = (min(self._group, launcher.work_group_size),) if self._group else None
        return launcher((ceil_div(n, self._vw * vectors),), local, *args)

    @property
    def fused(self) -> bool:
        """Whether a step checks and updates every tensor with one launch each: the rule is
        elementwise and the parameters are exactly a model's flat layout."""
        return self.layout is not None

    def _update_targets(self) -> list:
        """The :class:`Tensors` one step launches on: the flat layout when one launch covers
        every tensor, else each parameter; made at the first step (the state arrays stay
        the same for the optimizer's life: loading a state fills them)."""
        if self._targets is None:
            self._targets = [self._flat_tensors()] if self.fused else [
                self._parameter_tensors(i) for i in range(len(self.params))]
        return self._targets

    def _flat_tensors(self) -> Tensors:
        layout = self.layout
        state = tuple(s.flat if s else None for s in self._buffers().values())
        return Tensors("flat", layout.size, layout.value, layout.grad, state)

    def _parameter_tensors(self, i: int) -> Tensors:
        p = self.params[i]
        state = tuple(s[i] if s else None for s in self._buffers().values())
        return Tensors(i, p.size, p.value, p.grad, state)

    def zero_grad(self) -> None:
        if self.fused:
            self.runtime.fill(self.layout.grad, 0)
            return
        for p in self.params:
            p.zero_grad()

    def step(self) -> None:
        """One update of every parameter (skipped on the device if a gradient is not finite)."""
        targets = self._update_targets()
        last = self._skip_pairs[1 - self._turn]
        for t in targets:
            self._elementwise("check_finite", t.size, t.grad.data, np.int32(t.size),
                              self._skip_flag, last, vectors=CHECK_VECTORS)
        self.steps += 1
        self.events = [self._update(t) for t in targets]
        self._turn = 1 - self._turn

    @property
    def _skip_flag(self):
        """The pair of skip counts the step being enqueued flags and its updates read."""
        return self._skip_pairs[self._turn]

    def _update(self, t: Tensors) -> cl.Event:
        raise NotImplementedError

    @property
    def skipped_steps(self) -> int:
        """Steps skipped so far because a gradient held NaN or infinity (waits for the device)."""
        return int(self._skip.get().sum())

    def _skipped_pair(self) -> np.ndarray:
        """[steps skipped before the last, the last skipped] (waits for the device)."""
        pairs = self._skip.get()
        last = pairs[(1 - self._turn) * (len(pairs) // 2) + 1]
        return np.array([pairs.sum() - last, last], np.int32)

    def _bias_corrections(self, *betas) -> list:
        """1 - beta^t for the current step t, in float64 as PyTorch computes them."""
        return [1.0 - beta ** self.steps for beta in betas]

    def _buffers(self) -> dict:
        """State arrays on the device, by name; each a :class:`State` (one per parameter)."""
        return {}

    def state_nbytes(self) -> int:
        """Bytes of optimizer state on the device (the update rule's buffers, not counting the
        alignment gaps of a flat layout)."""
        return sum(a.nbytes for arrays in self._buffers().values() for a in arrays)

    def config(self) -> dict:
        """The constructor's keyword arguments (JSON values), as checkpoints store them."""
        out = {}
        for name in inspect.signature(type(self).__init__).parameters:
            if name == "betas":
                out[name] = [getattr(self, f"beta{i}") for i in (1, 2, 3) if hasattr(
                    self, f"beta{i}")]
            elif name not in ("self", "params"):
                out[name] = getattr(self, name)
        return out

    def state_dict(self) -> dict:
        """The step count and every state buffer as numpy arrays (``np.savez`` can store it;
        :func:`nnlib.save_checkpoint` stores it with the model, atomically)."""
        state = {"steps": np.int64(self.steps), "skipped": self._skipped_pair()}
        for name, arrays in self._buffers().items():
            for i, a in enumerate(arrays):
                state[f"{name}.{i}"] = a.get()
        return state

    def check_state(self, state) -> dict:
        """``state`` (as from :meth:`state_dict`) checked against this optimizer: the same
        entries, shapes, real dtypes, finite moments (second moments >= 0) and a consistent
        step count. Returns the host arrays to load; raises CheckpointError."""
        if not isinstance(state, Mapping):
            raise CheckpointError(f"a state dict is a mapping, got {type(state).__name__}")
        want = {f"{name}.{i}": a for name, arrays in self._buffers().items()
                for i, a in enumerate(arrays)}
        for key in ("steps", "skipped", *want):
            if key not in state:
                raise CheckpointError(f"state dict lacks {key}: saved by another optimizer?")
        unknown = sorted(set(state) - set(want) - {"steps", "skipped"})
        if unknown:
            raise CheckpointError(f"state dict has entries {unknown[:3]} that "
                                  f"{type(self).__name__} does not: saved by another optimizer?")
        steps = np.asarray(state["steps"])
        skipped = np.asarray(state["skipped"])
        if steps.shape != () or steps.dtype.kind not in "iu" or not 0 <= steps < 2**53:
            raise CheckpointError(f"state steps: a non-negative integer, got {steps!r}")
        if skipped.shape != (2,) or skipped.dtype.kind not in "iu" or skipped.min() < 0 \
                or skipped[1] > 1 or skipped.sum() > steps:
            raise CheckpointError(f"state skipped: two counts (skipped before, last skipped "
                                  f"0/1) adding up to at most steps={int(steps)}, got {skipped!r}")
        checked = {"steps": int(steps), "skipped": skipped.astype(np.int32)}
        for key, a in want.items():
            host = np.asarray(state[key])
            if host.dtype.kind != "f":
                raise CheckpointError(f"state {key}: dtype {host.dtype}, need floating point")
            if host.shape != a.shape:
                raise CheckpointError(f"state {key}: shape {host.shape}, need {a.shape}")
            with np.errstate(over="ignore"):
                host = host.astype(np.float32)
            if not np.isfinite(host).all():
                raise CheckpointError(f"state {key}: holds NaN or infinity")
            if key.split(".")[0] in SECOND_MOMENTS and (host < 0).any():
                raise CheckpointError(f"state {key}: a second moment is negative")
            checked[key] = host
        return checked

    def load_state_dict(self, state: dict) -> None:
        """Load ``state`` completely, or (when :meth:`check_state` refuses it) change nothing."""
        checked = self.check_state(state)
        for name, arrays in self._buffers().items():
            for i, a in enumerate(arrays):
                a.set(checked[f"{name}.{i}"])
        pairs = np.zeros(self._skip.shape, np.int32)
        last = (1 - self._turn) * (len(pairs) // 2)  # the pair the next step folds
        pairs[last:last + 2] = checked["skipped"]
        self._skip.set(pairs)
        self.steps = checked["steps"]

    def _zeros_like_params(self) -> State:
        if self.layout is None:
            return State(self.runtime.zeros(p.shape) for p in self.params)
        flat = self.layout.arena()
        state = State(self.layout.views(flat))
        state.flat = flat
        return state

    def __repr__(self):
        return f"{type(self).__name__}(lr={self.lr}, {len(self.params)} tensors)"


@OPTIMIZERS.register
class SGD(Optimizer):
    """Stochastic gradient descent as ``torch.optim.SGD`` (dampening 0): momentum,
    Nesterov momentum and L2 weight decay added to the gradient."""

    momentum = Hyperparameter("momentum", 0.0, 1.0)

    def __init__(self, params, lr: float = 0.01, momentum: float = 0.0,
                 nesterov: bool = False, weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum = momentum
        self.weight_decay = weight_decay
        if nesterov and not momentum:
            raise ValueError("Nesterov momentum needs momentum > 0")
        self.nesterov = bool(nesterov)
        self.velocity = self._zeros_like_params() if momentum else State()

    def _buffers(self) -> dict:
        return {"velocity": self.velocity}

    def _update(self, t):
        (v,) = t.state
        if self.momentum and v is None:
            raise ValueError("SGD: momentum was 0 when this optimizer was made, so it has no "
                             "velocity buffers; make a new SGD(..., momentum=...) instead")
        v = t.grad if v is None else v  # not touched without momentum
        return self._elementwise(
            "sgd_update", t.size, t.value.data, t.grad.data, v.data,
            self._skip_flag, np.int32(t.size),
            np.float32(self.lr), np.float32(self.momentum), np.int32(self.nesterov),
            np.float32(self.weight_decay))


@OPTIMIZERS.register
class Adam(Optimizer):
    """Adam exactly as ``torch.optim.Adam``: bias-corrected moments, eps added after the
    square root and the correction; ``weight_decay`` is L2 added to the gradient."""

    decoupled = False
    beta1, beta2 = Hyperparameter("beta1", 0.0, 1.0), Hyperparameter("beta2", 0.0, 1.0)
    eps = Hyperparameter("eps", 0.0)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.beta1, self.beta2 = _check_betas(betas, 2)
        self.eps = eps
        self.weight_decay = weight_decay
        self.m, self.v = self._zeros_like_params(), self._second_moments()

    def _second_moments(self) -> State:
        return self._zeros_like_params()

    def _buffers(self) -> dict:
        return {"m": self.m, "v": self.v}

    def _corrections(self) -> tuple:
        bc1, bc2 = self._bias_corrections(self.beta1, self.beta2)
        return np.float32(self.lr / bc1), np.float32(math.sqrt(bc2))

    def _adam_launch(self, t, weight_decay: float, decoupled: bool):
        m, v = t.state
        return self._elementwise(
            "adam_update", t.size, t.value.data, t.grad.data, m.data, v.data,
            self._skip_flag, np.int32(t.size),
            np.float32(self.lr), np.float32(self.beta1), np.float32(self.beta2),
            np.float32(self.eps), np.float32(weight_decay), np.int32(decoupled),
            *self._corrections())

    def _update(self, t):
        return self._adam_launch(t, self.weight_decay, self.decoupled)


@OPTIMIZERS.register
class AdamW(Adam):
    """AdamW as ``torch.optim.AdamW``: decoupled weight decay w *= 1 - lr * wd."""

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)


def _no_decay(p: Parameter) -> bool:
    """The official code's rule: no weight decay for names containing bias, norm or ln."""
    name = p.name.lower()
    return any(key in name for key in ("bias", "norm", "ln"))


@OPTIMIZERS.register
class AdamMini(Adam):
    """Adam-mini as the official v1.1.1 code (PyPI ``adam-mini``): one second moment per block
    of a tensor, a moving average of the block's mean of g^2; m stays one per element.

    Blocks come from ``Parameter.block_size``: a dense weight has one block per output row,
    a convolution weight one per filter group, ``None`` means one block for the tensor. A
    parameter named like a bias (or with block size 1) gets plain per-element AdamW without
    weight decay, as in the official code; decay is also off for names containing "norm" or
    "ln" (the official rule). ``group_size`` (a power of two) is the work-group of the block
    reduction; by default twice the device's preferred multiple.
    """

    decoupled = True
    flat = False  # blocks and weight decay differ from tensor to tensor

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, group_size: int | None = None):
        super().__init__(params, lr, betas, eps, weight_decay)
        rt = self.runtime
        limit = self._launcher("adam_mini_update").work_group_size
        if group_size is None:
            # Twice the preferred multiple (16 on PoCL, 64 on NVIDIA): barriers are cheap
            # there, and the strided loop covers any block (larger groups are much slower on
            # PoCL, which runs a group's work-items as one loop with a barrier per step).
            group_size = 2 ** int(math.log2(min(2 * rt.work_group_multiple, limit)))
        ok = isinstance(group_size, (int, np.integer)) and 1 <= group_size <= limit
        if not ok or group_size & (group_size - 1):
            raise ValueError(f"group_size must be a power of two in [1, {limit}] on this "
                             f"device, got {group_size!r}")
        self.group_size = int(group_size)

    def blocks(self, p: Parameter) -> tuple:
        """(number of blocks, block size) of ``p``; block size 1 means per-element Adam."""
        if "bias" in p.name.lower():
            return p.size, 1
        size = p.size if p.block_size is None else p.block_size
        return p.size // size, size

    def _second_moments(self) -> State:
        return State(self.runtime.zeros((self.blocks(p)[0],)) for p in self.params)

    def _update(self, t):
        p = self.params[t.key]  # per tensor: never the flat layout
        count, size = self.blocks(p)
        wd = 0.0 if _no_decay(p) else self.weight_decay
        if size == 1:
            return self._adam_launch(t, wd, decoupled=True)
        m, v = t.state
        return self._launcher("adam_mini_update")(
            (count * self.group_size,), (self.group_size,), t.value.data,
            t.grad.data, m.data, v.data, self._skip_flag, np.int32(size),
            np.float32(self.lr), np.float32(self.beta1), np.float32(self.beta2),
            np.float32(self.eps), np.float32(wd), *self._corrections(),
            cl.LocalMemory(4 * self.group_size))


@OPTIMIZERS.register
class Adan(Optimizer):
    """Adan as the official sail-sg code: betas in the code's convention (0.98, 0.92, 0.99),
    moments m, d (of gradient differences) and n, each bias-corrected; the first step (the
    first not skipped, as the device counts) uses g_prev = g. Weight decay is proximal,
    w = (w - step) / (1 + lr wd), by default, or decoupled (w *= 1 - lr wd) with
    ``no_prox=True``. Gradient-norm clipping is not offered.
    """

    beta1, beta2 = Hyperparameter("beta1", 0.0, 1.0), Hyperparameter("beta2", 0.0, 1.0)
    beta3, eps = Hyperparameter("beta3", 0.0, 1.0), Hyperparameter("eps", 0.0)

    def __init__(self, params, lr: float = 1e-3, betas=(0.98, 0.92, 0.99), eps: float = 1e-8,
                 weight_decay: float = 0.0, no_prox: bool = False):
        super().__init__(params, lr)
        self.beta1, self.beta2, self.beta3 = _check_betas(betas, 3)
        self.eps = eps
        self.weight_decay = weight_decay
        self.no_prox = bool(no_prox)
        self.m, self.d, self.n, self.g_prev = (self._zeros_like_params() for _ in range(4))

    def _buffers(self) -> dict:
        return {"m": self.m, "d": self.d, "n": self.n, "g_prev": self.g_prev}

    def _update(self, t):
        m, d, nu, g_prev = t.state
        bc1, bc2, bc3 = self._bias_corrections(self.beta1, self.beta2, self.beta3)
        return self._elementwise(
            "adan_update", t.size, t.value.data, t.grad.data, m.data, d.data,
            nu.data, g_prev.data, self._skip_flag, np.int32(t.size), np.float32(self.lr),
            np.float32(self.beta1),
            np.float32(self.beta2), np.float32(self.beta3), np.float32(self.eps),
            np.float32(self.weight_decay), np.int32(self.no_prox), np.int32(self.steps),
            np.float32(self.lr / bc1), np.float32(self.lr * self.beta2 / bc2),
            np.float32(math.sqrt(bc3)))
