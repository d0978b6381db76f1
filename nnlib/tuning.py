"""Autotuning: kernel parameters chosen per device by a short measured search, cached on disk.

The fastest tile size, vector width or work-group size of a kernel depends on the device and
on its compiler (the same source ran 1.33x numpy's speed on one CPU and 0.25x on another).
So kernel families ask :func:`tuned` for their parameters: on first use on a device it times
each candidate on a representative problem, keeps the fastest, and stores the result in a
JSON file per device and driver, as CLBlast's tuned-parameter database does (there: compiled
in, per device; here: measured on the reader's machine, as tinygrad's BEAM search does).

Where results live: ``$XDG_CACHE_HOME/nnlib/tuning/`` (default ``~/.cache/nnlib/tuning/``),
or ``$NNLIB_TUNING_DIR``; one file per device key (platform name and version, device name,
driver version and the ``NNLIB_PROFILE`` value). A result holds for the kernel source it was
measured on: when ``kernels/<topic>.cl`` or a shared header changes, the family searches again.

``NNLIB_TUNE`` (or :func:`set_mode`) controls it:
  ``1`` (default)  search on first use, then read the cache;
  ``0``            no search and no cache: every family uses its default parameters;
  ``retune``       search again on first use in this process and overwrite the cache.
:func:`clear` deletes a device's stored results (the next use searches again).

A search costs mostly compilation (PoCL: 1-3 s per candidate kernel on first use, then its
own disk cache), so each family spends at most ``BUDGET_S`` seconds per process on new
candidates, the most promising first, and the next process goes on where it stopped.
Tests and the nbval check run with ``NNLIB_TUNE=0`` (tests/conftest.py, ``make notebooks``):
the same kernels on every run, and no writes to the user's cache; the unit tests run every
candidate explicitly instead.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import sources

log = logging.getLogger(__name__)
MODES = ("0", "1", "retune")
_mode: str | None = None  # set_mode's value; None: read NNLIB_TUNE
_memory: dict = {}  # (device key, family, shape class) -> params, this process's results


def mode() -> str:
    """The tuning mode: set_mode's value, else ``NNLIB_TUNE``, else ``"1"``."""
    value = _mode if _mode is not None else os.environ.get("NNLIB_TUNE", "1").strip().lower()
    if value not in MODES:
        raise ValueError(f"NNLIB_TUNE must be one of {MODES}, got {value!r}")
    return value


def set_mode(value) -> None:
    """Override ``NNLIB_TUNE`` in this process (``None``: follow the variable again). Kernels
    already built keep their parameters: set the mode before creating layers."""
    global _mode
    if value is not None and str(value) not in MODES:
        raise ValueError(f"tuning mode must be one of {MODES}, got {value!r}")
    _mode = None if value is None else str(value)
    _memory.clear()


def cache_dir() -> Path:
    if os.environ.get("NNLIB_TUNING_DIR"):
        return Path(os.environ["NNLIB_TUNING_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "nnlib" / "tuning"


def device_key(rt) -> dict:
    """What identifies a device's results: another driver, profile or work-group cap means
    another search."""
    d = rt.device
    cap = getattr(rt, "cap", None)
    return {"platform": d.platform.name.strip(), "platform_version": d.platform.version.strip(),
            "device": d.name.strip(), "driver": d.driver_version.strip(),
            "profile": os.environ.get("NNLIB_PROFILE", ""),
            **({"max_work_group": cap} if cap is not None else {})}


def cache_file(rt) -> Path:
    key = device_key(rt)
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", key["device"]).strip("-")[:40]
    return cache_dir() / f"{slug}-{digest}.json"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}  # missing or damaged: as if absent


def _read(path: Path) -> dict:
    data = _read_json(path)
    return data if isinstance(data.get("results"), dict) else {}


def _write_atomic(path: Path, data: dict) -> None:
    """Write a temporary file and rename it over ``path``: readers never see half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError as err:  # a read-only home: keep results for this process only
        log.warning("nnlib tuning: cannot store results in %s (%s)", path, err)


def _write(rt, entry_key: str, entry: dict) -> None:
    """Add one result to the device's file: re-read and merge (another process's results
    survive), then write atomically."""
    path = cache_file(rt)
    data = _read(path) or {"device": device_key(rt), "results": {}}
    data["results"][entry_key] = entry
    _write_atomic(path, data)


def clear(rt) -> None:
    """Delete the stored results of ``rt``'s device (and this process's copies)."""
    cache_file(rt).unlink(missing_ok=True)
    _memory.clear()


def stored(rt) -> dict:
    """The results stored for ``rt``'s device: ``{"family/shape": {"params", "times", ...}}``."""
    return _read(cache_file(rt)).get("results", {})


def preferred_device() -> dict | None:
    """The device ``make doctor`` measured fastest among several that compile
    (``{"platform": platform version, "device": device name}``), or None."""
    data = _read_json(cache_dir() / "preferred_device.json")
    return data if {"platform", "device"} <= set(data) else None


def set_preferred_device(platform_version: str, device: str, figures: dict) -> None:
    """Store the device the runtime should pick by default (``figures``: what decided)."""
    _write_atomic(cache_dir() / "preferred_device.json",
                  {"platform": platform_version, "device": device, "measured": figures})


def widest_vectors() -> dict:
    """{device id: widest float vector its compiler emits natively}, as
    :func:`nnlib.opencl_devices.widest_vector` measured them."""
    return _read_json(cache_dir() / "vector_widths.json")


