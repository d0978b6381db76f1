"""The puzzles' stub kernels, made from puzzles/solutions/*.cl by removing each solution region
(tools/make_exercises.py's markers): what a student's kernels/ folder receives.

    python -m puzzles.stubs build/exercises/kernels
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "puzzles" / "solutions"


def _make_exercises():
    """tools/make_exercises.py, loaded by path (tools/ is no package)."""
    spec = importlib.util.spec_from_file_location("make_exercises",
                                                  ROOT / "tools" / "make_exercises.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stubs() -> dict[str, str]:
    """{file name: its stub text} for every solution file."""
    return _make_exercises().exercise_kernels(SOLUTIONS)


def write(folder) -> list[Path]:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in stubs().items():
        (folder / name).write_text(text)
    return [folder / name for name in stubs()]


if __name__ == "__main__":
    print("\n".join(map(str, write(sys.argv[1]))))
