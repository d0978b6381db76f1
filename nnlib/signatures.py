"""Kernel signatures read from OpenCL C source: each kernel's argument names and kinds.

A kernel launch passes its arguments by position; nothing in pyopencl checks them against
the ``.cl`` file, and a wrong order or type gives garbage, not an error. The launcher
(:mod:`nnlib.launcher`) reads the signatures once per program with :func:`parse` and, in
checking mode, compares every call with them. Only what a call can get wrong is kept: the
name, whether an argument is a global/constant buffer, a local buffer or a scalar, and a
scalar's numpy type (None for types whose size the host cannot know, e.g. ``size_t``).

Taught in notebooks/00_devices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

SCALARS = {
    "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
    "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
    "float": np.float32, "double": np.float64, "half": np.float16,
    "unsigned char": np.uint8, "unsigned short": np.uint16, "unsigned int": np.uint32,
    "unsigned long": np.uint64, "unsigned": np.uint32,
}
QUALIFIERS = {"const", "restrict", "volatile", "__restrict", "__const"}
SPACES = {"global": "global", "__global": "global", "constant": "global",
          "__constant": "global", "local": "local", "__local": "local",
          "private": "scalar", "__private": "scalar"}


@dataclass(frozen=True)
class Arg:
    name: str
    kind: str  # "global" (a buffer), "local" (cl.LocalMemory) or "scalar"
    ctype: str  # the C type as written, without qualifiers, e.g. "float *" or "int"

    @property
    def dtype(self):
        """The numpy type of a scalar argument (None: a buffer, or a size the host cannot
        know)."""
        return np.dtype(SCALARS[self.ctype]) if self.kind == "scalar" and \
            self.ctype in SCALARS else None


@dataclass(frozen=True)
class Signature:
    name: str
    file: str  # the file that defines the kernel, as messages name it
    args: tuple

    def __str__(self):
        return f"{self.name}({', '.join(f'{a.ctype} {a.name}' for a in self.args)})"


_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_LINE = re.compile(r'^#line\s+\d+\s+"([^"]*)"\s*$', re.MULTILINE)
_KERNEL = re.compile(r"\b(?:__)?kernel\b")
_HEAD = re.compile(r"\s*(?:__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)\s*)*void\s+(\w+)\s*\(")


def parse_arg(text: str) -> Arg:
    """One parameter declaration, e.g. ``global const float *restrict x`` or ``int n``."""
    words = re.findall(r"\w+|\*", text)
    if len(words) < 2 or not re.fullmatch(r"[A-Za-z_]\w*", words[-1]):
        raise ValueError(f"cannot read the kernel parameter {text.strip()!r}")
    name, words = words[-1], words[:-1]
    kind = "scalar"
    for w in words:
        kind = SPACES.get(w, kind)
    base = [w for w in words if w not in SPACES and w not in QUALIFIERS and w != "*"]
    pointer = "*" in words
    if pointer and kind == "scalar":
        kind = "global"  # a pointer without address space is an error the compiler reports
    ctype = " ".join(base) + (" *" if pointer else "")
    return Arg(name, kind, ctype)


def _arguments(text: str, start: int) -> tuple[str, int]:
    """The text between the parenthesis before ``start`` and its partner, and the end."""
    depth, i = 1, start
    while depth:
        if i >= len(text):
            raise ValueError("unbalanced parentheses in a kernel signature")
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start:i - 1], i


def parse(source: str, file: str = "<source>") -> dict:
    """Every kernel in ``source`` as {name: Signature}. ``#line 1 "f"`` directives (as
    :func:`nnlib.runtime.program_source` writes them) name the file of what follows. A
    kernel defined twice with different arguments (under ``#if``) maps to None: unchecked."""
    text = _COMMENTS.sub(lambda m: "\n" * m.group().count("\n"), source)
    marks = [(m.start(), m.group(1)) for m in _LINE.finditer(text)]
    found: dict = {}
    for match in _KERNEL.finditer(text):
        head = _HEAD.match(text, match.end())
        if head is None:
            continue  # the word "kernel" elsewhere, e.g. in a macro
        body, _ = _arguments(text, head.end())
        params = [p for p in body.split(",") if p.strip() and p.strip() != "void"]
        owner = next((f for pos, f in reversed(marks) if pos < match.start()), file)
        sig = Signature(head.group(1), owner, tuple(parse_arg(p) for p in params))
        if sig.name in found and found[sig.name] != sig:
            found[sig.name] = None
        else:
            found[sig.name] = sig
    return found
