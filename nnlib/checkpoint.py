"""Checkpoints: one file for a whole training run (a model, optionally its optimizer's state
and the epoch), written atomically and loaded only after every part of it has been checked.

The file is an uncompressed ``.npz`` (no pickle) whose ``__meta__`` entry holds a JSON header
    {"format": "nnlib.checkpoint", "version": 1, "kind": a name in MODELS,
     "model": {"arch": ..., "state": ...}, "optimizer": null | {...}, "epoch": null | int}
and whose arrays are named ``model.<name>`` and ``optimizer.<entry>``.

Writing: a temporary file in the same folder, flushed and fsynced, renamed over the target,
then the folder fsynced; the temporary file is removed on any error, and those of writers that
were killed are removed by the next save of the same path.

Reading: the zip members' headers are read first (allocation is bounded by the file's size),
then the header is checked (format, version, classes from :mod:`nnlib.registry`), every
declared shape is compared with the stored arrays before any layer is built, and dtypes and
finiteness are checked. A load either completes or changes nothing; every refusal is a
:class:`CheckpointError`.

Taught in notebooks/02_train_fractal_classifier.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import stat
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .registry import MODELS, OPTIMIZERS

FORMAT, VERSION = "nnlib.checkpoint", 1
# dtypes a checkpoint may hold: float parameters and state, integer counters, the JSON header
_DTYPES = {np.dtype(t) for t in ("<f4", "<f8", "<i4", "<i8")}


class CheckpointError(ValueError, KeyError):
    """A checkpoint (or optimizer state dict) that nnlib refuses to load, and why."""

    __str__ = BaseException.__str__  # not KeyError's quoted message


# ---------------------------------------------------------------- writing
NAME_MAX = 255  # bytes of one file name on Linux, macOS and Windows file systems
_TEMP_EXTRA = 30  # what a temporary name adds: ".", ".<pid>.<8 hex>.tmp"


def _temp_stem(path: Path) -> str:
    """The target's name as its temporary files carry it: shortened (with a digest of the
    whole name) when the temporary name would be longer than a file name may be."""
    name = path.name
    if len(os.fsencode(name)) + _TEMP_EXTRA <= NAME_MAX:
        return name
    digest = hashlib.sha1(os.fsencode(name)).hexdigest()[:12]
    return os.fsencode(name)[:NAME_MAX - _TEMP_EXTRA - 13].decode(errors="ignore") + "~" + digest


def _temp_name(path: Path) -> Path:
    return path.parent / f".{_temp_stem(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(path) -> list:
    """Remove the temporary files that killed writers of ``path`` left; returns their names."""
    path = Path(path)
    pattern = re.compile(rf"^\.{re.escape(_temp_stem(path))}\.(\d+)\.[0-9a-f]+\.tmp$")
    removed = []
    for entry in path.parent.iterdir():
        match = pattern.match(entry.name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            with contextlib.suppress(OSError):
                entry.unlink()
                removed.append(entry.name)
    return removed


def check_target(path) -> Path:
    """``path`` as a Path if a checkpoint can be written there: a file name (not empty, not
    a folder, at most NAME_MAX bytes) in an existing folder."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise ValueError(f"save_checkpoint: the path must name a file, got {path!r}")
    path = Path(path)
    if len(os.fsencode(path.name)) > NAME_MAX:
        raise ValueError(f"save_checkpoint: the file name is {len(os.fsencode(path.name))} "
                         f"bytes long; file systems allow at most {NAME_MAX}")
    if path.is_dir():
        raise IsADirectoryError(f"save_checkpoint: {path} is a folder; name a file in it")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"save_checkpoint: no folder {path.parent} to write {path.name} "
                                f"in")
    return path


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, write) -> None:
    """``write(f)`` into a temporary binary file beside ``path``, then that file renamed over
    ``path`` as the module docstring says (a reader sees the old file or the whole new one);
    the file gets the usual mode (umask applied), not 0600."""
    remove_stale_temps(path)
    tmp = _temp_name(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def save_npz(path, arrays: dict, meta: dict) -> None:
    """Write ``arrays`` and ``meta`` (as ``__meta__``) atomically to ``path`` (see the module
    docstring)."""
    write_atomically(check_target(path),
                     lambda f: np.savez(f, **arrays, __meta__=np.array(json.dumps(meta))))


# ---------------------------------------------------------------- reading
def _read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo) -> np.ndarray:
    """One ``.npy`` member, its header checked before its data is read."""
    with z.open(info) as member:
        version = np.lib.format.read_magic(member)
        read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                       (2, 0): np.lib.format.read_array_header_2_0}.get(version)
        if read_header is None:
            raise CheckpointError(f"{info.filename}: unknown .npy version {version}")
        shape, fortran, dtype = read_header(member)
        if info.filename == "__meta__.npy":
            if dtype.kind != "U" or shape != ():
                raise CheckpointError("__meta__ is not a JSON string")
        elif dtype not in _DTYPES:
            raise CheckpointError(f"{info.filename}: dtype {dtype} is not allowed")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if fortran or nbytes != info.file_size - member.tell():
            raise CheckpointError(f"{info.filename}: its header does not match its size")
        data = member.read(nbytes + 1)  # reading to the end checks the CRC
        if len(data) != nbytes:
            raise CheckpointError(f"{info.filename}: truncated")
    return np.frombuffer(data, dtype).reshape(shape).copy()


