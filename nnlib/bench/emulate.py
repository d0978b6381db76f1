"""Run a benchmark as an AVX2 CPU runs it, on a CPU with AVX-512.

    python -m nnlib.bench.emulate avx2 all --store     # PYOPENCL_CTX: Intel's CPU runtime
    python -m nnlib.bench.emulate avx2 dense --widths 1024 --batches 64

Many readers' CPUs have AVX2 and no AVX-512 (AMD Zen 2 and 3, most laptops), and a kernel
tile that suits AVX-512's 32 vector registers spills from AVX2's 16. Each library can be
told to run its AVX2 code: Intel's CPU runtime compiles for the target that
``CL_CONFIG_CPU_TARGET_ARCH`` names, numpy's OpenBLAS picks its kernels by
``OPENBLAS_CORETYPE``, PyTorch by ``ATEN_CPU_CAPABILITY`` (and oneDNN's and MKL's own
variables). PoCL has no such switch that works here: its ``POCL_LLVM_CPU_NAME`` is ignored by
Debian's PoCL 3.1 and makes PyPI's PoCL 3.0 abort. So the device must be Intel's CPU runtime
(``make doctor INTEL=auto`` installs it into the venv), or one that compiles the ISA's code
already: PyPI's PoCL 3.0 on Zen 4 and 5, whose LLVM 14 knows no CPU after Zen 3 and emits AVX2
code (its widest native vector is 8 floats); for such a device only the host libraries are
told.

What the emulation keeps and what it does not: AMD's Zen 4 runs an AVX-512 instruction as two
256-bit halves, so there AVX2 code has the same arithmetic peak as AVX-512 code, as on Zen 3:
what changes is the registers and the instructions. The caches stay the host's (Zen 3 has
half of Zen 4's L2). The benchmark runs in a child process with these variables set; its
tuning results are stored apart (``nnlib.tuning.device_key`` holds the target), and so are
pyopencl's cached binaries (every build of nnlib's carries the target as a define:
``nnlib.tuning.target_options``). ``nnlib.bench.all`` then labels its figures "AVX2
(emulated)" and stores them in a file of their own.
"""

import argparse
import os
import subprocess
import sys

from nnlib.tuning import TARGET_VARIABLE

# The variables that make each library run the ISA's code; NNLIB_EMULATED_ISA labels figures.
ISAS = {
    "avx2": {TARGET_VARIABLE: "core-avx2", "OPENBLAS_CORETYPE": "Haswell",
             "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "NNLIB_EMULATED_ISA": "AVX2"},
}
# What tells Intel's runtime, left out for a device that compiles the ISA's code already.
OPENCL_TARGET = (TARGET_VARIABLE,)
# Each ISA's widest float vector: a CPU device whose compiler emits no wider compiles its code.
WIDEST = {"avx2": 8}


def emulated_isa() -> str | None:
    """The ISA this process emulates (``ISAS``' label), None when it runs the host's."""
    return os.environ.get("NNLIB_EMULATED_ISA") or None


def is_intel_cpu(device) -> bool:
    import pyopencl as cl

    return "Intel" in device.platform.name and bool(device.type & cl.device_type.CPU)


def child_env(isa: str, device, widest: int) -> dict:
    """The variables a benchmark of ``isa`` runs with on ``device`` (whose compiler emits at
    most ``widest`` floats a vector): all of ISAS' for Intel's CPU runtime, the host libraries'
    for a CPU device that compiles the ISA's code already; ValueError for any other device."""
    import pyopencl as cl

    if is_intel_cpu(device):
        return dict(ISAS[isa])
    if device.type & cl.device_type.CPU and widest <= WIDEST[isa]:
        return {k: v for k, v in ISAS[isa].items() if k not in OPENCL_TARGET}
    raise ValueError(
        f"the emulation needs Intel's CPU runtime, or a CPU device that compiles {isa} code "
        f"already, not {device.platform.name.strip()}: {device.name.strip()} (its widest "
        f"vector: {widest} floats); install Intel's with `make doctor INTEL=auto` and choose "
        "it with PYOPENCL_CTX (python -m nnlib.doctor lists the devices)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("isa", choices=sorted(ISAS))
    parser.add_argument("module", help="a benchmark of nnlib.bench: all, dense, train_step, ...")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's arguments")
    args = parser.parse_args(argv)
    from nnlib.opencl_devices import find_device, widest_vector
    try:
        device = find_device()
        env = child_env(args.isa, device, 1 if is_intel_cpu(device) else widest_vector(device))
    except (ValueError, LookupError) as err:
        parser.error(str(err))
    print(f"emulating {args.isa}: " + " ".join(f"{k}={v}" for k, v in env.items()), flush=True)
    child = subprocess.run([sys.executable, "-m", f"nnlib.bench.{args.module}", *args.args],
                           env=dict(os.environ, **env), check=False)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
