"""``python -m nnlib.doctor``: list the OpenCL devices and check that one compiles kernels.

``python -m nnlib.doctor --others`` prints, one per line, the ``PYOPENCL_CTX`` of every other
real device that compiles kernels (``make test`` runs the notebooks on each of them too).
"""

import sys

from .runtime import (DeviceNotFoundError, NoPlatformError, can_compile, devices, get_runtime,
                      is_simulator, platforms)


def other_devices() -> list[str]:
    """``"platform:device"`` indices of the real devices, besides the default, that compile."""
    default = get_runtime().device
    return [f"{pi}:{di}" for pi, p in enumerate(platforms())
            for di, d in enumerate(p.get_devices())
            if d != default and not is_simulator(d) and can_compile(d)]


def main() -> int:
    try:
        found = devices()
    except NoPlatformError as err:
        print(f"nnlib doctor: {err}")
        return 1
    for d in found:
        mark = "ok " if d["compiles"] else "NO "
        print(f"  [{mark}] {d['platform']}: {d['device']} ({d['type']}, "
              f"{d['compute_units']} compute units, max work-group {d['max_work_group_size']})")
    try:
        rt = get_runtime()
    except DeviceNotFoundError as err:
        print(f"nnlib doctor: {err}")
        return 1
    print(f"nnlib doctor: default device is {rt.device.name.strip()} "
          f"({rt.device.platform.name})")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--others"]:
        print("\n".join(other_devices()))
        sys.exit(0)
    sys.exit(main())
