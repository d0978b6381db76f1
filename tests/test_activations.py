"""The activation table (nnlib/activations.py) against the kernels: every switch on an
activation code has a case for each code, a code outside the table is a launch error, and
each elementwise activation's kernels match the numpy reference on odd sizes."""

import re

import numpy as np
import pytest

import nnlib
from nnlib import reference as ref
from nnlib.activations import BY_NAME, ELEMENTWISE, FROM_Y, TABLE
from nnlib.codes import ACTIVATIONS, COMPLEX_ACTIVATIONS, LOSSES, build_defines
from nnlib.launcher import KernelArgumentError
from nnlib.sources import kernel_dir

# The functions of kernels/*.cl that switch on an activation code, and the codes each must
# have a case for: the forward ones every code (softmax passes z through; bias_actv is
# dense.cl's on a vector of VW lanes), activate_grad every elementwise one, the vector
# derivative (activation_vector.h, for fused_mlp.cl, which keeps only y) those written with y.
SWITCHES = {"activate": list(BY_NAME), "activate4": list(BY_NAME), "bias_actv": list(BY_NAME),
            "activate_grad": ELEMENTWISE, "activate_gradv": FROM_Y}

_FUNCTION = re.compile(r"^inline\s+\w+\s+(\w+)\(", re.MULTILINE)
_SWITCH = re.compile(r"switch\s*\((\w+)\)\s*\{")


def activation_switches() -> dict:
    """{function: {case labels}} of every switch in kernels/ with an ACT_ case."""
    found = {}
    for path in sorted(kernel_dir().glob("*.[ch]*")):
        text = path.read_text()
        for match in _SWITCH.finditer(text):
            depth, end = 0, match.end() - 1
            for end in range(match.end() - 1, len(text)):
                depth += {"{": 1, "}": -1}.get(text[end], 0)
                if depth == 0:
                    break
            labels = set(re.findall(r"\bcase\s+(ACT_\w+)\s*:", text[match.end():end]))
            if labels:
                head = list(_FUNCTION.finditer(text, 0, match.start()))[-1]
                found[head.group(1)] = labels
    return found


def test_every_switch_has_a_case_for_every_code():
    switches = activation_switches()
    assert set(switches) == set(SWITCHES), "a new switch on an activation: add it to SWITCHES"
    for function, names in SWITCHES.items():
        assert switches[function] == {f"ACT_{n.upper()}" for n in names}, function


def test_codes_come_from_the_table():
    assert ACTIVATIONS == {a.name: a.code for a in TABLE}
    assert len(set(ACTIVATIONS.values())) == len(TABLE)
    for a in TABLE:
        assert f"-DACT_{a.name.upper()}={a.code}" in build_defines()
        assert a.needs in ("y", "z", "row") and (a.derivative is None) == (a.needs == "row")


@pytest.mark.parametrize("argument,table", [("act", ACTIVATIONS), ("cact", COMPLEX_ACTIVATIONS),
                                            ("loss", LOSSES)])
def test_a_code_outside_its_table_is_a_launch_error(rt, argument, table):
    kernel = {"act": ("activation", "activation_backward"),
              "cact": ("conv", "complex_activation_forward"),
              "loss": ("loss", "loss_rows")}[argument]
    launch = rt.launcher(*kernel)
    names = [a.name for a in launch.signature.args]
    buf = rt.empty((4,))
    args = {a.name: buf.data if a.kind == "global" else a.dtype.type(1)
            for a in launch.signature.args}
    args[argument] = np.int32(max(table.values()) + 1)
    with pytest.raises(KernelArgumentError, match=f"'{argument}' is {max(table.values()) + 1}, "
                                                  "not a code"):
        launch((4,), None, *(args[n] for n in names))


def sizes(rt):
    return (1, 37, rt.max_work_group_size + 3)


