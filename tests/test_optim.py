"""Optimizer kernels against nnlib.reference and against the PyPI oracles."""

import numpy as np
import pytest

import nnlib
from nnlib import optim
from nnlib.parameter import FlatLayout
from nnlib.reference import optim as ref
from nnlib.registry import OPTIMIZERS

from .isolated import run_isolated

STEPS = 25


def sizes(rt):
    return [(1,), (37,), (3, rt.max_work_group_size + 5)]


def replay(rt, make, reference, shape, n_state, seed=0, name="w", block=None, vb=None):
    """Run ``make([p])`` and ``reference`` on the same gradients; return both weights."""
    rng = np.random.default_rng(seed)
    p = nnlib.Parameter(rng.standard_normal(shape), name, block_size=block, runtime=rt)
    opt = make([p])
    w = p.numpy().astype(np.float64)
    state = [np.zeros_like(w) for _ in range(n_state)]
    if vb is not None:
        state[1] = np.zeros(vb)
    for t in range(1, STEPS + 1):
        g = rng.standard_normal(shape).astype(np.float32)
        p.grad.set(g)
        opt.step()
        w, *state = reference(w, g.astype(np.float64), *state, t)
    return p.numpy(), w


RULES = {
    "sgd": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
            lambda w, g, v, t: ref.sgd_step(w, g, v, 0.05, 0.9, False, 0.01), 1),
    "nesterov": (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True),
                 lambda w, g, v, t: ref.sgd_step(w, g, v, 0.05, 0.8, True), 1),
    "adam": (lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.1),
             lambda w, g, m, v, t: ref.adam_step(w, g, m, v, t, 0.01, weight_decay=0.1), 2),
    "adamw": (lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.1),
              lambda w, g, m, v, t: ref.adam_step(w, g, m, v, t, 0.01, weight_decay=0.1,
                                                  decoupled=True), 2),
    "adan": (lambda ps: optim.Adan(ps, lr=0.01, weight_decay=0.02),
             lambda w, g, m, d, n, gp, t: ref.adan_step(w, g, m, d, n, gp, t, 0.01,
                                                        weight_decay=0.02), 4),
    "adan_no_prox": (lambda ps: optim.Adan(ps, lr=0.01, weight_decay=0.02, no_prox=True),
                     lambda w, g, m, d, n, gp, t: ref.adan_step(w, g, m, d, n, gp, t, 0.01,
                                                                weight_decay=0.02,
                                                                no_prox=True), 4),
}


def test_every_optimizer_is_registered():
    defined = {c for c in vars(optim).values() if isinstance(c, type)
               and issubclass(c, optim.Optimizer) and c is not optim.Optimizer}
    assert defined == set(OPTIMIZERS.values())


def test_every_elementwise_optimizer_has_a_reference_rule(rt):
    p = nnlib.Parameter(np.zeros(3), runtime=rt)
    covered = {type(make([p])).__name__ for make, _, _ in RULES.values()}
    assert covered == {name for name, cls in OPTIMIZERS.items() if cls.flat}


@pytest.mark.parametrize("rule", RULES)
def test_elementwise_rules_match_reference(rt, rule):
    make, reference, n_state = RULES[rule]
    for shape in sizes(rt):
        got, want = replay(rt, make, reference, shape, n_state)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rule", RULES)
@pytest.mark.parametrize("fused", [True, False])
def test_many_tensors_match_reference(rt, rule, fused):
    """Several tensors of odd sizes: in one flat launch when they are laid out as one, else
    one launch per tensor; a layout never replaces a parameter's arrays twice."""
    make, reference, n_state = RULES[rule]
    rng = np.random.default_rng(1)
    shapes = [(37,), (3, 5), (1,), (2, rt.max_work_group_size + 3)]
    params = [nnlib.Parameter(rng.standard_normal(s), f"w{i}", runtime=rt)
              for i, s in enumerate(shapes)]
    if fused:
        assert FlatLayout.lay_out(params) is not None
        held = [(p.value, p.grad) for p in params]
        assert FlatLayout.lay_out(params) is None and FlatLayout.lay_out(params[1:]) is None
        assert all(p.value is v and p.grad is g for p, (v, g) in zip(params, held))
    opt = make(params)
    assert opt.fused == fused and make(params).fused == fused
    assert not make(params[1:]).fused  # not exactly a layout's parameters
    ws = replay_many(opt, params, reference, n_state, rng, STEPS)
    for p, w in zip(params, ws):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-5)


