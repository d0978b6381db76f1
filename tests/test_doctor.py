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


class FakeDevice:
    """What prefer_fastest_cpu reads of a pyopencl.Device."""
    def __init__(self, name, platform):
        self.name = name
        self.platform = type("Platform", (), {"version": platform, "name": platform})


@pytest.mark.parametrize("other_s, pinned_s, want_device, want", [
    (2.0, 0.5, "pthread-x", "1"), (2.0, 3.0, "pthread-x", "0"),
    (0.2, 0.5, "cpu-y", "1"),  # another runtime wins: PoCL's pin still stored, for PYOPENCL_CTX
    (0.2, 3.0, "cpu-y", "0")])
def test_pocl_is_also_measured_pinned_and_the_choice_stored(monkeypatch, tuning_cache,
                                                            other_s, pinned_s, want_device,
                                                            want):
    """Each device is timed in a process of its own (faked here); where the reader left
    POCL_AFFINITY unset, PoCL's also pinned; the fastest device is stored, with whether
    PoCL's fastest run was pinned."""
    from nnlib import environment, tuning
    pocl = FakeDevice("pthread-x", "Portable Computing Language")
    other = FakeDevice("cpu-y", "Other OpenCL")
    seconds = {("0:0", "0"): 1.0, ("0:0", "1"): pinned_s, ("1:0", "0"): other_s}
    calls = []

    def measure_apart(spec, pin):
        calls.append((spec, pin))
        return {work: seconds[spec, pin or "0"] for work in doctor.WORKLOADS}
    monkeypatch.setattr(doctor, "cpu_devices", lambda: [("0:0", pocl), ("1:0", other)])
    monkeypatch.setattr(doctor, "measure_apart", measure_apart)
    monkeypatch.setattr(environment, "can_pin", lambda: True)
    monkeypatch.setattr(environment, "reader_set_pin", lambda: False)
    doctor.prefer_fastest_cpu()
    assert sorted(calls) == sorted([*seconds] * doctor.ROUNDS)  # the other one never pinned
    stored = tuning.preferred_device()
    assert (stored["device"], stored["pocl_affinity"]) == (want_device, want)
    work = next(iter(doctor.WORKLOADS))
    assert stored["measured"][work]["pthread-x (Portable Computing Language)" + doctor.PINNED] \
        == pinned_s * 1e3
    monkeypatch.setattr(environment, "reader_set_pin", lambda: True)  # POCL_AFFINITY set
    calls.clear()
    doctor.prefer_fastest_cpu()
    assert sorted(calls) == sorted([("0:0", None), ("1:0", None)] * doctor.ROUNDS)
    assert "pocl_affinity" not in tuning.preferred_device()


def test_one_slow_turn_does_not_decide_and_a_failing_device_is_left_out(monkeypatch,
                                                                        tuning_cache):
    """Each device's fastest turn counts: the device that is faster in every turn but one
    (another program's burst) is the default; a device whose child fails is asked once."""
    from nnlib import environment, tuning
    devices = [(f"{i}:0", FakeDevice(f"cpu-{i}", "Other OpenCL")) for i in range(3)]
    calls = []

    def measure_apart(spec, pin):
        calls.append(spec)
        if spec == "2:0":
            return None
        slow = spec == "0:0" and calls.count(spec) == 1
        return {work: (5.0 if slow else 0.8) if spec == "0:0" else 1.0
                for work in doctor.WORKLOADS}
    monkeypatch.setattr(doctor, "cpu_devices", lambda: devices)
    monkeypatch.setattr(doctor, "measure_apart", measure_apart)
    monkeypatch.setattr(environment, "reader_set_pin", lambda: True)
    doctor.prefer_fastest_cpu()
    assert tuning.preferred_device()["device"] == "cpu-0"
    assert calls.count("2:0") == 1 and calls.count("0:0") == doctor.ROUNDS
    assert set(tuning.preferred_device()["measured"][next(iter(doctor.WORKLOADS))]) == {
        "cpu-0 (Other OpenCL)", "cpu-1 (Other OpenCL)"}
