"""Pictures of the kernel puzzles: which output element (and so which work-item or work-group)
reads which input elements, drawn from :func:`nnlib.exercises.puzzles.touches` (each input
element changed in turn on a tiny example; the outputs that change depend on it).

One panel per kernel (the reference, the student's): rows are the output's elements, columns
the inputs' elements side by side; a blue cell says "this output read that input", the strip
on the left is red for an output that was written and grey for one never written.
"""

from __future__ import annotations

import textwrap

import numpy as np

READ = (0.16, 0.40, 0.80)
WRITTEN = (0.85, 0.25, 0.20)
UNWRITTEN = (0.75, 0.75, 0.75)
EMPTY = (1.0, 1.0, 1.0)


def image(found: dict) -> np.ndarray:
    """The panel's RGB image: a written/unwritten strip, a gap, then the read map."""
    depends, written = found["depends"], found["written"]
    rows = depends.shape[0]
    picture = np.ones((rows, depends.shape[1] + 2, 3))
    picture[:, 0] = np.where(written[:, None], WRITTEN, UNWRITTEN)
    picture[:, 2:] = np.where(depends[..., None], READ, EMPTY)
    return picture


def draw(puzzle, panels: list):
    """A figure with one panel per (title, found) of ``panels``."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    width = max(f["depends"].shape[1] for _, f in panels) + 2
    height = max(f["depends"].shape[0] for _, f in panels)
    fig, axes = plt.subplots(1, len(panels), squeeze=False,
                             figsize=(max(7, min(14, 1.5 + 0.22 * width * len(panels))),
                                      max(3, min(8, 2.5 + 0.22 * height))))
    for ax, (title, found) in zip(axes[0], panels):
        ax.imshow(image(found), aspect="auto", interpolation="nearest")
        edges = np.cumsum([0] + [size for _, size in found["inputs"]]) + 2
        for edge in edges[1:-1]:
            ax.axvline(edge - 0.5, color="black", linewidth=0.8)
        ax.set_xticks([0, *((edges[:-1] + edges[1:]) / 2 - 0.5)])
        ax.set_xticklabels(["out", *(f"{name} ({size})" for name, size in found["inputs"])])
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(textwrap.fill(puzzle.rows, 40), fontsize=8)
        extra = ", and wrote past its end" if found.get("past_end") else ""
        ax.set_title(f"{puzzle.name}: {title}{extra}")
    fig.legend(handles=[Patch(color=READ, label="read"), Patch(color=WRITTEN, label="written"),
                        Patch(color=UNWRITTEN, label="never written")],
               loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
