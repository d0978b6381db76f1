"""make doctor's device report: an NVIDIA driver that the ICD loader cannot see is named, with
the commands that register it."""

import ctypes.util

import pytest

from nnlib import doctor

POCL = {"platform": "Portable Computing Language", "device": "cpu", "type": "CPU",
        "compiles": True, "compute_units": 2, "max_work_group_size": 4096}


@pytest.mark.parametrize("listed, library, named", [
    ([POCL], "libnvidia-opencl.so.1", "libnvidia-opencl.so.1"),
    ([POCL, dict(POCL, platform="NVIDIA CUDA", type="GPU")], "libnvidia-opencl.so.1", None),
    ([POCL], None, None),
    ([], "libnvidia-opencl.so.1", "libnvidia-opencl.so.1"),
])
def test_an_nvidia_driver_without_its_icd_file_is_named(monkeypatch, listed, library, named):
    monkeypatch.setattr(ctypes.util, "find_library",
                        lambda name: library if name == "nvidia-opencl" else None)
    assert doctor.unregistered_nvidia(listed) == named


def test_the_report_says_how_to_register_it(monkeypatch, capsys):
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libnvidia-opencl.so.1")
    monkeypatch.setattr(doctor, "devices", lambda: [POCL])
    monkeypatch.setattr(doctor, "prefer_fastest_cpu", lambda: None)
    assert doctor.main() == 0
    out = capsys.readouterr().out
    assert "libnvidia-opencl.so.1 (NVIDIA's OpenCL driver) is installed" in out
    assert "echo libnvidia-opencl.so.1 > ~/icd/nvidia.icd && export OCL_ICD_VENDORS=~/icd" in out