def replay_many(opt, params, reference, n_state, rng, steps):
    """``steps`` steps of ``opt`` and of ``reference`` on the same random gradients of every
    tensor; returns the reference's weights."""
    ws = [p.numpy().astype(np.float64) for p in params]
    states = [[np.zeros_like(w) for _ in range(n_state)] for w in ws]
    for t in range(1, steps + 1):
        for k, p in enumerate(params):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad.set(g)
            ws[k], *states[k] = reference(ws[k], g.astype(np.float64), *states[k], t)
        opt.step()
    return ws


@pytest.mark.parametrize("params", optim.candidates(nnlib.get_runtime()),
                         ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_every_tuning_candidate_matches_reference(rt, monkeypatch, params):
    """Whatever the tuner picks is correct: each candidate (width per work-item, load style,
    work-group size), every elementwise rule, tensors of odd sizes laid end to end and one
    above the work-group limit, and a non-finite gradient that must skip the step."""
    monkeypatch.setattr(optim, "elementwise_params", lambda rt: dict(params))
    shapes = [(37,), (1,), (2, rt.max_work_group_size + 3)]
    for rule, (make, reference, n_state) in RULES.items():
        rng = np.random.default_rng(2)
        ps = [nnlib.Parameter(rng.standard_normal(s), f"w{i}", runtime=rt)
              for i, s in enumerate(shapes)]
        FlatLayout.lay_out(ps)
        opt = make(ps)
        assert opt.kernel_params == params and opt.fused
        ws = replay_many(opt, ps, reference, n_state, rng, 3)
        for p, w in zip(ps, ws):
            np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-5, err_msg=rule)
        bad = ps[2].grad.get()
        bad[1, -1] = np.nan
        ps[2].grad.set(bad)
        opt.step()
        assert opt.skipped_steps == 1, rule
        for p, w in zip(ps, ws):
            np.testing.assert_allclose(p.numpy(), w, rtol=1e-5, atol=1e-5, err_msg=rule)


def test_update_kernels_drop_the_tail_test_only_for_whole_vectors(rt):
    """load_v's tail test is left out (WHOLE_VECTORS) only for tensors of whole vectors,
    which every flat layout is, at every width the tuner tries; a tensor with a tail keeps
    it (the per-tensor runs of test_many_tensors_match_reference check its results)."""
    rng = np.random.default_rng(0)
    ps = [nnlib.Parameter(rng.standard_normal(s), f"w{i}", runtime=rt)
          for i, s in enumerate([(37,), (3, 5), (1,)])]
    layout = FlatLayout.lay_out(ps)
    for params in optim.candidates(rt):
        vw = params["VW"]
        assert "-DWHOLE_VECTORS=1" in optim.kernel_options(params, layout.size)
        assert "-DWHOLE_VECTORS=1" in optim.kernel_options(params, 3 * vw)
        if vw > 1:
            assert "-DWHOLE_VECTORS=1" not in optim.kernel_options(params, 3 * vw + 1)
        assert "-DWHOLE_VECTORS=1" not in optim.kernel_options(params)


def test_the_tuning_problem_runs_both_steps(rt):
    """optim.measure times an Adam step of TUNE_SIZE and an SGD step of SMALL_TUNE_SIZE:
    the first two candidates' kernels build and run there (a wrong argument list would
    raise)."""
    for params in optim.candidates(rt)[:2]:
        seconds = optim.measure(rt, params)
        assert np.isfinite(seconds) and seconds > 0


