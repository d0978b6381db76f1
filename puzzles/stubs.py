"""The puzzles' stub kernels, made from puzzles/solutions/*.cl by removing each solution region
(tools/make_exercises.py's markers): what a student's kernels/ folder receives.

    python -m puzzles.stubs build/exercises/kernels
"""

import sys
from pathlib import Path

from tools.make_exercises import strip_solutions

SOLUTIONS = Path(__file__).resolve().parent / "solutions"


def stubs() -> dict[str, str]:
    """{file name: its stub text} for every solution file."""
    return {path.name: strip_solutions(path.read_text(), "//", str(path), python=False)[0]
            for path in sorted(SOLUTIONS.glob("*.cl"))}


def write(folder) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in stubs().items():
        (folder / name).write_text(text)
    return [folder / name for name in stubs()]


if __name__ == "__main__":
    print("\n".join(map(str, write(sys.argv[1]))))
