"""GFLOP/s of the complex convolution and the FFT on the device against numpy, same sizes.

    .venv/bin/python -m nnlib.bench.complex [--repeat 7] [--quick]

Times are wall-clock medians of (enqueue everything, wait for the queue) on data already on
the device, and of the numpy call on host arrays, complex64 both, the two taken in turns so
that a busy moment of a shared machine falls on both; "ratio" is numpy's time / the device's. FLOPs counted: 8 per
complex multiply-add (conv), 5 n log2 n per row (the usual FFT figure, also for lengths that
are not powers of two). Prints a table and writes build/bench/complex.json.

Used in notebooks/05_complex_and_fft.
"""

import argparse
import json
import os

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import nnlib
from nnlib import fft

from .common import OUT as BENCH_OUT, median_s, shown

OUT = BENCH_OUT / "complex.json"


def on_device(rt, fn):
    def run():
        fn()
        rt.queue.finish()
    return run


def paired_medians(device, reference, repeat):
    """Median seconds of ``device()`` and of ``reference()`` over ``repeat`` rounds, the two
    taking turns, each round's run after its own warm-up (median_s): so that neither runs while
    the other's threads are still busy. OpenBLAS's threads spin for a while after each call;
    timed in strict turns, the device's conv backward ran 1.8x slower than alone (PyPI PoCL,
    Zen 4), and with OpenBLAS's threads made to sleep at once numpy's ran 2.2x slower."""
    times = ([], [])
    for _ in range(repeat):
        for fn, out in zip((device, reference), times):
            out.append(median_s(fn, 1))
    return float(np.median(times[0])), float(np.median(times[1]))


def numpy_conv(x, w, b, step):
    """The same product with BLAS: windows (B, V, T, W) @ weights (V, W, F)."""
    win = sliding_window_view(x, w.shape[-1], axis=-1)[:, :, ::step, :]
    return np.matmul(win, np.swapaxes(w, 1, 2)) + b[None, :, None, :]


def numpy_conv_backward(x, w, gz):
    """G_x and G_w of numpy_conv (step 1, per-variable filters, tokens layout) with BLAS:
    G_w[v, f, k] = sum conj(x[b, v, t + k]) G_z[b, v, t, f] (one product per variable of the
    windows and G_z), G_x[.., t + k] += G_z[.., t, :] conj(w[v, :, k]) (one per k)."""
    window = w.shape[-1]
    win = sliding_window_view(x, window, axis=-1)  # (B, V, T, W)
    batch, variables, steps, _ = win.shape
    cols = np.conj(win).transpose(1, 3, 0, 2).reshape(variables, window, batch * steps)
    gw = np.matmul(cols, gz.transpose(1, 0, 2, 3).reshape(variables, batch * steps, -1))
    gx = np.zeros_like(x)
    wc = np.conj(w)  # (V, F, W)
    for k in range(window):
        gx[..., k:k + steps] += np.matmul(gz, wc[None, :, :, k, None])[..., 0]
    return gx, np.swapaxes(gw, 1, 2)


def bench_conv(rt, rng, repeat, batch, variables, length, window, filters):
    x = (rng.standard_normal((batch, variables, length))
         + 1j * rng.standard_normal((batch, variables, length))).astype(np.complex64)
    layer = nnlib.ComplexConv1d(window, 1, filters, variables, layout="tokens", runtime=rt)
    xd = rt.to_device(x, dtype=np.complex64)
    y = layer.forward(xd)
    w, b = layer.complex_weight().astype(np.complex64), layer.complex_bias().astype(np.complex64)
    np.testing.assert_allclose(y.get(), numpy_conv(x, w, b, 1), rtol=1e-3, atol=1e-3)
    gz = (rng.standard_normal(y.shape) + 1j * rng.standard_normal(y.shape)).astype(np.complex64)
    gy = rt.to_device(gz, dtype=np.complex64)
    gx_ref, gw_ref = numpy_conv_backward(x, w, gz)
    np.testing.assert_allclose(layer.backward(gy).get(), gx_ref, rtol=1e-3, atol=1e-2)
    gw = layer.weight.grad.get()  # the first backward: the gradient of this G_z alone
    np.testing.assert_allclose(gw[..., 0] + 1j * gw[..., 1], gw_ref, rtol=1e-3,
                               atol=1e-3 * np.abs(gw_ref).max())
    flops = 8.0 * batch * variables * filters * y.shape[2] * window
    size = f"B{batch} V{variables} L{length} W{window} F{filters}"
    fwd, ref = paired_medians(on_device(rt, lambda: layer.forward(xd)),
                              lambda: numpy_conv(x, w, b, 1), repeat)
    bwd, ref_bwd = paired_medians(on_device(rt, lambda: layer.backward(gy)),
                                  lambda: numpy_conv_backward(x, w, gz), repeat)
    return [("complex conv forward", size, flops, fwd, ref),
            ("complex conv backward (input + weight)", size, 2 * flops, bwd, ref_bwd)]


def bench_fft(rt, rng, repeat, rows, n):
    x = (rng.standard_normal((rows, n)) + 1j * rng.standard_normal((rows, n))).astype(
        np.complex64)
    xd = rt.to_device(x, dtype=np.complex64)
    np.testing.assert_allclose(fft.fft(xd, runtime=rt).get(), np.fft.fft(x), rtol=0,
                               atol=1e-4 * np.abs(np.fft.fft(x)).max())
    flops = 5.0 * rows * n * np.log2(n)
    dev, ref = paired_medians(on_device(rt, lambda: fft.fft(xd, runtime=rt)),
                              lambda: np.fft.fft(x), repeat)
    return [(f"fft ({fft.plan(rt, n).kind})", f"{rows} rows x n={n}", flops, dev, ref)]


def main(argv=None) -> list:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    args = parser.parse_args(argv)
    rt = nnlib.get_runtime()
    rng = np.random.default_rng(0)
    scale = 8 if args.quick else 1
    rows = []
    rows += bench_conv(rt, rng, args.repeat, 32 // scale, 8, 1024, 16, 16)
    for n in (1024, 1000, 24, 96):
        rows += bench_fft(rt, rng, args.repeat, 4096 // scale, n)
    print(f"device: {rt}; numpy {np.__version__}, OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"{'operation':40s} {'size':28s} {'device ms':>10s} {'GFLOP/s':>8s} "
          f"{'numpy ms':>9s} {'GFLOP/s':>8s} {'ratio':>6s}")
    results = []
    for name, size, flops, dev, ref in rows:
        ref_txt = (f"{ref * 1e3:9.2f} {flops / ref * 1e-9:8.2f} {ref / dev:6.2f}" if ref
                   else f"{'-':>9s} {'-':>8s} {'-':>6s}")
        print(f"{name:40s} {size:28s} {dev * 1e3:10.2f} {flops / dev * 1e-9:8.2f} {ref_txt}")
        results.append({"operation": name, "size": size, "flops": flops, "device_s": dev,
                        "device_gflops": flops / dev * 1e-9, "numpy_s": ref,
                        "numpy_gflops": flops / ref * 1e-9 if ref else None})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"device": repr(rt), "numpy": np.__version__,
                               "results": results}, indent=1))
    print(f"wrote {shown(OUT)}")
    return results


if __name__ == "__main__":
    main()