def read_npz(path) -> tuple:
    """(header dict, {name: array}) of an nnlib checkpoint, or a CheckpointError."""
    path = Path(path)
    info = path.stat()  # a missing file raises FileNotFoundError, as open() does
    if not stat.S_ISREG(info.st_mode):
        raise CheckpointError(f"{path}: is not a regular file (a device, pipe, socket or "
                              f"folder), so not a checkpoint")
    size = info.st_size
    try:
        with open(path, "rb") as f, zipfile.ZipFile(f) as z:
            infos = z.infolist()
            names = [i.filename for i in infos]
            if len(set(names)) != len(names) or not all(n.endswith(".npy") for n in names):
                raise CheckpointError("its members are not distinct .npy arrays")
            if any(i.compress_type != zipfile.ZIP_STORED for i in infos) \
                    or sum(i.file_size for i in infos) > size:
                raise CheckpointError("its arrays are compressed or larger than the file")
            arrays = {i.filename[:-4]: _read_member(z, i) for i in infos}
        if "__meta__" not in arrays:
            raise CheckpointError("is not an nnlib checkpoint (no __meta__ header)")
        meta = json.loads(str(arrays.pop("__meta__")))
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from None
    except Exception as err:  # a damaged zip, header or JSON: nnlib's error, not a crash
        raise CheckpointError(f"{path}: is not a readable nnlib checkpoint "
                              f"({type(err).__name__}: {err})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"{path}: is not an nnlib checkpoint (format {fmt!r})")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {meta.get('version')!r}; this nnlib "
                              f"reads version {VERSION}")
    return meta, arrays


# ---------------------------------------------------------------- checks
def check_int(value, what: str, low: int = 1, high: int = 2**31 - 1) -> int:
    """``value`` if it is an integer (not a bool) in [low, high], else a CheckpointError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
            or not low <= value <= high:
        raise CheckpointError(f"{what}: an integer in [{low}, {high}], got {value!r}")
    return int(value)


def check_name(value, known, what: str) -> str:
    """``value`` if it is one of the names ``known`` (a str), else a CheckpointError."""
    if not isinstance(value, str) or value not in known:
        raise CheckpointError(f"{what} {value!r} is not one of {list(known)}")
    return value


def check_dict(value, what: str, keys=None) -> dict:
    """``value`` if it is a dict (with only ``keys``, when given), else a CheckpointError."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{what}: expected a JSON object, got {type(value).__name__}")
    if keys is not None and set(value) - set(keys):
        raise CheckpointError(f"{what}: unknown entries {sorted(set(value) - set(keys))}")
    return value


