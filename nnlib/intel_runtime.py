"""Intel's CPU runtime for OpenCL, from PyPI, in the project's virtual environment:
``python -m nnlib.doctor --install-intel`` adds it, ``--remove-intel`` takes it away.

pip puts the runtime's libraries in ``<venv>/lib`` (``libintelocl.so`` finds the others
there through its RUNPATH) and an ICD file whose library path is a placeholder (conda
rewrites it at install time; pip does not). The ICD loader in pyopencl's wheel (ocl-icd)
reads, besides /etc/OpenCL/vendors, the ``.icd`` files in ``pyopencl/.libs``, the folder
pyopencl names to it (``PYOPENCL_HOME``) when imported, where PoCL's wheel keeps
``pocl.icd``. An ``intel-cpu.icd`` written there with the library's absolute path makes the
runtime a platform in every process of the venv that imports pyopencl (Jupyter kernels,
pytest, nbval), with nothing to export and no file outside the venv. (``OCL_ICD_VENDORS``
would work too, but it replaces /etc/OpenCL/vendors, hiding a system PoCL.)

Taught in notebooks/03_cpu_vs_gpu (three compilers on one CPU).
"""

from __future__ import annotations

import platform
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

PACKAGES = ("intel-opencl-rt", "intel-cmplr-lib-rt")
ICD_NAME = "intel-cpu.icd"


class IntelRuntimeError(RuntimeError):
    """Intel's runtime cannot be installed or removed here; the message says why."""


def library() -> Path:
    """Where pip puts the runtime's ICD library in this environment."""
    return Path(sysconfig.get_paths()["data"]) / "lib" / "libintelocl.so"


def loader_dir() -> Path | None:
    """The folder of ``.icd`` files that this environment's pyopencl loader reads besides the
    system's, or None where pyopencl uses the system's loader (not PyPI's wheel)."""
    import pyopencl

    libs = Path(pyopencl.__file__).parent / ".libs"
    return libs if any(libs.glob("libOpenCL*.so*")) else None


def icd_file() -> Path | None:
    """The ICD file that makes the runtime visible here, None where pyopencl has no loader
    folder of its own."""
    folder = loader_dir()
    return None if folder is None else folder / ICD_NAME


def installed() -> bool:
    icd = icd_file()
    return library().exists() and icd is not None and icd.exists()


def write_icd(folder: Path, lib: Path) -> Path:
    """Write the ICD file naming ``lib`` by its absolute path into ``folder``."""
    path = folder / ICD_NAME
    path.write_text(f"{lib.resolve()}\n")
    return path


def _check_environment() -> Path:
    if sys.prefix == sys.base_prefix:
        raise IntelRuntimeError(
            f"{sys.executable} is not in a virtual environment: nnlib installs Intel's runtime "
            "only into one (`make doctor INTEL=1` uses the project's .venv)")
    if sys.platform != "linux" or platform.machine() != "x86_64":
        raise IntelRuntimeError(
            f"Intel's CPU runtime comes from PyPI for Linux on x86-64 only, not for "
            f"{sys.platform} on {platform.machine()}")
    folder = loader_dir()
    if folder is None:
        raise IntelRuntimeError(
            "this pyopencl uses the system's ICD loader (not the one in PyPI's pyopencl wheel), "
            "whose folder of .icd files is outside the venv: install Intel's runtime as your "
            "system documents it, or `pip install pyopencl` from PyPI")
    return folder


def unavailable() -> str | None:
    """Why the runtime cannot be installed here (None: it can)."""
    try:
        _check_environment()
    except IntelRuntimeError as err:
        return str(err)
    return None


def _pip(*args: str) -> None:
    if subprocess.run([sys.executable, "-m", "pip", *args], check=False).returncode:
        raise IntelRuntimeError(f"`pip {' '.join(args)}` failed (its message is above)")


def install() -> Path:
    """pip-install the runtime into this environment and write its ICD file; returns it."""
    folder = _check_environment()
    _pip("install", *PACKAGES)
    if not library().exists():
        raise IntelRuntimeError(f"pip installed {', '.join(PACKAGES)} but {library()} is "
                                "missing")
    return write_icd(folder, library())


def _name(requirement: str) -> str:
    """The normalised distribution name of a requirement ("tbb (==2023.*)" -> "tbb")."""
    match = re.match(r"\s*([A-Za-z0-9._-]+)", requirement)
    return re.sub(r"[-_.]+", "-", match.group(1)).lower() if match else ""


def removable(requires: dict[str, set[str]]) -> list[str]:
    """The runtime's packages, with each of their dependencies (and theirs) that no other
    installed distribution needs. ``requires``: {installed name: names it requires}."""
    chosen = {p for p in PACKAGES if p in requires}
    grown = True
    while grown:
        needed = {r for name in chosen for r in requires[name]} & set(requires)
        free = {d for d in needed - chosen
                if not any(d in reqs for other, reqs in requires.items() if other not in chosen)}
        grown = bool(free)
        chosen |= free
    return sorted(chosen)


def _installed_requirements() -> dict[str, set[str]]:
    """{installed distribution: the distributions it requires (not those of its extras)}."""
    return {_name(d.metadata["Name"]): {_name(r) for r in d.requires or []
                                        if "extra" not in r.partition(";")[2]}
            for d in metadata.distributions() if d.metadata["Name"]}


def remove() -> list[str]:
    """Delete the ICD file and pip-uninstall the runtime and the dependencies only it needed;
    returns the packages uninstalled."""
    icd = icd_file()
    if icd is not None:
        icd.unlink(missing_ok=True)
    packages = removable(_installed_requirements())
    if packages:
        _pip("uninstall", "-y", *packages)
    return packages
