"""Adding and removing Intel's CPU runtime for OpenCL (nnlib/intel_runtime.py), without pip:
what is uninstalled, the ICD file, and the device it gives where it is installed."""

import sys

import pytest

import nnlib
from nnlib import doctor, intel_runtime

RUNTIME = {"intel-opencl-rt": {"tbb", "intel-cmplr-lic-rt"}, "intel-cmplr-lib-rt": set(),
           "intel-cmplr-lic-rt": set(), "tbb": {"tcmlib"}, "tcmlib": set(),
           "numpy": set()}


def test_removal_takes_the_dependencies_only_the_runtime_needs():
    assert intel_runtime.removable(RUNTIME) == [
        "intel-cmplr-lib-rt", "intel-cmplr-lic-rt", "intel-opencl-rt", "tbb", "tcmlib"]
    # another package needs TBB: it stays, and with it what it needs
    assert intel_runtime.removable({**RUNTIME, "numba": {"numpy", "tbb"}}) == [
        "intel-cmplr-lib-rt", "intel-cmplr-lic-rt", "intel-opencl-rt"]
    assert intel_runtime.removable({"numpy": set()}) == []


def test_requirement_names_are_normalised():
    assert intel_runtime._name("tbb (==2023.*)") == "tbb"
    assert intel_runtime._name("Intel_CMPLR.lic-rt==2026.*") == "intel-cmplr-lic-rt"


def test_the_icd_file_names_the_library_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lib").mkdir()
    path = intel_runtime.write_icd(tmp_path, intel_runtime.Path("lib/libintelocl.so"))
    assert path == tmp_path / intel_runtime.ICD_NAME
    assert path.read_text() == f"{tmp_path / 'lib' / 'libintelocl.so'}\n"


def test_install_outside_a_virtual_environment_is_refused(monkeypatch):
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)
    with pytest.raises(intel_runtime.IntelRuntimeError, match="virtual environment"):
        intel_runtime.install()


@pytest.mark.skipif(not intel_runtime.installed(), reason="Intel's CPU runtime is not installed "
                    "in this venv (python -m nnlib.doctor --install-intel)")
def test_an_installed_runtime_is_a_device_that_compiles():
    found = [d for d in nnlib.devices() if d["platform"].startswith("Intel(R) OpenCL")]
    assert found and all(d["compiles"] and d["type"] == "CPU" for d in found)


def test_offer_outside_a_virtual_environment_says_why_and_installs_nothing(monkeypatch, capsys):
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)
    monkeypatch.setattr(intel_runtime, "installed", lambda: False)
    monkeypatch.setattr(intel_runtime, "install", lambda: pytest.fail("installed anyway"))
    monkeypatch.setattr(doctor, "main", lambda: 0)
    assert doctor.cli(["--offer-intel"]) == 0
    assert "not installing Intel's CPU runtime: " in capsys.readouterr().out


def test_doctor_prefers_the_device_fastest_over_every_workload():
    figures = {"dense": {"a": 1.0, "b": 1.2, "c": 4.0},
               "steps": {"a": 3.0, "b": 2.0, "c": 2.0}}
    score = doctor.relative_times(figures)
    assert min(score, key=score.get) == "b"  # fastest at neither, closest at both
    assert score["a"] == pytest.approx(1.5 ** 0.5) and score["c"] == pytest.approx(2.0)