def check_arrays(arrays: dict, declared: dict, prefix: str) -> dict:
    """The arrays named ``prefix + name`` for each ``name: (shape, dtype[, "positive"])`` in
    ``declared``, checked (present, of that shape and dtype, finite, > 0 if "positive");
    no other array may have the prefix."""
    extra = sorted(k for k in arrays if k.startswith(prefix) and k[len(prefix):] not in declared)
    if extra:
        raise CheckpointError(f"unexpected arrays {extra[:3]}")
    out = {}
    for name, (shape, dtype, *positive) in declared.items():
        key = prefix + name
        if key not in arrays:
            raise CheckpointError(f"array {key} is missing")
        a = arrays[key]
        if a.shape != tuple(shape) or a.dtype != np.dtype(dtype):
            raise CheckpointError(f"array {key}: {a.dtype} {a.shape}, the header declares "
                                  f"{np.dtype(dtype)} {tuple(shape)}")
        if not np.isfinite(a).all():
            raise CheckpointError(f"array {key} holds NaN or infinity")
        if positive and (a <= 0).any():
            raise CheckpointError(f"array {key} holds a value <= 0")
        out[name] = a
    return out


def _shape_of(arch):
    """An architecture as JSON without its initialisation seeds and kernel variants (a
    model built with another seed or variant takes the same values)."""
    if isinstance(arch, dict):
        return {k: _shape_of(v) for k, v in arch.items() if k not in ("seed", "variant")}
    if isinstance(arch, (list, tuple)):
        return [_shape_of(v) for v in arch]
    return arch


# ---------------------------------------------------------------- the public functions
class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns."""

    model: object
    optimizer: object
    epoch: int | None


def save_checkpoint(path, model, optimizer=None, epoch: int | None = None) -> None:
    """Write ``model`` (a Sequential or a CATCH detector), the state of ``optimizer`` (which
    must update parameters of ``model``) and ``epoch`` to ``path`` in one atomic step."""
    path = check_target(path)
    kind = next((k for k, cls in MODELS.items() if type(model) is cls), None)
    if kind is None:
        raise TypeError(f"save_checkpoint: model must be one of {list(MODELS)}, got "
                        f"{type(model).__name__}")
    if epoch is not None:
        epoch = check_int(epoch, "save_checkpoint: epoch", 0, 2**53)
    spec, arrays = model._checkpoint()
    arrays = {f"model.{k}": v for k, v in arrays.items()}
    meta = {"format": FORMAT, "version": VERSION, "kind": kind, "model": spec,
            "optimizer": None, "epoch": epoch}
    if optimizer is not None:
        if type(optimizer) not in OPTIMIZERS.values():
            raise TypeError(f"save_checkpoint: optimizer must be one of {list(OPTIMIZERS)}, "
                            f"got {type(optimizer).__name__}")
        index = {id(p): i for i, p in enumerate(model._checkpoint_parameters())}
        if not all(id(p) in index for p in optimizer.params):
            raise ValueError("save_checkpoint: the optimizer updates parameters that are not "
                             "the model's")
        meta["optimizer"] = {"class": type(optimizer).__name__, "config": optimizer.config(),
                             "params": [index[id(p)] for p in optimizer.params]}
        arrays.update({f"optimizer.{k}": np.asarray(v)
                       for k, v in optimizer.state_dict().items()})
    _check_loadable(meta, arrays, optimizer)
    save_npz(path, arrays, meta)


def _check_loadable(meta: dict, arrays: dict, optimizer) -> None:
    """Run the loader's checks on what is about to be written (a file that saves, loads):
    weights with NaN or infinity (a diverged run) or an optimizer state that overflowed are
    refused before anything is written, saying which array."""
    try:
        header = json.loads(json.dumps(meta))
        spec = header["model"]
        check_arrays(arrays, MODELS[header["kind"]]._checkpoint_declared(spec), "model.")
        if optimizer is not None:
            optimizer.check_state({k[len("optimizer."):]: v for k, v in arrays.items()
                                   if k.startswith("optimizer.")})
    except CheckpointError as err:
        raise CheckpointError(f"save_checkpoint: nothing written, the file would not load: "
                              f"{err}") from None


def load_model(path, cls, runtime=None):
    """The model a checkpoint holds, which must be a ``cls`` (``Sequential.load``,
    ``CATCH.load``); any optimizer state in the file is checked but not kept."""
    meta, arrays = read_npz(path)
    if isinstance(meta, dict) and meta.get("kind") != cls.__name__:
        raise CheckpointError(f"{path}: holds a {meta.get('kind')!r}, not a {cls.__name__}")
    try:
        return _load(meta, arrays, None, None, runtime).model
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from None


def load_checkpoint(path, model=None, optimizer=None, runtime=None) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`.

    Without ``model`` it is built (on ``runtime``, else the default one), and so is the
    optimizer, if the file holds one. With ``model`` (and ``optimizer``), their architecture
    and class must match the file's, and their values are overwritten. Either everything
    loads or nothing changes: every check runs before the first value is written.
    Returns (model, optimizer, epoch); raises :class:`CheckpointError`.
    """
    meta, arrays = read_npz(path)
    try:
        return _load(meta, arrays, model, optimizer, runtime)
    except CheckpointError as err:
        raise CheckpointError(f"{path}: {err}") from None


