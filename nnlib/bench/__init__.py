"""Benchmarks: speed measured against numpy and PyTorch (``python -m nnlib.bench.X``).

Taught in notebooks/03_cpu_vs_gpu.
"""
