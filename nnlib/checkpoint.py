"""Checkpoint files: numpy ``.npz`` archives (no pickle) with a JSON header, written
atomically so that a crash never leaves a half-written file in place of a good one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np


def save_npz(path, arrays: dict, meta: dict) -> None:
    """Write ``arrays`` and ``meta`` (as ``__meta__``) to a temporary file beside ``path``,
    flush it to disk, then rename it over ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent or ".", prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays, __meta__=np.array(json.dumps(meta)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_meta(data, path, fmt: str) -> dict:
    """The JSON header of an opened ``.npz``, checked to be of format ``fmt``."""
    if "__meta__" not in data:
        raise ValueError(f"{path} is not an nnlib checkpoint")
    meta = json.loads(str(data["__meta__"]))
    if meta.get("format") != fmt:
        raise ValueError(f"{path}: not a {fmt} checkpoint (format {meta.get('format')!r})")
    return meta
