"""``python -m nnlib.doctor``: list the OpenCL devices and check that one compiles kernels."""

import sys

from .runtime import DeviceNotFoundError, NoPlatformError, devices, get_runtime


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
    sys.exit(main())