def test_optimizer_parameters_come_from_the_search(rt, tmp_path, monkeypatch):
    from nnlib import tuning

    monkeypatch.setenv("NNLIB_TUNING_DIR", str(tmp_path))
    want = optim.candidates(rt)[-1]
    monkeypatch.setattr(optim, "measure", lambda rt, p: 1.0 - (p == want))
    tuning.set_mode("1")
    try:
        opt = optim.Adam([nnlib.Parameter(np.ones(5), "w", runtime=rt)])
        assert opt.kernel_params == want
        assert tuning.stored(rt)["optim.elementwise/flat"]["params"] == want
    finally:
        tuning.set_mode(None)
    widths = {c["VW"] for c in optim.candidates(rt)}
    base = optim.default_params(rt)["VW"]
    assert len(widths) >= 2 and {1, max(1, base // 2), base} <= widths


def test_zero_grad_clears_every_tensor(rt):
    params = net(rt).parameters()
    for opt in (optim.Adam(params), optim.AdamMini(params)):
        for p in params:
            rt.fill(p.grad, 3.0)
        opt.zero_grad()
        assert all(not p.grad.get().any() for p in params)


def test_adam_mini_blocks_match_reference(rt):
    """Blocks of odd sizes, one block per tensor, and blocks wider than a work-group."""
    wide = rt.max_work_group_size + 4
    for shape, block in (((5, 37), 37), ((1,), 1), ((7,), None), ((2, wide), wide)):
        size = int(np.prod(shape))
        b = size if block is None else block
        got, want = replay(
            rt, lambda ps: optim.AdamMini(ps, lr=0.01, weight_decay=0.1),
            lambda w, g, m, vb, t: ref.adam_mini_step(w, g, m, vb, t, b, 0.01,
                                                      weight_decay=0.1),
            shape, 2, block=block, vb=size // b)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_adam_mini_with_block_one_is_adamw(rt):
    got, _ = replay(rt, lambda ps: optim.AdamMini(ps, lr=0.01), lambda *a: a[:3], (9,), 2,
                    block=1)
    adamw, _ = replay(rt, lambda ps: optim.AdamW(ps, lr=0.01, weight_decay=0.0),
                      lambda *a: a[:3], (9,), 2)
    np.testing.assert_allclose(got, adamw, rtol=1e-6, atol=1e-7)


def test_adam_mini_any_group_size(rt):
    """The reduction halves down to one sum for every power-of-two group, whether the group
    is wider than the block (37) or the block wider than the device's largest group."""
    limit = rt.launcher("optim", "adam_mini_update").work_group_size
    wide = rt.max_work_group_size + 4
    for group in sorted({1, 2, 64, limit}):
        for shape, block in (((3, 37), 37), ((2, wide), wide)):
            got, want = replay(
                rt, lambda ps: optim.AdamMini(ps, lr=0.01, group_size=group),
                lambda w, g, m, vb, t: ref.adam_mini_step(w, g, m, vb, t, block, 0.01),
                shape, 2, block=block, vb=shape[0])
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(group))


def test_adan_without_the_difference_term_is_adam(rt):
    """With beta2 = 0 (the weight of the gradient difference, in the official code's
    convention) Adan's update is Adam's with betas (beta1, beta3): Xie et al., "Adan: Adaptive
    Nesterov Momentum Algorithm for Faster Optimizing Deep Models", Algorithm 1,
    https://arxiv.org/abs/2208.06677."""
    adan, _ = replay(rt, lambda ps: optim.Adan(ps, lr=0.01, betas=(0.9, 0.0, 0.99)),
                     lambda *a: a[:3], (41,), 2)
    adam, _ = replay(rt, lambda ps: optim.Adam(ps, lr=0.01, betas=(0.9, 0.99)),
                     lambda *a: a[:3], (41,), 2)
    np.testing.assert_allclose(adan, adam, rtol=1e-6, atol=1e-7)


# Fixed numbers of each rule as its paper states it (float64, lr 0.01, three hand-set
# gradients), so a change to nnlib.reference shows even where the kernels change with it:
#   Adam: Kingma and Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015,
#     https://arxiv.org/abs/1412.6980; AdamW: Loshchilov and Hutter, "Decoupled Weight Decay
#     Regularization", ICLR 2019, https://arxiv.org/abs/1711.05101;
#   Adam-mini: Zhang et al., "Adam-mini: Use Fewer Learning Rates To Gain More", 2024,
#     https://arxiv.org/abs/2406.16793 (and its code, adam-mini 1.1.1 on PyPI);
#   Adan: Xie et al. (above), with the official code's conventions,
#     https://github.com/sail-sg/Adan.
P0 = np.array([0.5, -1.0, 2.0, 0.0])
GRADS = [np.array(g) for g in ([0.1, -0.2, 0.3, 0.0], [0.2, 0.1, -0.1, 0.05],
                               [-0.3, 0.4, 0.2, -0.1])]
FIXED = {
    "adam": ([0.4810141715, -0.9919099480, 1.9799669502, -0.0042985049],
             lambda w, g, s, t: ref.adam_step(w, g, *s, t, 0.01), 2),
    "adamw": ([0.4795453128, -0.9889356004, 1.9739969403, -0.0042910636],
              lambda w, g, s, t: ref.adam_step(w, g, *s, t, 0.01, weight_decay=0.1,
                                               decoupled=True), 2),
    "adam_mini_tensor": ([0.4857635132, -0.9925764977, 1.9719755956, -0.0006625858],
                         lambda w, g, s, t: ref.adam_mini_step(w, g, *s, t, 4, 0.01), 2),
    "adam_mini_rows": ([0.4846178567, -0.9896977383, 1.9720959074, -0.0003710616],
                       lambda w, g, s, t: ref.adam_mini_step(w, g, *s, t, 2, 0.01), 2),
    "adam_mini_wd": ([0.4842852922, -0.9896035137, 1.9660192732, -0.0006609316],
                     lambda w, g, s, t: ref.adam_mini_step(w, g, *s, t, 4, 0.01,
                                                           weight_decay=0.1), 2),
    "adan": ([0.4838362792, -0.9995461534, 1.9897794234, -0.0037414546],
             lambda w, g, s, t: ref.adan_step(w, g, *s, t, 0.01), 4),
    "adan_prox": ([0.4835454433, -0.9989498505, 1.9885854690, -0.0037392608],
                  lambda w, g, s, t: ref.adan_step(w, g, *s, t, 0.01, weight_decay=0.02), 4),
    "adan_no_prox": ([0.4835421535, -0.9989496412, 1.9885831868, -0.0037400084],
                     lambda w, g, s, t: ref.adan_step(w, g, *s, t, 0.01, weight_decay=0.02,
                                                      no_prox=True), 4),
}


@pytest.mark.parametrize("rule", FIXED)
def test_reference_reproduces_fixed_numbers(rule):
    want, step, n_state = FIXED[rule]
    w, state = P0.copy(), [np.zeros(4) for _ in range(n_state)]
    if rule.startswith("adam_mini"):
        state[1] = np.zeros(4 // (2 if rule == "adam_mini_rows" else 4))
    for t, g in enumerate(GRADS, start=1):
        w, *state = step(w, g, state, t)
    np.testing.assert_allclose(w, want, rtol=0, atol=2e-10)


# ---------------------------------------------------------------- PyPI oracles
def torch_replay(rt, make_ours, make_theirs, named_shapes, seed=3):
    """Same parameters and gradients through an nnlib optimizer and a torch one."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    ours, theirs = [], []
    for name, shape, block in named_shapes:
        value = rng.standard_normal(shape).astype(np.float32)
        ours.append(nnlib.Parameter(value, name, block_size=block, runtime=rt))
        theirs.append((name, torch.nn.Parameter(torch.tensor(value))))
    opt_ours, opt_theirs = make_ours(ours), make_theirs(theirs)
    for _ in range(20):
        for p, (_, tp) in zip(ours, theirs):
            g = rng.standard_normal(p.shape).astype(np.float32)
            p.grad.set(g)
            tp.grad = torch.tensor(g)
        opt_ours.step()
        opt_theirs.step()
    for p, (name, tp) in zip(ours, theirs):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=2e-5, atol=2e-6,
                                   err_msg=name)


SHAPES = [("layer.weight", (6, 11), 11), ("layer.bias", (6,), 1)]


@pytest.mark.torch
@pytest.mark.parametrize("nesterov", [False, True])
def test_sgd_matches_torch(rt, nesterov):
    torch = pytest.importorskip("torch")
    torch_replay(rt, lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=nesterov,
                                          weight_decay=0.01),
                 lambda ps: torch.optim.SGD([p for _, p in ps], lr=0.05, momentum=0.9,
                                            nesterov=nesterov, weight_decay=0.01), SHAPES)


@pytest.mark.torch
@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_matches_torch(rt, name):
    torch = pytest.importorskip("torch")
    torch_replay(rt, lambda ps: getattr(optim, name)(ps, lr=0.01, weight_decay=0.1),
                 lambda ps: getattr(torch.optim, name)([p for _, p in ps], lr=0.01,
                                                       weight_decay=0.1, foreach=False),
                 SHAPES)


@pytest.mark.torch
def test_adam_mini_matches_official_code(rt):
    """adam-mini 1.1.1: "mlp" names are split per row, "bias" is Adam, other names are one
    block; nnlib says the same with block_size. No decay for "bias", "norm" or "ln" names."""
    adam_mini = pytest.importorskip("adam_mini")
    shapes = [("mlp.weight", (6, 11), 11), ("mlp.bias", (6,), 1), ("w", (4, 5), None),
              ("ln_f.weight", (7,), None)]
    torch_replay(rt, lambda ps: optim.AdamMini(ps, lr=0.01, weight_decay=0.1),
                 lambda ps: adam_mini.Adam_mini(ps, lr=0.01, weight_decay=0.1, dim=4,
                                                n_heads=2, verbose=False), shapes)


@pytest.mark.torch
@pytest.mark.parametrize("no_prox", [False, True])
def test_adan_matches_official_rule(rt, no_prox):
    """Our Adan against pytorch-optimizer 4.1.0's, which follows the official code
    (https://github.com/sail-sg/Adan): ``weight_decouple`` there is our ``no_prox``."""
    po = pytest.importorskip("pytorch_optimizer")
    torch_replay(rt, lambda ps: optim.Adan(ps, lr=0.01, weight_decay=0.02, no_prox=no_prox),
                 lambda ps: po.Adan([p for _, p in ps], lr=0.01, weight_decay=0.02,
                                    weight_decouple=no_prox, foreach=False), SHAPES)


# ---------------------------------------------------------------- state
def net(rt):
    return nnlib.Sequential([nnlib.Dense(13, 30, "tanh", seed=1, runtime=rt),
                             nnlib.Dense(30, 3, "softmax", seed=2, runtime=rt)],
                            loss="cross_entropy")


def test_state_nbytes_counts_every_buffer(rt):
    params = net(rt).parameters()
    n = sum(p.size for p in params)  # 13*30 + 30 + 30*3 + 3 = 513
    rows = 30 + 3  # one second moment per output neuron; biases keep one per element
    assert optim.SGD(params, momentum=0.9).state_nbytes() == 4 * n
    assert optim.SGD(params).state_nbytes() == 0
    assert optim.Adam(params).state_nbytes() == 4 * 2 * n
    assert optim.AdamMini(params).state_nbytes() == 4 * (n + rows + 30 + 3)
    assert optim.Adan(params).state_nbytes() == 4 * 4 * n


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_state_dict_resumes_bit_for_bit(rt, name):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((8, 13)).astype(np.float32), rng.integers(0, 3, 8)
    kwargs = {"momentum": 0.9} if name == "SGD" else {}
    model = net(rt)
    opt = getattr(optim, name)(model.parameters(), lr=0.01, **kwargs)
    for _ in range(3):
        model.train_step(x, y, opt)
    saved = ([p.numpy() for p in model.parameters()], opt.state_dict())
    for _ in range(4):
        model.train_step(x, y, opt)
    straight = [p.numpy() for p in model.parameters()]

    resumed = net(rt)
    for p, value in zip(resumed.parameters(), saved[0]):
        p.set(value)
    opt2 = getattr(optim, name)(resumed.parameters(), lr=0.01, **kwargs)
    opt2.load_state_dict(saved[1])
    for _ in range(4):
        resumed.train_step(x, y, opt2)
    for a, b in zip(straight, [p.numpy() for p in resumed.parameters()]):
        np.testing.assert_array_equal(a, b)


def test_load_state_dict_of_another_optimizer_fails_clearly(rt):
    params = net(rt).parameters()
    with pytest.raises(KeyError, match="state dict lacks m.0"):
        optim.Adam(params).load_state_dict(optim.SGD(params, momentum=0.9).state_dict())


# ---------------------------------------------------------------- bad input
def test_bad_hyper_parameters(rt):
    params = net(rt).parameters()
    with pytest.raises(ValueError, match="learning rate"):
        optim.Adam(params, lr=-0.1)
    with pytest.raises(ValueError, match=r"beta2 must be a finite number in \[0.0, 1.0\)"):
        optim.Adam(params, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="tuple of 3"):
        optim.Adan(params, betas=(0.9, 0.99))
    with pytest.raises(ValueError, match="eps"):
        optim.AdamMini(params, eps=float("nan"))
    for group in (0, 3, 10**6):
        with pytest.raises(ValueError, match="group_size must be a power of two"):
            optim.AdamMini(params, group_size=group)
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD(params, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.Adam([])
    with pytest.raises(TypeError, match="nnlib.Parameter"):
        optim.Adam([np.zeros(3)])
    with pytest.raises(ValueError, match="more than once"):
        optim.Adam(params + params[:1])
    p = nnlib.Parameter(np.zeros(3), runtime=rt)
    p.grad = None
    with pytest.raises(ValueError, match="has no gradient"):
        optim.SGD([p])


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_non_finite_gradients_skip_the_step(rt, name):
    model = net(rt)
    params = model.parameters()
    opt = getattr(optim, name)(params, lr=0.1)
    before = [p.numpy() for p in params]
    state = opt.state_dict()
    for p in params:
        rt.fill(p.grad, 1.0)
    rt.fill(params[1].grad[4:5], np.nan)
    opt.step()
    assert opt.skipped_steps == 1
    for p, b in zip(params, before):
        np.testing.assert_array_equal(p.numpy(), b)
    for key, value in opt.state_dict().items():
        if key not in ("steps", "skipped"):
            np.testing.assert_array_equal(value, state[key])
    rt.fill(params[1].grad, 1.0)
    opt.step()
    assert opt.skipped_steps == 1
    assert not np.array_equal(params[0].numpy(), before[0])
    resumed = getattr(optim, name)(params, lr=0.1)
    resumed.load_state_dict(opt.state_dict())
    assert resumed.skipped_steps == 1


@pytest.mark.parametrize("check_max", [1, 0])
@pytest.mark.parametrize("width", sorted({c["VW"] for c in optim.candidates(
    nnlib.get_runtime())}))
def test_the_finiteness_check_finds_one_bad_element_anywhere(rt, monkeypatch, width,
                                                             check_max):
    """check_finite, at each width the tuner tries and both ways of gathering the exponents
    (CHECK_MAX), on tensors of one element, of a few vectors and a tail, and of more vectors
    than a work-group of the largest size checks: one NaN or infinity at the start, the
    middle, the end (the tail) or the last whole vector skips the step, as numpy's isfinite
    says; the largest, smallest and subnormal finite floats do not."""
    params = dict(optim.default_params(rt), VW=width, VLOAD=0, CHECK_MAX=check_max)
    monkeypatch.setattr(optim, "elementwise_params", lambda rt: dict(params))
    per_item = width * optim.CHECK_VECTORS
    tiny = np.finfo(np.float32).smallest_subnormal
    big = np.finfo(np.float32).max
    for n in (1, 3 * per_item + 5, rt.max_work_group_size * per_item + 7):
        p = nnlib.Parameter(np.zeros(n), "w", runtime=rt)
        opt = optim.SGD([p], lr=0.0)
        good = np.resize(np.float32([big, -big, tiny, -tiny, 0.0, -0.0, 1.5]), n)
        skipped = 0
        positions = sorted({0, n // 2, n - 1, max(0, (n // width) * width - 1)})
        for position in positions:
            for bad in (np.nan, np.inf, -np.inf):
                grad = good.copy()
                grad[position] = bad
                p.grad.set(grad)
                opt.step()
                skipped += not np.isfinite(grad).all()
                assert opt.skipped_steps == skipped, (n, position, bad)
        p.grad.set(good)
        opt.step()
        assert opt.skipped_steps == skipped, n


@pytest.mark.parametrize("fused", [True, False])
def test_skips_are_counted_over_many_steps_and_resume_from_a_state_dict(rt, fused):
    """Steps flag non-finite gradients in two pairs of counts used in turns: the count and
    the state dict's [skipped before the last, the last skipped] hold for skips on either
    turn, runs of them, and a resumed optimizer (whichever turn it starts on) goes on
    counting."""
    model = net(rt)
    params = model.parameters()
    opt = optim.SGD(params if fused else params[::-1], lr=0.01)
    bad = [False, True, False, True, True, False, True]
    for i, is_bad in enumerate(bad):
        for p in params:
            rt.fill(p.grad, np.nan if is_bad and p is params[-1] else 0.5)
        opt.step()
        assert opt.skipped_steps == sum(bad[:i + 1])
        np.testing.assert_array_equal(opt.state_dict()["skipped"],
                                      [sum(bad[:i]), bad[i]])
        resumed = optim.SGD(params if fused else params[::-1], lr=0.01)
        if i % 2:
            resumed.step()  # the resumed optimizer starts on the other turn
        resumed.load_state_dict(opt.state_dict())
        rt.fill(params[0].grad, np.nan)
        resumed.step()
        assert resumed.skipped_steps == sum(bad[:i + 1]) + 1


def test_adan_first_step_after_a_skip_has_no_difference(rt):
    """A skipped first step leaves g_prev unset: the next step must still use g_prev = g."""
    rng = np.random.default_rng(4)
    p = nnlib.Parameter(rng.standard_normal(9), runtime=rt)
    w = p.numpy().astype(np.float64)
    opt = optim.Adan([p], lr=0.01)
    rt.fill(p.grad, np.nan)
    opt.step()
    g = rng.standard_normal(9).astype(np.float32)
    p.grad.set(g)
    opt.step()  # the host's step 2: bias corrections of t = 2 (see nnlib.optim)
    zeros = np.zeros(9)
    want = ref.adan_step(w, g.astype(np.float64), zeros, zeros, zeros, g, 2, 0.01)[0]
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-6)


def test_fit_stops_on_skipped_steps(rt):
    model = net(rt)
    w = model.layers[0].weight.numpy()
    w[0, :2] = np.inf, -np.inf  # a diverged weight: inf - inf gives NaN activations
    model.layers[0].weight.set(w)
    with pytest.raises(FloatingPointError, match="skipped 2 of 2 steps"):
        model.fit(np.ones((4, 13)), np.array([0, 1, 2, 0]), optim.Adam(model.parameters()),
                  epochs=1, batch_size=2, progress=False)


@pytest.mark.parametrize("device", [d["device"] for d in nnlib.devices()
                                    if d["compiles"] and d["type"] != "simulator"])
def test_adam_mini_survives_many_small_launches(device):
    """Every device that compiles, in its own process: 1,500 Adam-mini steps on small blocks,
    including skipped steps (PyPI's PoCL 3.0 corrupted the heap when the kernel returned early
    before its barriers)."""
    out = run_isolated("""
        import sys
        import numpy as np
        import nnlib
        from nnlib import optim
        nnlib.use_device(sys.argv[1])
        for k in range(10):
            p = nnlib.Parameter(np.random.default_rng(k).standard_normal(30), "w", block_size=10)
            opt = optim.AdamMini([p], lr=0.1)
            for t in range(150):
                p.grad.set(p.numpy() if t % 50 else np.full(30, np.nan, np.float32))
                opt.step()
        print(opt.skipped_steps, np.isfinite(p.numpy()).all())
    """, args=(device,))
    assert out.split() == ["3", "True"]


def test_a_step_follows_use_kernels_and_the_folders_edits(tmp_path):
    """An optimizer keeps its launchers from kernels/, but where ``use_kernels`` names a
    folder each step builds from the folder's file as it is then (a student's edit counts),
    and after ``use_kernels(None)`` the step is kernels/' again."""
    rt = nnlib.Runtime()
    p = nnlib.Parameter(np.ones(37, np.float32), "w", runtime=rt)
    opt = optim.SGD([p], lr=0.5)
    p.grad.set(np.ones(37, np.float32))

    def step():
        before = p.numpy()
        opt.step()
        return float(np.unique(p.numpy() - before)[0])

    assert step() == -0.5
    text = (nnlib.runtime.kernel_dir() / "optim.cl").read_text()
    rule = "store_v(wi - lr * step, w, first, n);"
    assert rule in text
    (tmp_path / "optim.cl").write_text(text.replace(rule, "store_v(wi - 2 * lr * step, w, "
                                                                "first, n);"))
    nnlib.use_kernels(tmp_path, topics=("optim",), runtime=rt)
    assert step() == -1.0
    (tmp_path / "optim.cl").write_text(text.replace(rule, "store_v(wi + lr * step, w, "
                                                                "first, n);"))
    assert step() == 0.5
    nnlib.use_kernels(None, runtime=rt)
    assert step() == -0.5
