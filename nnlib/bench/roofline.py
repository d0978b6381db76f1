"""The machine's roofs, measured: memory bandwidth and the best matrix-product rate; and
the roofs of a few named GPUs from their published figures (a model, not a measurement).

    .venv/bin/python -m nnlib.bench.roofline

Used in notebooks/03_cpu_vs_gpu.
"""

import numpy as np
from threadpoolctl import threadpool_limits

from .common import median_s


def machine_limits(repeat: int = 5, mib: int = 64, n: int = 1024) -> dict:
    """GB/s of a numpy copy (bytes read + written) and GFLOP/s of numpy's sgemm (n^3) with 1
    and 2 BLAS threads: the memory and compute roofs of a roofline plot."""
    src = np.ones(mib * 2**18, np.float32)
    dst = np.empty_like(src)
    limits = {"copy_GBps": 2 * src.nbytes / median_s(lambda: np.copyto(dst, src), repeat) / 1e9}
    a = np.ones((n, n), np.float32)
    for threads in (1, 2):
        with threadpool_limits(threads):
            limits[f"sgemm_{threads}thr_GFLOPs"] = 2 * n**3 / median_s(lambda: a @ a, repeat) / 1e9
    return limits


# Published peak float32 GFLOP/s (without sparsity or tensor cores) and memory GB/s, from
# the vendors' datasheets: what a kernel could reach at best on each GPU, never measured here.
GPUS = {
    "NVIDIA T4": (8_100, 320, "NVIDIA T4 Tensor Core GPU datasheet (2019)"),
    "NVIDIA A100 SXM 80 GB": (19_500, 2_039, "NVIDIA A100 Tensor Core GPU datasheet (2021)"),
    "NVIDIA H100 SXM": (67_000, 3_350, "NVIDIA H100 Tensor Core GPU datasheet (2023)"),
    "NVIDIA GeForce RTX 4090": (82_600, 1_008,
                                "NVIDIA Ada GPU architecture whitepaper (2022), table 1"),
    "AMD Radeon RX 7900 XTX": (61_400, 960, "AMD product specifications page (2022)"),
}


def roof(intensity, peak_gflops: float, bandwidth_gbps: float):
    """The roofline: GFLOP/s a kernel of ``intensity`` FLOP/byte reaches at best."""
    return np.minimum(peak_gflops, np.asarray(intensity) * bandwidth_gbps)


def dense_intensity(n_in: int, n_out: int, batch: int) -> float:
    """FLOP per byte of a dense layer's forward pass if every operand moves once (float32)."""
    return 2 * batch * n_in * n_out / (4 * (n_in * n_out + batch * (n_in + n_out)))


if __name__ == "__main__":
    for key, value in machine_limits().items():
        print(f"{key:22s} {value:8.1f}")