@pytest.mark.parametrize("act", [a for a in ELEMENTWISE])
def test_forward_and_derivative_kernels_match_reference(rt, rng, act):
    """activation_forward and activation_backward (written with y, or z where the table says
    so) against the table's numpy forward and derivative."""
    forward = rt.launcher("activation", "activation_forward")
    backward = rt.launcher("activation", "activation_backward")
    code = np.int32(ACTIVATIONS[act])
    for n in sizes(rt):
        z = (3 * rng.standard_normal(n)).astype(np.float32)
        dy = rng.standard_normal(n).astype(np.float32)
        zd, dyd = rt.to_device(z, "z"), rt.to_device(dy, "dy")
        y, dz = rt.empty((n,)), rt.empty((n,))
        forward((n,), None, zd.data, y.data, np.int32(n), code)
        want = ref.activate(z.astype(np.float64), act)
        np.testing.assert_allclose(y.get(), want, rtol=1e-5, atol=1e-6)
        s = zd if BY_NAME[act].needs == "z" else y
        backward((n,), None, s.data, dyd.data, dz.data, np.int32(n), code)
        np.testing.assert_allclose(dz.get(), dy * ref.derivative(act, want, z), rtol=1e-4,
                                   atol=1e-5)


def test_tanh_is_within_4e_7_of_tanh(rt):
    """The kernels' tanh is a rational function (activation.cl's TANH_RATIONAL): within 4e-7
    of float64 tanh across and beyond its range, through activate (activation_forward) and
    activate4 (the blocked forward's epilogue, four outputs of each row at a time)."""
    z = np.concatenate([np.linspace(-12, 12, 2429), [-1e-6, 1e-7, 0.0]]).astype(np.float32)
    want = np.tanh(z.astype(np.float64))
    y = rt.empty(z.shape)
    rt.launcher("activation", "activation_forward")(
        z.shape, None, rt.to_device(z).data, y.data, np.int32(len(z)),
        np.int32(ACTIVATIONS["tanh"]))
    np.testing.assert_allclose(y.get(), want, rtol=0, atol=4e-7)
    layer = nnlib.Dense(1, 5, "tanh", runtime=rt)  # five equal outputs a row: one float4 and one
    layer.weight.set(np.ones((5, 1), np.float32))
    layer.bias.set(np.zeros(5, np.float32))
    got = layer.forward(rt.to_device(z[:, None])).get()
    np.testing.assert_allclose(got, np.repeat(want[:, None], 5, axis=1), rtol=0, atol=4e-7)


@pytest.mark.parametrize("act", ELEMENTWISE)
def test_reference_derivative_matches_finite_differences(act):
    z = np.linspace(-3, 3, 61) + 0.013  # off relu's kink at 0
    eps = 1e-6
    f = BY_NAME[act].forward
    numeric = (f(z + eps) - f(z - eps)) / (2 * eps)
    np.testing.assert_allclose(ref.derivative(act, f(z), z), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("act", ELEMENTWISE)
def test_train_step_through_each_activation_equals_reference(rt, rng, act):
    """Sequential.train_step with the activation in a hidden layer and at the output (its
    shortcuts take z where the derivative needs it) gives the float64 reference's gradients."""
    layers = [nnlib.Dense(5, 7, act, seed=1, runtime=rt), nnlib.Dense(7, 6, "tanh", seed=2,
                                                                       runtime=rt),
              nnlib.Dense(6, 3, act, seed=3, runtime=rt)]
    net = nnlib.Sequential(layers, loss="mse")
    x = rng.standard_normal((4, 5)).astype(np.float32)
    t = rng.standard_normal((4, 3)).astype(np.float32)
    opt = nnlib.optim.SGD(net.parameters(), lr=0.0)
    net.train_step(x, t, opt)
    params = [(p.numpy().astype(np.float64)) for p in net.parameters()]
    acts = (act, "tanh", act)
    outs, zs = [x.astype(np.float64)], []
    for i, a in enumerate(acts):
        zs.append(outs[-1] @ params[2 * i].T + params[2 * i + 1])
        outs.append(ref.activate(zs[-1], a))
    dz = ref.output_gradient(outs[-1], t, "mse", act, zs[-1])
    for i in reversed(range(3)):
        np.testing.assert_allclose(net.parameters()[2 * i].grad.get(), dz.T @ outs[i],
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(net.parameters()[2 * i + 1].grad.get(), dz.sum(axis=0),
                                   rtol=1e-4, atol=1e-5)
        if i:
            dz = (dz @ params[2 * i]) * ref.derivative(acts[i - 1], outs[i], zs[i - 1])