def set_widest_vector(device_id: str, width: int) -> None:
    path = cache_dir() / "vector_widths.json"
    _write_atomic(path, {**_read_json(path), device_id: width})


def _progress(text: str, end: bool = False) -> None:
    """One progress line, rewritten in place, on a terminal; the log elsewhere (a notebook's
    stderr would become part of its stored output)."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r{text}\033[K" + ("\n" if end else ""))
        sys.stderr.flush()
    elif end:
        log.info(text)


def search(candidates, measure, label: str = "", rounds: int = 2,
           budget_s: float | None = None, known: list | None = None) -> list:
    """Time the candidates in order, then all of them ``rounds`` times more, taking turns,
    and keep each one's fastest time: a candidate that looked fast because the machine was
    quiet for a moment must be fast again, and every candidate gets as many chances (they
    are compiled by then, so the later rounds are cheap).

    ``measure(params)`` returns seconds (smaller is better) or raises when the candidate
    cannot run on this device (build failure, work-group too large): it gets ``inf``.
    ``known``: times from an earlier search (``None`` where not tried), not measured again.
    With ``budget_s``, no new candidate is started once that many seconds have passed
    (each costs a compilation; one is always timed): the rest stay ``None`` for a later
    search to finish.
    Returns ``[(params, seconds or None), ...]`` in the candidates' order.
    """
    candidates = [dict(c) for c in candidates]
    times = list(known) if known is not None else [None] * len(candidates)
    start, new = time.perf_counter(), 0
    for i, params in enumerate(candidates):
        if times[i] is not None:
            continue
        if budget_s is not None and new and time.perf_counter() - start > budget_s:
            break
        new += 1
        _progress(f"nnlib: tuning {label} {i + 1}/{len(candidates)} {_short(params)}")
        try:
            times[i] = float(measure(params))
        except Exception as err:  # noqa: BLE001  (any failure rules the candidate out)
            times[i] = float("inf")
            log.info("nnlib tuning %s: %s failed: %s", label, params, err)
    timed = [i for i, t in enumerate(times) if t is not None and np.isfinite(t)]
    for _ in range(rounds):  # every candidate gets as many samples: a fair minimum
        for i in timed:
            times[i] = min(times[i], float(measure(candidates[i])))
    return list(zip(candidates, times))


def _short(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


BUDGET_S = 6.0  # seconds of new candidates per family and process (mostly compilation)


def source_digest(family: str) -> str | None:
    """A digest of the kernel source the timings of ``family`` hold for: ``kernels/<topic>.cl``
    (the family's first word: "dense.forward" -> dense.cl) and the shared headers; None for a
    family without a kernel file."""
    try:
        files = [sources.kernel_path(family.split(".")[0])]
    except FileNotFoundError:
        return None
    files += sorted(sources.kernel_dir().glob("*.h"))
    return hashlib.sha1(b"".join(path.read_bytes() for path in files)).hexdigest()[:12]


def tuned(rt, family: str, shape_class: str, candidates, measure, default: dict) -> dict:
    """The parameters of kernel family ``family`` for problems of ``shape_class`` on ``rt``'s
    device: ``default`` with ``NNLIB_TUNE=0``, else the fastest of ``candidates`` found by
    :func:`search`, stored for the next process. A search that ran out of its BUDGET_S
    (candidates are listed most promising first) goes on where it stopped in the next
    process that uses the family, until every candidate has been timed."""
    current = mode()
    if current == "0":
        return dict(default)
    key = f"{family}/{shape_class}"
    memo = (json.dumps(device_key(rt), sort_keys=True), key)
    if memo in _memory:
        return dict(_memory[memo])
    candidates = [dict(c) for c in candidates]
    digest = source_digest(family)
    entry = None if current == "retune" else stored(rt).get(key)
    known = None
    if entry is not None and entry.get("source") == digest:
        # the times of an earlier search on today's kernel source, if its candidates are today's
        previous = [p for p, _ in entry.get("candidates", [])]
        if previous == candidates:
            known = [float("inf") if t == "failed" else t for _, t in entry["candidates"]]
    if known is None or None in known:
        start = time.perf_counter()
        results = search(candidates, measure, f"{key} on {rt.device.name.strip()}",
                         budget_s=BUDGET_S, known=known)
        finite = [(p, t) for p, t in results if t is not None and np.isfinite(t)]
        best, best_s = min(finite, key=lambda r: r[1]) if finite else (dict(default), None)
        untried = sum(t is None for _, t in results)
        entry = {"params": best, "seconds": best_s, "untried": untried, "source": digest,
                 "candidates": [[p, "failed" if t is not None and not np.isfinite(t) else t]
                                for p, t in results],
                 "search_s": round(time.perf_counter() - start, 3),
                 "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        more = f", {untried} left for the next run" if untried else ""
        _progress(f"nnlib: tuned {key}: {_short(best)} ({len(results) - untried} "
                  f"candidates timed, {entry['search_s']:.1f} s{more})", end=True)
        _write(rt, key, entry)
    _memory[memo] = dict(entry["params"])
    return dict(entry["params"])


def time_launches(run, finish, launches: int = 5, repeat: int = 3) -> float:
    """Seconds per launch: ``run()`` enqueues once; ``finish()`` waits. The fastest of
    ``repeat`` batches of ``launches``, after one launch of warm-up (compilation): on a busy
    machine other processes only ever add time, so the minimum is the kernel's own cost."""
    run()
    finish()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(launches):
            run()
        finish()
        samples.append((time.perf_counter() - start) / launches)
    return min(samples)
