"""Integer size arithmetic shared by every launch: grids of blocks and padded sizes."""


def ceil_div(n: int, d: int) -> int:
    """How many blocks of ``d`` cover ``n`` (the grid size of a blocked kernel)."""
    return -(-n // d)


def round_up(n: int, multiple: int) -> int:
    """``n`` padded up to a multiple of ``multiple`` (a global size to its work-group's)."""
    return ceil_div(n, multiple) * multiple
