"""Issue 32, numbers: hyperparameters of any Python or numpy type are accepted exactly when
they are finite in float32 and in range, at construction and when set later; a checkpoint
that saves always loads (or the save refuses, naming the array)."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnlib
from nnlib import optim

F32_MAX = float(np.finfo(np.float32).max)
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.01, 1e39, -1e39, 3.4e38, 3.5e38, 0.0, -0.0, 1, True, None, "0.1",
                     [0.1], 1e-45]),
    st.floats(-1e40, 1e40).map(np.float32),
    st.floats(-1e40, 1e40).map(np.float64),
    st.integers(-10, 10**40).map(lambda i: np.int64(i) if abs(i) < 2**62 else i),
    st.floats(0, 1).map(lambda v: np.array(v)),
    st.floats(0, 1).map(lambda v: np.array([v])))


def expected(value, low=0.0, high=None) -> bool:
    if isinstance(value, (bool, np.bool_, str, list)) or value is None:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        number = float(np.asarray(value).reshape(()))
    return math.isfinite(number) and abs(number) <= F32_MAX and number >= low \
        and (high is None or number < high)


@pytest.fixture(scope="module")
def params(rt):
    return nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)]).parameters()


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lr=values, beta=values)
def test_rates_and_betas_at_construction_and_set_later(params, lr, beta):
    opt = optim.Adam(params)
    for name, value, high in (("lr", lr, None), ("beta1", beta, 1.0)):
        before = getattr(opt, name)
        if expected(value, 0.0, high):
            setattr(opt, name, value)
            assert type(getattr(opt, name)) is float and getattr(opt, name) == float(
                np.asarray(value).reshape(()))
        else:
            with pytest.raises(ValueError, match="finite number"):
                setattr(opt, name, value)
            assert getattr(opt, name) == before  # a refused value changes nothing
    if expected(lr):
        assert optim.SGD(params, lr=lr).lr == float(np.asarray(lr).reshape(()))
    else:
        with pytest.raises(ValueError, match="learning rate"):
            optim.SGD(params, lr=lr)


def test_numpy_scalars_and_arrays_of_the_right_shape(params):
    opt = optim.Adam(params, lr=np.float32(0.01), betas=np.array([0.9, 0.999]))
    assert opt.lr == pytest.approx(0.01) and opt.beta2 == pytest.approx(0.999)
    assert optim.Adan(params, betas=np.array([0.98, 0.92, 0.99], np.float32)).beta3 \
        == pytest.approx(0.99)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        optim.Adam(params, betas=np.array([[0.9, 0.999]]))
    for bad in (float("nan"), 1e39, np.float64(np.inf)):
        with pytest.raises(ValueError, match="finite number"):
            opt.lr = bad
        with pytest.raises(ValueError):
            opt.eps = bad


def test_a_nan_weight_or_an_overflowed_state_is_refused_at_save(params, tmp_path, rt):
    net = nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)])
    w = net.layers[0].weight.numpy()
    w[0, 0] = np.nan
    net.layers[0].weight.set(w)
    with pytest.raises(nnlib.CheckpointError, match="nothing written.*NaN"):
        net.save(tmp_path / "nan.npz")
    assert not list(tmp_path.iterdir())
    net = nnlib.Sequential([nnlib.Dense(3, 2, runtime=rt)])
    opt = optim.AdamMini(net.parameters())
    for p in net.parameters():
        p.grad.fill(1e20)
    opt.step()
    try:
        nnlib.save_checkpoint(tmp_path / "mini.npz", net, opt)
    except nnlib.CheckpointError as err:
        assert "nothing written" in str(err)
    else:  # it saved: then it loads
        nnlib.load_checkpoint(tmp_path / "mini.npz")
