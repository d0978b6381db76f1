"""The structure of nnlib's imports: every module imports, no import cycle (each module's
top-level imports form an acyclic graph), no import inside a function that only avoids a
cycle, and the core imports none of the course's tooling."""

import ast
import importlib
import subprocess
import sys

import pytest

from .isolated import ROOT

PACKAGE = ROOT / "nnlib"


def module_name(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(node, module: str) -> list:
    """The nnlib modules an Import or ImportFrom node of ``module`` names: ``from X import
    y`` names X.y where that is a module, else X."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    base = (f"{base}.{node.module}" if node.level else node.module) if node.module else base
    names = [f"{base}.{a.name}" for a in node.names]
    return [n for n in names if n in MODULES] or ([base] if base in MODULES else [])


def is_type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(module: str) -> tuple:
    """(top-level, in-function) nnlib modules that ``module`` imports; top-level counts
    what runs at import (module body, its if/try blocks, class bodies)."""
    top, inner = set(), set()

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            if is_type_checking(child):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                (inner if in_function else top).update(imported(child, module))
            visit(child, in_function or isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(MODULES[module].read_text()), False)
    return top - {module}, inner - {module}


GRAPH = {m: imports(m) for m in MODULES}


def reaches(start: str, goal: str) -> list:
    """A chain of top-level imports from ``start`` to ``goal``, or []."""
    stack, seen = [[start]], {start}
    while stack:
        path = stack.pop()
        if path[-1] == goal:
            return path
        for nxt in sorted(GRAPH[path[-1]][0] - seen):
            seen.add(nxt)
            stack.append(path + [nxt])
    return []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_module_imports(module):
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as err:  # a benchmark script's optional rival (tinygrad)
        if err.name.partition(".")[0] == "nnlib":
            raise
        pytest.skip(f"{module} needs {err.name}")


def test_the_graph_sees_the_imports():
    assert "nnlib.checkpoint" in GRAPH["nnlib.network"][0]
    assert "nnlib.layers.dense_params" in GRAPH["nnlib.layers.dense_blocked"][0]
    assert "nnlib.reference.transformer" in GRAPH["nnlib.reference.catch"][0]


def test_no_import_cycle():
    cycles = [chain + [m] for m in MODULES for nxt in GRAPH[m][0]
              if (chain := reaches(nxt, m))]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_no_import_in_a_function_only_avoids_a_cycle():
    """An import inside a function is for an optional or slow dependency, or a choice made
    at run time; one that would close a cycle at the top means the modules are cut wrong."""
    hidden = [f"{m} -> {target} (back: {' -> '.join(chain)})" for m in MODULES
              for target in GRAPH[m][1] if (chain := reaches(target, m))]
    assert not hidden, "imports inside functions that avoid a cycle: " + "; ".join(hidden)


# What the notebooks, the tests and the site need, but not the library.
TOOLING = ("sklearn", "nbval", "jupytext", "nbconvert", "nbclient", "latex2mathml", "torch",
           "jupyterlab", "nbgrader")
CORE = ("nnlib", "nnlib.runtime", "nnlib.launcher", "nnlib.layers", "nnlib.network",
        "nnlib.optim", "nnlib.checkpoint", "nnlib.catch", "nnlib.catch.baselines", "nnlib.fused",
        "nnlib.fft", "nnlib.data", "nnlib.reference")


def test_the_core_imports_none_of_the_course_tooling():
    script = (f"import sys\nfor name in {TOOLING!r}:\n    sys.modules[name] = None\n"
              f"import importlib\nfor m in {CORE!r}:\n    importlib.import_module(m)\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