def _load(meta, arrays, model, optimizer, runtime) -> Checkpoint:
    check_dict(meta, "header", ("format", "version", "kind", "model", "optimizer", "epoch"))
    cls = MODELS[check_name(meta.get("kind"), MODELS, "kind")]
    epoch = meta.get("epoch")
    if epoch is not None:
        epoch = check_int(epoch, "epoch", 0, 2**53)
    if optimizer is not None and model is None:
        raise TypeError("load_checkpoint: loading into an optimizer needs its model too")
    spec = check_dict(meta.get("model"), "model", ("arch", "state"))
    declared = cls._checkpoint_declared(spec)  # validates the header; allocates nothing
    if model is not None:
        if type(model) is not cls:
            raise CheckpointError(f"holds a {meta['kind']}, not a {type(model).__name__}")
        if _shape_of(model._checkpoint()[0]["arch"]) != _shape_of(spec["arch"]):
            raise CheckpointError(f"its {meta['kind']} has another architecture than the "
                                  "model given")
    values = check_arrays(arrays, declared, "model.")
    opt_meta = meta.get("optimizer")
    opt_arrays = {k[len("optimizer."):]: v for k, v in arrays.items()
                  if k.startswith("optimizer.")}
    if opt_meta is None and (opt_arrays or optimizer is not None):
        raise CheckpointError("holds no optimizer state" if optimizer is not None
                              else "holds optimizer arrays but no optimizer header")
    unknown = sorted(k for k in arrays if not k.startswith(("model.", "optimizer.")))
    if unknown:
        raise CheckpointError(f"unexpected arrays {unknown[:3]}")
    opt_cls = None
    if opt_meta is not None:
        check_dict(opt_meta, "optimizer", ("class", "config", "params"))
        opt_cls = OPTIMIZERS[check_name(opt_meta.get("class"), OPTIMIZERS, "optimizer class")]
        check_dict(opt_meta.get("config"), "optimizer config")
        params = opt_meta.get("params")
        if not isinstance(params, list) or not params or len(set(map(str, params))) != len(
                params):
            raise CheckpointError("optimizer params: a list of distinct parameter indices")
        if optimizer is not None and type(optimizer) is not opt_cls:
            raise CheckpointError(f"holds {opt_cls.__name__} state, not "
                                  f"{type(optimizer).__name__}")
    built = model is None
    if built:
        try:
            model = cls._checkpoint_build(spec, runtime)
        except (TypeError, ValueError) as err:
            raise CheckpointError(f"the model's header is refused: {err}") from None
    all_params = model._checkpoint_parameters()
    state = None
    if opt_meta is not None:
        chosen = [all_params[check_int(i, "optimizer parameter index", 0, len(all_params) - 1)]
                  for i in opt_meta["params"]]
        if optimizer is None:
            try:
                optimizer = opt_cls(chosen, **opt_meta["config"])
            except (TypeError, ValueError) as err:
                raise CheckpointError(f"the optimizer's header is refused: {err}") from None
        elif [id(p) for p in optimizer.params] != [id(p) for p in chosen]:
            raise CheckpointError("the optimizer given updates other parameters than the "
                                  "file's")
        elif json.loads(json.dumps(optimizer.config())) != opt_meta["config"]:
            raise CheckpointError(f"the optimizer given has another configuration "
                                  f"({optimizer.config()}) than the file's "
                                  f"({opt_meta['config']}); set it after loading")
        state = optimizer.check_state(opt_arrays)
    # every check passed: write
    model._checkpoint_restore(spec, values)
    if state is not None:
        optimizer.load_state_dict(state)
    return Checkpoint(model, optimizer, epoch)

