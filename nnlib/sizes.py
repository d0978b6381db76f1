"""Integer size arithmetic shared by every launch: grids of blocks, padded sizes, and the
FFT lengths the kernels transform in stages (smooth lengths and their radices).

Taught in notebooks/00_devices.
"""


def ceil_div(n: int, d: int) -> int:
    """How many blocks of ``d`` cover ``n`` (the grid size of a blocked kernel)."""
    return -(-n // d)


def round_up(n: int, multiple: int) -> int:
    """``n`` padded up to a multiple of ``multiple`` (a global size to its work-group's)."""
    return ceil_div(n, multiple) * multiple


def is_smooth(n: int) -> bool:
    """Whether n >= 2 has no prime factor but 2, 3 and 5 (the kernels' radices)."""
    if n < 2:
        return False
    for prime in (2, 3, 5):
        while n % prime == 0:
            n //= prime
    return n == 1


def radices(n: int) -> list:
    """The Stockham stages the kernels use for n = 2^a 3^b 5^c: for the power of two, one
    radix-2 stage if a is odd, then radix-4 stages; then radix 3 and radix 5 stages
    (1024 -> [4, 4, 4, 4, 4]; 8 -> [2, 4]; 96 -> [2, 4, 4, 3]; 1000 -> [2, 4, 5, 5, 5])."""
    if not is_smooth(n):
        raise ValueError(f"need a length >= 2 whose only prime factors are 2, 3 and 5, got {n}")
    log = (n & -n).bit_length() - 1
    threes = fives = 0
    while n % 3 == 0:
        n, threes = n // 3, threes + 1
    while n % 5 == 0:
        n, fives = n // 5, fives + 1
    return [2] * (log % 2) + [4] * (log // 2) + [3] * threes + [5] * fives


def vector_width(preferred: int, supported: tuple = (1, 2, 4, 8, 16), widest: int = 16) -> int:
    """The vector width a kernel is built with by default: the device's preferred float
    width (``Runtime.vector_width``: 1 on GPUs, whose warps are the vectors; 8 on AVX2 CPUs)
    raised or lowered to the nearest width the kernel is written for (``supported``): the
    smallest supported width at least ``preferred``, else the largest. Register-tiled kernels
    (dense.cl, conv.cl) need 4 lanes or more, fft.cl's rows per work-item 2 to 8, elementwise
    kernels (floatv.h) take any. Tuned kernels start from this width; the tuner measures
    the others (1 -> 4 with (4, 8, 16); 16 -> 8 with (2, 4, 8)). Widths above ``widest``
    (``Limits.widest_vector``: what the device's compiler emits natively) are left out
    unless none remains (16 -> 8 with widest 8)."""
    widths = sorted(w for w in supported if w <= widest) or [min(supported)]
    return next((w for w in widths if w >= preferred), widths[-1])
