"""Kernel sources: the ``kernels/`` folder, the text of a topic's ``.cl`` file as a notebook
shows it, and the program text a build compiles (its ``// requires:`` files and
``#include``d headers inlined, with ``#line`` directives naming the real files).

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path


def kernel_dir() -> Path:
    """The folder holding the ``.cl`` files: inside the installed package, else the repo's."""
    packaged = resources.files("nnlib").joinpath("kernels")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "kernels"


_REQUIRES = re.compile(r"^//\s*requires:\s*(\w+)\.cl\s*$", re.MULTILINE)
_INCLUDE = re.compile(r'^#include "(\w+)\.h"\s*$', re.MULTILINE)
_LINE = re.compile(r'^#line (\d+) "([^"]*)"\s*$')
# How a compiler that ignores #line names the program text it was given: NVIDIA's "<kernel>"
_UNNAMED = re.compile(r"<kernel>:(\d+)(?=:)")


def kernel_path(topic: str, folder=None, suffix: str = ".cl") -> Path:
    """``<folder>/<topic>.cl`` if ``folder`` holds it, else ``kernels/<topic>.cl`` (or
    ``.h``)."""
    if folder is not None and (Path(folder) / f"{topic}{suffix}").is_file():
        return Path(folder) / f"{topic}{suffix}"
    path = kernel_dir() / f"{topic}{suffix}"
    if not path.is_file():
        known = sorted(p.stem for p in kernel_dir().glob("*.cl"))
        raise FileNotFoundError(f"no kernel file {topic}{suffix}; known topics: {known}")
    return path


def shown_path(path: Path) -> str:
    """How messages name a kernel file: ``kernels/x.cl`` for the workbook's own."""
    return f"kernels/{path.name}" if path.parent == kernel_dir() else str(path)


# The exercise markers of kernels/*.cl (tools/make_exercises.py): not part of what is shown.
_EXERCISE_MARKERS = re.compile(r"^[ \t]*//\s*(###\s*)?(BEGIN SOLUTION|END SOLUTION|HINT:|STUB:)"
                               r".*\n", re.MULTILINE)


EDITION_MARKER = "nnlib-student-edition.txt"  # names the student's kernel folder


def student_kernels(start=None) -> Path | None:
    """The student's kernel folder when the current folder (or ``start``) is inside the
    student edition (``make exercises``' hand-out or an nbgrader release), else None: the
    edition's root holds ``EDITION_MARKER``, whose text is that folder's relative path."""
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents[:2]):
        marker = folder / EDITION_MARKER
        if marker.is_file():
            return folder / marker.read_text().strip()
    return None


def source(topic: str, kernel: str | None = None, folder=None) -> str:
    """The text of ``kernels/<topic>.cl`` (what a notebook prints to show a kernel), or only
    the kernel function ``kernel`` with the comment lines just above it, without exercise
    markers. ``folder``: read ``<folder>/<topic>.cl`` if it exists (a student's copy). In the
    student edition the student's copy is read whatever ``folder`` says, so no call shows a
    solution the student is asked to write."""
    folder = student_kernels() or folder
    text = _EXERCISE_MARKERS.sub("", kernel_path(topic, folder).read_text())
    if kernel is None:
        return text
    match = re.search(rf"^kernel void {kernel}\(", text, re.MULTILINE)
    if match is None:
        raise KeyError(f"{topic}.cl has no kernel {kernel!r}")
    lines = text[:match.start()].splitlines()
    while lines and lines[-1].startswith("//"):
        lines.pop()
    start = len("\n".join(lines)) + (1 if lines else 0)
    return text[start:_body_end(text, text.index("{", match.start())) + 1]


def _body_end(text: str, at: int) -> int:
    """The index of the brace that closes the one at ``at``. Braces count in the first
    branch of each #if only: the others open the same blocks another way (``#if NT_KB for
    (...) { #else { #endif``)."""
    depth, skipping = 0, []  # skipping: per open #if, whether its current branch is skipped
    offset = text.rfind("\n", 0, at) + 1
    for line in text[offset:].splitlines(keepends=True):
        directive = line.strip().split(maxsplit=1)[0] if line.strip().startswith("#") else ""
        if directive in ("#if", "#ifdef", "#ifndef"):
            skipping.append(False)
        elif directive in ("#else", "#elif") and skipping:
            skipping[-1] = True
        elif directive == "#endif" and skipping:
            skipping.pop()
        elif not any(skipping):
            for i, char in enumerate(line):
                if offset + i < at:
                    continue
                depth += {"{": 1, "}": -1}.get(char, 0)
                if depth == 0:
                    return offset + i
        offset += len(line)
    raise ValueError("unbalanced braces after the kernel's signature")


def program_source(topic: str, folder=None) -> str:
    """``<topic>.cl`` preceded by the files it names in ``// requires: x.cl`` lines.

    Files are looked up in ``folder`` first (e.g. a student's exercise kernels), then in
    ``kernels/``. Each part starts with a ``#line`` directive naming its file, so compiler
    messages point at the real file and line. A line ``#include "x.h"`` is replaced by the
    text of ``x.h``, looked up the same way (no compiler include path to set up).
    """
    parts, seen = [], []

    def include(path, text):
        def header(match):
            inner = kernel_path(match.group(1), folder, ".h")
            line = text.count("\n", 0, match.start()) + 2
            return (f'#line 1 "{shown_path(inner)}"\n{inner.read_text()}\n'
                    f'#line {line} "{shown_path(path)}"')
        return _INCLUDE.sub(header, text)

    def add(name):
        if name in seen:
            return
        seen.append(name)
        path = kernel_path(name, folder)
        text = path.read_text()
        for dep in _REQUIRES.findall(text):
            add(dep)
        parts.append(f'#line 1 "{shown_path(path)}"\n{include(path, text)}')

    add(topic)
    return "\n".join(parts)


def line_origins(source: str) -> list:
    """(file, line) of each line of a program text, from its ``#line`` directives: entry
    ``i`` is where line ``i + 1`` of ``source`` comes from."""
    origins, name, line = [], "<source>", 1
    for text in source.split("\n"):
        origins.append((name, line))
        directive = _LINE.match(text)
        if directive:
            line, name = int(directive.group(1)), directive.group(2)
        else:
            line += 1
    return origins


def name_lines(log: str, source: str) -> str:
    """A build log of ``source`` with each line number that counts lines of the whole program
    text (NVIDIA's compiler ignores ``#line``: ``<kernel>:3:41``) replaced by the file and
    line it comes from (``kernels/dense.cl:2:41``)."""
    origins = line_origins(source)

    def named(match):
        index = int(match.group(1)) - 1
        if not 0 <= index < len(origins):
            return match.group(0)
        return "{}:{}".format(*origins[index])
    return _UNNAMED.sub(named, log)
