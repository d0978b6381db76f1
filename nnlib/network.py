"""Sequential: a stack of layers with a loss on the device, training and checkpoints.

Taught in notebooks/01_dense_kernels, notebooks/02_train_fractal_classifier.
"""

from __future__ import annotations

import functools
import inspect
import threading

import numpy as np
import pyopencl.array as cla

from . import fit_path
from .batches import DeviceBatches
from .codes import LOSSES
from .checkpoint import (CheckpointError, check_dict, check_int, check_name, load_model,
                         save_checkpoint)
from .runtime import check_shape, host_numbers
from .sizes import ceil_div
from .layers.base import Layer, positive_int
from .loss import DeviceLoss, Loss
from .parameter import FlatLayout
from .registry import LAYERS, MODELS
from .step_fusion import FusedBackward
from .step_replay import StepReplay

def _declared_layer(i: int, entry) -> dict:
    """The parameter shapes a checkpoint's layer entry declares, from its checked config:
    arguments without a default are sizes, ``seed`` a seed, booleans booleans, and the
    names in the class's ``choices`` one of those; the shapes are the class's."""
    check_dict(entry, f"layer {i}", ("class", "config"))
    cls = LAYERS[check_name(entry.get("class"), LAYERS, f"layer {i}: class")]
    signature = inspect.signature(cls.__init__).parameters
    allowed = {k: v.default for k, v in signature.items()
               if k not in ("self", "runtime") and not k.startswith("_")}
    config = check_dict(entry.get("config"), f"layer {i} config", allowed)
    missing = [k for k, v in allowed.items() if v is inspect.Parameter.empty and k not in config]
    if missing:
        raise CheckpointError(f"layer {i} config lacks {missing}")
    c = {**allowed, **config}
    for key, default in allowed.items():
        if default is inspect.Parameter.empty:
            check_int(c[key], f"layer {i} {key}")
        elif isinstance(default, bool) and not isinstance(c[key], bool):
            raise CheckpointError(f"layer {i} {key}: true or false, got {c[key]!r}")
    check_int(c["seed"], f"layer {i} seed", 0, 2**63 - 1)
    for key, names in cls.choices.items():
        check_name(c[key], names, f"layer {i} {key}")
    return {f"{i}.{name}": (shape, np.float32)
            for name, shape in cls.parameter_shapes(c).items()}


