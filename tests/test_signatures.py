"""The kernel signature parser, on hand-written cases and on every kernel of kernels/."""

import re

import numpy as np
import pyopencl as cl
import pytest

from nnlib import runtime, signatures
from nnlib.signatures import Arg, parse, parse_arg


@pytest.mark.parametrize("text, want", [
    ("global const float *restrict x", Arg("x", "global", "float *")),
    ("__global float* y", Arg("y", "global", "float *")),
    ("const int n", Arg("n", "scalar", "int")),
    ("uint seed", Arg("seed", "scalar", "uint")),
    ("unsigned int seed", Arg("seed", "scalar", "unsigned int")),
    ("local float2 *tile", Arg("tile", "local", "float2 *")),
    ("__constant float *table", Arg("table", "global", "float *")),
    ("float scale", Arg("scale", "scalar", "float")),
])
def test_parse_arg(text, want):
    assert parse_arg(text) == want


def test_scalar_types():
    assert parse_arg("int n").dtype == np.int32
    assert parse_arg("unsigned int n").dtype == np.uint32
    assert parse_arg("float x").dtype == np.float32
    assert parse_arg("size_t n").dtype is None  # its size is the device's
    assert parse_arg("global float *x").dtype is None


def test_parse_comments_attributes_files_and_duplicates():
    src = '''#line 1 "kernels/a.cl"
// kernel void commented(int x)
/* kernel void hidden(int y) */
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void first(global const float *a, /* inline */ int n)
{ }
#line 1 "kernels/b.cl"
kernel void second(void) { }
#if VW == 4
kernel void twice(int n) { }
#else
kernel void twice(int n, int m) { }
#endif
#define KERNEL_LIKE kernel_count
'''
    found = parse(src)
    assert set(found) == {"first", "second", "twice"}
    assert found["first"].file == "kernels/a.cl"
    assert found["first"].args == (Arg("a", "global", "float *"), Arg("n", "scalar", "int"))
    assert found["second"].file == "kernels/b.cl" and found["second"].args == ()
    assert found["twice"] is None  # two different definitions: not checked
    assert str(found["first"]) == "first(float * a, int n)"


def test_unreadable_parameter_is_an_error():
    with pytest.raises(ValueError, match="cannot read the kernel parameter"):
        parse("kernel void f(global float *)")


def test_every_kernel_matches_the_compiler(rt):
    """For every kernel in kernels/: the parsed argument count equals the compiled kernel's,
    and the names equal what the compiler reports where the device reports them."""
    for path in sorted(runtime.kernel_dir().glob("*.cl")):
        topic = path.stem
        program = rt.program(topic)
        names = program.get_info(cl.program_info.KERNEL_NAMES).split(";")
        found = signatures.parse(runtime.program_source(topic), f"kernels/{path.name}")
        for name in filter(None, names):
            sig = found.get(name)
            assert sig is not None, f"{topic}.cl: {name} not parsed"
            kernel = cl.Kernel(program, name)
            assert len(sig.args) == kernel.num_args, (topic, name)
            try:
                compiled = [kernel.get_arg_info(i, cl.kernel_arg_info.NAME)
                            for i in range(kernel.num_args)]
            except cl.Error:  # built without -cl-kernel-arg-info
                continue
            assert [a.name for a in sig.args] == compiled, (topic, name)


def test_no_kernel_file_defines_a_shared_code():
    """The codes of nnlib/codes.py reach every build as -D options; a kernel file that
    defines one again would silently keep its own value if the table changed."""
    from nnlib.codes import build_defines
    from nnlib.sources import kernel_dir
    shared = {option[2:].split("=")[0] for option in build_defines()}
    kernels = kernel_dir()
    redefined = [f"{path.name}: {name}" for path in sorted(kernels.glob("*.[ch]*"))
                 for name in re.findall(r"^\s*#\s*define\s+(\w+)", path.read_text(), re.M)
                 if name in shared]
    assert not redefined, redefined
