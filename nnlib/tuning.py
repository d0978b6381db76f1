"""Autotuning: kernel parameters chosen per device by a short measured search, cached on disk.

The fastest tile size, vector width or work-group size of a kernel depends on the device and
on its compiler (the same source can be faster than numpy on one CPU and far slower on
another).
So kernel families ask :func:`tuned` for their parameters: on first use on a device it times
each candidate on a representative problem, keeps the fastest, and stores the result in a
JSON file per device (below: what identifies one), as CLBlast's tuned-parameter database
does (there: compiled in, per device; here: measured on the reader's machine, as tinygrad's
BEAM search does).

Where results live: ``$XDG_CACHE_HOME/nnlib/tuning/`` (default ``~/.cache/nnlib/tuning/``),
or ``$NNLIB_TUNING_DIR``; one file per device key (platform name and version, device name,
driver version, number of compute units and the runtime's profile, from ``NNLIB_PROFILE`` or
``Runtime(profile=...)``). A result holds for the kernel source it was measured on: when
``kernels/<topic>.cl`` or a shared header changes, the family searches again.

``NNLIB_TUNE`` (or :func:`set_mode`) controls it:
  ``1`` (default)  search on first use, then read the cache;
  ``0``            no search and no cache: every family uses its default parameters;
  ``retune``       search again on first use in this process and overwrite the cache.
:func:`clear` deletes a device's stored results (the next use searches again).

A search costs mostly compilation (PoCL: 1-3 s per candidate kernel on first use, then its
own disk cache), so each family spends at most ``BUDGET_S`` seconds per process on new
candidates, the most promising first, and the next process goes on where it stopped; within
:func:`complete_searches` (the benchmarks of ``nnlib.bench.all``) every search runs to its end.
Tests and the nbval check run with ``NNLIB_TUNE=0`` (tests/conftest.py, ``make notebooks``):
the same kernels on every run, and no writes to the user's cache; the unit tests run every
candidate explicitly instead.

Taught in notebooks/03_cpu_vs_gpu.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

try:
    import fcntl
except ImportError:  # Windows: writers are not serialised
    fcntl = None

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


# Intel's CPU runtime compiles for the ISA this variable names (nnlib.bench.emulate)
TARGET_VARIABLE = "CL_CONFIG_CPU_TARGET_ARCH"


def target_options(target: str | None = os.environ.get(TARGET_VARIABLE)) -> tuple:
    """A define that names the ISA Intel's runtime was told to compile for (``target``,
    by default TARGET_VARIABLE as this process started: the runtime reads it once, when it
    loads; nnlib.bench.emulate sets it), none without one: pyopencl's binary cache keys a
    program by its source and options, not by that variable, and a binary cached for
    another ISA fails to load (clCreateProgramWithBinary: INVALID_BINARY)."""
    return (f"-DNNLIB_CPU_TARGET_{re.sub(r'[^A-Za-z0-9]', '_', target)}",) if target else ()


def device_key(rt) -> dict:
    """What identifies a device's results: another driver, profile, work-group cap, compile
    target (TARGET_VARIABLE) or number of compute units (PoCL with POCL_MAX_PTHREAD_COUNT,
    a CPU's threads in a container) means another search."""
    d = rt.device
    cap = getattr(rt, "cap", None)
    # the runtime's profile ("" for the device's own limits), which Runtime(profile=...) may
    # set apart from NNLIB_PROFILE: its candidates, and so its results, are the profile's
    profile = getattr(rt, "profile", None)
    if profile is None:  # not a Runtime: the environment's
        profile = os.environ.get("NNLIB_PROFILE", "")
    return {"platform": d.platform.name.strip(), "platform_version": d.platform.version.strip(),
            "device": d.name.strip(), "driver": d.driver_version.strip(),
            "compute_units": d.max_compute_units,
            "profile": "" if profile == "device" else profile,
            **({"max_work_group": cap} if cap is not None else {}),
            **({"target": target} if (target := os.environ.get(TARGET_VARIABLE)) else {})}


def cache_file(rt) -> Path:
    key = device_key(rt)
    digest = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9]+", "-", key["device"]).strip("-")[:40]
    return cache_dir() / f"{slug}-{digest}.json"


MAX_FILE_BYTES = 4 << 20  # a tuning file larger than this is not nnlib's: ignored


def _drop(path: Path, why: str) -> None:
    """The one-line warning for stored data that is not used."""
    log.warning("nnlib tuning: ignoring %s in %s (the defaults or a new search are used)",
                why, path)


def _read_json(path: Path) -> dict:
    """The JSON object in ``path``; {} when the file is missing, or (with a warning naming it)
    unreadable, too large, not JSON, nested too deeply or not an object."""
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as err:
        _drop(path, f"an unreadable file ({err.strerror or err})")
        return {}
    if len(text) > MAX_FILE_BYTES:
        _drop(path, f"a file larger than {MAX_FILE_BYTES >> 20} MiB")
        return {}
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        _drop(path, f"a damaged file ({type(err).__name__})")
        return {}
    if not isinstance(data, dict):
        _drop(path, f"a file holding a JSON {type(data).__name__}, not an object")
        return {}
    return data