def _one_at_a_time(method):
    """Run ``method`` under the network's lock: a second thread training or running the same
    network waits instead of releasing the arrays the first one's backward pass needs."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self._busy:
            return method(self, *args, **kwargs)
    return locked


@MODELS.register
class Sequential:
    """Layers applied in order; ``loss`` is ``"mse"`` or ``"cross_entropy"`` (the last
    layer must then use softmax, and the pair is differentiated as one, as in PyTorch)."""

    # train_step replays the recorded launches of a step where they are the same
    # (nnlib.step_replay); False runs every step's Python again
    replay_steps = True

    def __init__(self, layers, loss: str = "mse"):
        self.layers = list(layers)
        if not self.layers or not all(isinstance(layer, Layer) for layer in self.layers):
            raise TypeError("Sequential needs a non-empty list of nnlib layers")
        if loss not in LOSSES:
            raise ValueError(f"unknown loss {loss!r}; choose one of {list(LOSSES)}")
        last = self.layers[-1]
        if loss == "cross_entropy" and getattr(last, "activation", None) != "softmax":
            raise ValueError("cross_entropy needs a last layer with activation='softmax'")
        self.loss = loss
        self.runtime = last.runtime
        others = [i for i, layer in enumerate(self.layers) if layer.runtime is not self.runtime]
        if others:
            raise ValueError(f"Sequential: layers {others} were made on another runtime than "
                             f"the last layer ({self.runtime}); make every layer on one "
                             f"(runtime=... or the default, nnlib.get_runtime())")
        self._busy = threading.RLock()
        self._own = {id(p) for p in self.parameters()}
        self.loss_function = Loss(loss, self.runtime)
        # every parameter end to end in one buffer: an optimizer updates them in one launch
        self.layout = FlatLayout.lay_out(self.parameters())
        # (the optimizer and its parameters' ids, their FusedBackward) of the last train_step
        self._backward_plan = None
        self._replay = StepReplay(self)  # recorded steps; replay_steps = False turns them off
        self._batch_arrays: dict = {}  # every fit's DeviceBatches fills these, so steps replay

    def __repr__(self):
        inner = ",\n  ".join(repr(layer) for layer in self.layers)
        return f"Sequential(loss={self.loss!r},\n  {inner}\n)"

    def parameters(self) -> list:
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.zero_grad()

    @_one_at_a_time
    def forward(self, x):
        # Every layer lets go of its last pass's arrays first: the memory pool then hands the
        # same buffers back, so the launchers need not set their arguments again (an output
        # the caller still holds is not reused).
        for layer in self.layers:
            layer.release()
        for layer in self.layers:
            x = layer.forward(x)
        return x

    __call__ = forward

    @_one_at_a_time
    def backward(self, grad_out):
        for layer in reversed(self.layers):
            grad_out = layer.backward(grad_out)
        return grad_out

    def targets(self, y, batch: int):
        """``y`` as the device targets of a batch of ``batch`` rows: class labels (integers,
        for cross-entropy) one-hot, checked against the output width."""
        n_out = self.layers[-1].n_out
        if self.loss == "cross_entropy" and not isinstance(y, cla.Array) \
                and np.ndim(y) == 1:
            labels = np.asarray(y)
            if not np.issubdtype(labels.dtype, np.integer):
                raise TypeError(f"class labels must be integers, got dtype {labels.dtype}")
            check_shape("class labels", labels.shape, (batch,))
            if labels.min() < 0 or labels.max() >= n_out:
                raise ValueError(f"class labels must lie in [0, {n_out}), got "
                                 f"{labels.min()}..{labels.max()}")
            y = np.eye(n_out, dtype=np.float32)[labels]
        return self.runtime.to_device(y, "targets", shape=(batch, n_out))

    def loss_rows(self, out, target, rows_buf=None, offset: int = 0):
        """Enqueue the per-sample losses of ``out`` against ``target`` into ``rows_buf``."""
        return self.loss_function.rows(out, target, rows_buf, offset)

    @_one_at_a_time
    def compute_loss(self, x, y) -> float:
        """The mean loss of the network on (x, y), read back to the host."""
        out = self.forward(x)
        target = self.targets(y, out.shape[0])
        return float(self.loss_function.value(out, target))

    @_one_at_a_time
    def train_step(self, x, y, optimizer, loss_buf=None, offset: int = 0) -> DeviceLoss:
        """Forward, loss, backward and update, all enqueued without waiting for the device.

        The same as ``optimizer.zero_grad()``, ``forward``, the loss's gradient, ``backward``
        and ``optimizer.step()``, with fewer launches (:mod:`nnlib.step_fusion`); a step
        that launches what an earlier one did replays its launches (:mod:`nnlib.step_replay`,
        ``replay_steps``). Returns a :class:`DeviceLoss`; the host waits only if its value
        is read.
        """
        if self.loss == "mse" and getattr(self.layers[-1], "activation", "") == "softmax":
            raise ValueError("mse after softmax is not supported; use loss='cross_entropy'")
        self._check_optimizer(optimizer)
        key = (optimizer, *map(id, optimizer.params))
        if self._backward_plan is None or self._backward_plan[0] != key:
            self._backward_plan = (key, FusedBackward(self.layers, optimizer))
        fused = self._backward_plan[1]
        fused.zero_grad()
        if self.replay_steps:
            out, target, rows = self._replay.step(
                x, y, fused, loss_buf, offset,
                lambda: self._forward_backward(x, y, fused, loss_buf, offset))
        else:
            out, target, rows = self._forward_backward(x, y, fused, loss_buf, offset)
        if rows is None:  # no head: the losses take a launch of their own
            rows = self.loss_function.rows(out, target, loss_buf, offset)
        optimizer.step()
        divisor = self.loss_function.divisor(out)
        if loss_buf is None:
            return DeviceLoss(rows, divisor)
        return DeviceLoss(rows, divisor, offset, out.shape[0])

    def _forward_backward(self, x, y, fused: FusedBackward, loss_buf, offset: int) -> tuple:
        """The launches of a training step that :mod:`nnlib.step_replay` records: forward,
        the loss's gradient, backward with ``fused``; where ``fused.head`` takes the batch,
        the last layer's three and each sample's loss (into ``loss_buf[offset:]``, a new
        array if None) in one launch. Returns (output, target, the losses' array or None
        where they are not stored yet)."""
        head, last = fused.head, self.layers[-1]
        if head is None:
            out = self.forward(x)
        else:
            for layer in self.layers:
                layer.release()
            for layer in self.layers[:-1]:
                x = layer.forward(x)
            x = self.runtime.to_device(x, "Dense input", shape=(None, last.n_in))
            if len(x) and head.takes(len(x)):
                target = self.targets(y, len(x))
                rows = self.runtime.empty((len(x),)) if loss_buf is None else loss_buf
                out, dx = head.step(x, target, self.loss_function, rows, offset)
                if dx is not None:
                    fused.backward(dx, top=len(self.layers) - 2)
                return out, target, rows
            out = last.forward(x)
        target = self.targets(y, out.shape[0])
        top = getattr(last, "activation", "none") if fused.chain else "none"
        fused.backward(self.loss_function.output_gradient(out, target, top))
        return out, target, None

    def _check_optimizer(self, optimizer) -> None:
        params = getattr(optimizer, "params", None)
        if not isinstance(params, list) or not hasattr(optimizer, "step"):
            raise TypeError(f"optimizer must be an nnlib optimizer (nnlib.optim.Adam(net."
                            f"parameters()), ...), got {type(optimizer).__name__}")
        foreign = [p.name for p in params if id(p) not in self._own]
        if foreign:
            raise ValueError(f"the optimizer updates {len(foreign)} parameters that are not "
                             f"this network's (e.g. {foreign[0]!r}): make it from this "
                             f"network's parameters(), e.g. nnlib.optim.Adam(net.parameters())")

    def _validation(self, data, x) -> tuple:
        """``validation_data`` (inputs, targets) checked as fit's own data, before training."""
        if not isinstance(data, (tuple, list)) or len(data) != 2:
            raise TypeError("fit: validation_data must be a pair (inputs, targets)")
        xv = host_numbers(data[0], "validation inputs")
        yv = host_numbers(data[1], "validation targets")
        if len(xv) == 0 or len(xv) != len(yv):
            raise ValueError(f"fit: validation_data has {len(xv)} inputs and {len(yv)} "
                             f"targets; need as many, at least one")
        if xv.shape[1:] != x.shape[1:]:
            raise ValueError(f"fit: validation inputs have shape {xv.shape}, the training "
                             f"inputs {x.shape}: the same shape after the first axis needed")
        if np.iscomplexobj(xv) or not np.isfinite(xv).all():
            raise ValueError("fit: validation inputs must be real and finite")
        return xv, self.targets(yv, len(yv))

    @_one_at_a_time
    def fit(self, x, y, optimizer, epochs: int = 10, batch_size: int = 32, seed: int = 0,
            validation_data=None, progress: bool = True, fused: bool | None = None) -> dict:
        """Mini-batch training with shuffling; returns the history of epoch losses and the
        path it trained on (``history["path"]``, "fused" or "layers").

        ``fused``: None (the default) trains with the fused kernel (:mod:`nnlib.fused`, one
        launch per run of steps) where the network qualifies and that is faster for this
        batch size on this device (:mod:`nnlib.fit_path` says how that is decided); False
        layer by layer (:meth:`train_step`); True with the fused kernel, or an error saying
        why the network does not qualify. Both paths train alike (the same steps, up to
        float32 rounding) and leave the trained weights in the layers' parameters."""
        from tqdm.auto import tqdm

        x = host_numbers(x, "fit inputs")
        y = host_numbers(y, "fit targets")
        n = len(x)
        if len(y) != n:
            raise ValueError(f"fit: {n} inputs but {len(y)} targets")
        positive_int("fit", "batch_size", batch_size)
        if n == 0 or isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) \
                or epochs < 0:
            raise ValueError("fit: needs data, batch_size >= 1 and epochs >= 0")
        # checked (finite numbers, two axes) as they are copied to the device, once per fit
        inputs = self.runtime.to_device(x, "fit inputs", shape=(None, None), wait=True)
        self._check_optimizer(optimizer)
        if fused is not None and not isinstance(fused, (bool, np.bool_)):
            raise TypeError(f"fit: fused must be None (choose), True or False, got {fused!r}")
        if validation_data is not None:
            validation_data = self._validation(validation_data, x)
        trainer = fit_path.trainer(self, optimizer, min(batch_size, n), fused)
        rng = np.random.default_rng(seed)
        history = {"loss": [], "val_loss": [], "path": "layers" if trainer is None else "fused"}
        per_sample = self.layers[-1].n_out if self.loss == "mse" else 1
        rows = self.runtime.empty((n,))
        data = DeviceBatches(self.runtime, inputs, self.targets(y, n),  # batches gathered there
                             arrays=self._batch_arrays)
        bar = tqdm(range(epochs), desc="epochs", disable=not progress)
        for _ in bar:
            skipped_before = optimizer.skipped_steps
            order = rng.permutation(n)
            if trainer is not None:
                trainer.epoch(data.inputs, data.targets, order, batch_size, rows)
            else:
                data.shuffle(order)
                for start in range(0, n, batch_size):
                    self.train_step(*data.batch(start, min(batch_size, n - start)), optimizer,
                                    rows, start)
            history["loss"].append(float(rows.get().astype(np.float64).sum() / (n * per_sample)))
            skipped = optimizer.skipped_steps - skipped_before
            if skipped:
                raise FloatingPointError(
                    f"fit: the optimizer skipped {skipped} of {ceil_div(n, batch_size)} steps of "
                    f"epoch {len(history['loss'])} because gradients held NaN or infinity; "
                    "lower the learning rate or check the inputs")
            shown = {"loss": f"{history['loss'][-1]:.4f}"}
            if validation_data is not None:
                history["val_loss"].append(self.compute_loss(*validation_data))
                shown["val_loss"] = f"{history['val_loss'][-1]:.4f}"
            bar.set_postfix(shown)
        return history

    @_one_at_a_time
    def predict(self, x, batch_size: int = 1024) -> np.ndarray:
        """Outputs for ``x`` as a numpy array, computed in batches."""
        x = host_numbers(x, "predict input")
        positive_int("predict", "batch_size", batch_size)
        if len(x) == 0:
            raise ValueError("predict input: batch is empty")
        return np.concatenate([self.forward(x[i:i + batch_size]).get()
                               for i in range(0, len(x), batch_size)])

    # ---------------------------------------------------------------- checkpoints
    def save(self, path) -> None:
        """Write the network to ``path`` atomically (``nnlib.save_checkpoint`` without an
        optimizer; no pickle). Only the layers in :data:`nnlib.registry.LAYERS`."""
        save_checkpoint(path, self)

    @classmethod
    def load(cls, path, runtime=None) -> "Sequential":
        """The network saved at ``path``, checked completely before it is built."""
        return load_model(path, cls, runtime)

    def _checkpoint(self) -> tuple:
        for layer in self.layers:
            if type(layer) not in LAYERS.values():
                raise TypeError(f"save: {type(layer).__name__} cannot be saved; checkpoints "
                                f"hold {list(LAYERS)}")
        arch = {"loss": self.loss,
                "layers": [{"class": type(layer).__name__, "config": layer.config()}
                           for layer in self.layers]}
        arrays = {f"{i}.{p.name}": p.numpy()
                  for i, layer in enumerate(self.layers) for p in layer.parameters()}
        return {"arch": arch, "state": {}}, arrays

    def _checkpoint_parameters(self) -> list:
        return self.parameters()

    @staticmethod
    def _checkpoint_declared(spec) -> dict:
        arch = check_dict(spec.get("arch"), "model arch", ("loss", "layers"))
        if spec.get("state") != {}:
            raise CheckpointError("a Sequential's state entry must be {}")
        check_name(arch.get("loss"), LOSSES, "loss")
        layers = arch.get("layers")
        if not isinstance(layers, list) or not layers:
            raise CheckpointError("model arch: layers must be a non-empty list")
        return {k: v for i, entry in enumerate(layers)
                for k, v in _declared_layer(i, entry).items()}

    @classmethod
    def _checkpoint_build(cls, spec, runtime) -> "Sequential":
        arch = spec["arch"]
        layers = [LAYERS[e["class"]](**e["config"], runtime=runtime)
                  for e in arch["layers"]]
        return cls(layers, loss=arch["loss"])

    def _checkpoint_restore(self, spec, values: dict) -> None:
        for i, layer in enumerate(self.layers):
            for p in layer.parameters():
                p.set(values[f"{i}.{p.name}"])