def _read(path: Path) -> dict:
    data = _read_json(path)
    if data and not isinstance(data.get("results"), dict):
        _drop(path, "a file without a results object")
        return {}
    return data


@contextlib.contextmanager
def _locked(folder: Path):
    """Hold the folder's lock file (``.lock``, fcntl.flock) while a writer reads, merges and
    replaces a file: two processes storing results at once both keep theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _remove_stale_temporaries(folder: Path) -> None:
    """Temporary files in the folder are those of writers killed mid-write: every writer
    holds the lock until its temporary is renamed or removed."""
    for tmp in folder.glob("*.tmp"):
        with contextlib.suppress(OSError):
            tmp.unlink()


def _why_not_written(err: OSError) -> str:
    if err.errno == errno.ENOSPC:
        return "the disk is full"
    if err.errno == errno.EFBIG:
        return "a file-size limit was reached (`ulimit -f`), or the disk is full"
    return str(err)


def _update(path: Path, change) -> None:
    """Under the folder's lock: read ``path``'s object, ``change(data)`` it in place, write it
    to a temporary file and rename that over ``path`` (readers never see half a file). A
    folder that cannot be written (read-only, full) keeps the results in this process only,
    with a warning saying why."""
    tmp = None
    try:
        with _locked(path.parent):
            _remove_stale_temporaries(path.parent)
            data = _read_json(path)
            change(data)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, path)
            tmp = None
    except OSError as err:
        log.warning("nnlib tuning: cannot store results in %s: %s", path, _why_not_written(err))
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def _write(rt, entry_key: str, entry: dict) -> None:
    """Add one result to the device's file, merged with what other processes stored."""
    def change(data):
        if not isinstance(data.get("results"), dict):
            data.clear()
            data.update(device=device_key(rt), results={})
        data["results"][entry_key] = entry
    _update(cache_file(rt), change)


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
    path = cache_dir() / "preferred_device.json"
    data = _read_json(path)
    if not data:
        return None
    if not all(isinstance(data.get(k), str) for k in ("platform", "device")):
        _drop(path, "a preferred device without platform and device names")
        return None
    return data


def set_preferred_device(platform_version: str, device: str, figures: dict,
                         pocl_affinity: str | None = None) -> None:
    """Store the device the runtime should pick by default (``figures``: what decided), and
    with ``pocl_affinity`` ("1" or "0") whether PoCL's fastest run had its threads pinned
    (nnlib.environment sets POCL_AFFINITY=1 from it where the variable is unset)."""
    def change(data):
        data.clear()
        data.update(platform=platform_version, device=device, measured=figures)
        if pocl_affinity is not None:
            data.update(pocl_affinity=pocl_affinity)
    _update(cache_dir() / "preferred_device.json", change)


def widest_vectors(allowed: tuple, name: str = "vector_widths") -> dict:
    """{device id: widest float vector its compiler emits natively}, as
    :func:`nnlib.opencl_devices.widest_vector` measured them (with ``name``
    "vector_lanes": the work-items of one vector instruction, as
    :func:`nnlib.opencl_devices.vector_lanes` found them); any other value (not one of
    ``allowed``) is dropped with a warning."""
    path = cache_dir() / f"{name}.json"
    out = {}
    for key, width in _read_json(path).items():
        if type(width) is int and width in allowed:
            out[key] = width
        else:
            _drop(path, f"the vector width {width!r} of {key!r} (one of {allowed} is allowed)")
    return out


def set_widest_vector(device_id: str, width: int, name: str = "vector_widths") -> None:
    _update(cache_dir() / f"{name}.json", lambda data: data.update({device_id: width}))


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
    are compiled by then, so the later rounds are cheap). Once every candidate has been
    timed, the few fastest are timed again side by side (:func:`_confirm`).

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
    if None not in times:
        _confirm(candidates, times, measure, label)
    return list(zip(candidates, times))


# The way :func:`search` measures, stored with its results: results of an earlier way (2:
# the confirming rounds of :func:`_confirm` were added) are searched again.
SEARCH_VERSION = 2
CONFIRM_WITHIN = 1.25  # contenders: at most this factor slower than the fastest
CONFIRM_AT_MOST = 3  # contenders confirmed, the fastest first
CONFIRM_ROUNDS = 4  # more samples each, taking turns, in alternating order


def _confirm(candidates: list, times: list, measure, label: str) -> None:
    """A finished search's last word: the fastest candidates (CONFIRM_AT_MOST, each within
    CONFIRM_WITHIN of the fastest) are timed CONFIRM_ROUNDS times more, taking turns, and
    keep their fastest time. On a virtual machine whose neighbours come and go, a few
    milliseconds of quiet can fall on one candidate's samples and not on its rival's; more
    samples side by side let the faster kernel show its own minimum. Changes ``times`` in
    place."""
    ranked = sorted((i for i, t in enumerate(times) if np.isfinite(t)), key=times.__getitem__)
    contenders = [i for i in ranked[:CONFIRM_AT_MOST]
                  if times[i] <= CONFIRM_WITHIN * times[ranked[0]]]
    if len(contenders) < 2:
        return
    _progress(f"nnlib: tuning {label}: confirming the fastest {len(contenders)}")
    for turn in range(CONFIRM_ROUNDS):
        for i in contenders if turn % 2 == 0 else contenders[::-1]:
            times[i] = min(times[i], float(measure(candidates[i])))


def _short(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items())


BUDGET_S = 6.0  # seconds of new candidates per family and process (mostly compilation)
_complete = False  # within complete_searches(): no BUDGET_S


@contextlib.contextmanager
def complete_searches():
    """Within this block every search :func:`tuned` starts or goes on with runs to its last
    candidate, whatever BUDGET_S: a benchmark then times the kernels the search ends on, not
    those of its first seconds (on a device's first run the searches take a few minutes
    longer)."""
    global _complete
    before, _complete = _complete, True
    try:
        yield
    finally:
        _complete = before


def source_digest(family: str) -> str | None:
    """A digest of the kernel source the timings of ``family`` hold for: the program of
    ``kernels/<topic>.cl`` (the family's first word: "dense.forward" -> dense.cl) with the
    files it requires and the headers it includes (activation.cl's tanh is part of dense's
    kernels); None for a family without a kernel file."""
    try:
        text = sources.program_source(family.split(".")[0])
    except FileNotFoundError:
        return None
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def tuned(rt, family: str, shape_class: str, candidates, measure, default: dict,
          problem=None) -> dict:
    """The parameters of kernel family ``family`` for problems of ``shape_class`` on ``rt``'s
    device: ``default`` with ``NNLIB_TUNE=0``, else the fastest of ``candidates`` found by
    :func:`search`, stored for the next process. A search that ran out of its BUDGET_S
    (candidates are listed most promising first) goes on where it stopped in the next
    process that uses the family, until every candidate has been timed. ``problem`` (a
    JSON value) names what ``measure`` times; stored times of another problem are not
    kept."""
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
    known = None if entry is None else _stored_times(entry, candidates, default, digest,
                                                     f"{key} in {cache_file(rt)}", problem)
    if known is None or None in known:
        rt.not_a_launch()  # the search waits for the device: no step recorded around it
        start = time.perf_counter()
        results = search(candidates, measure, f"{key} on {rt.device.name.strip()}",
                         budget_s=None if _complete else BUDGET_S,
                         known=known)
        best = _best(candidates, [t for _, t in results], default)
        best_s = next((t for p, t in results if p == best and t is not None
                       and np.isfinite(t)), None)
        untried = sum(t is None for _, t in results)
        entry = {"params": best, "seconds": best_s, "untried": untried, "source": digest,
                 "problem": problem, "search": SEARCH_VERSION,
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


def _valid_time(t) -> bool:
    """A stored time: seconds (finite, >= 0), "failed" or None (not tried yet)."""
    if t is None or t == "failed":
        return True
    return type(t) in (int, float) and math.isfinite(t) and t >= 0


def _best(candidates: list, times: list, default: dict) -> dict:
    """What :func:`tuned` keeps: the first fastest candidate that ran, else ``default``."""
    ran = [(p, t) for p, t in zip(candidates, times) if t is not None and np.isfinite(t)]
    return min(ran, key=lambda r: r[1])[0] if ran else dict(default)


def _stored_times(entry, candidates: list, default: dict, digest, where: str,
                  problem=None):
    """The times of a stored search to go on from, or None to search again. The stored
    entry is data, never trusted: it counts only if it was measured on today's kernel source
    (``digest``) and ``problem``, by today's search (SEARCH_VERSION), over exactly today's
    ``candidates`` (the family's candidate space on this device, each one a kernel the tests
    check against its reference), every time is valid and its parameters are the ones its
    times choose. Anything else is dropped with a warning naming the file (``where``) and the
    family is searched again."""
    if not isinstance(entry, dict):
        _drop(where, f"a result that is a JSON {type(entry).__name__}")
        return None
    stored_list = entry.get("candidates")
    if not isinstance(stored_list, list) or not all(
            isinstance(c, list) and len(c) == 2 and isinstance(c[0], dict)
            and _valid_time(c[1]) for c in stored_list):
        _drop(where, "a result whose candidates are not [parameters, seconds] pairs")
        return None
    params = entry.get("params")
    if params not in candidates and params != default:
        _drop(where, f"the parameters {params!r}, which are not among this family's "
                     f"{len(candidates)} candidates on this device")
        return None
    if entry.get("source") != digest or entry.get("problem") != problem \
            or entry.get("search") != SEARCH_VERSION \
            or [c[0] for c in stored_list] != candidates:
        return None  # another kernel source, problem, way of searching or candidate list
    times = [float("inf") if t == "failed" else t for _, t in stored_list]
    if params != _best(candidates, times, default):
        _drop(where, f"the parameters {params!r}, which are not the fastest its times name")
        return None
    return times


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
