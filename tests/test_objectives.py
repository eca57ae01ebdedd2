"""Objectives: every built-in through shared checks, g/h against closed forms and finite
differences in float64, the zero-Hessian policy, user-written twins, curvature options,
structured labels and input errors. See docs/objectives.md."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import N_FEATURES, SMALL, make_regression

import jaxgbt
from jaxgbt import objectives
from jaxgbt.core.leaves import quantile_leaves
from jaxgbt.data.validation import check_y
from jaxgbt.evaluation import metrics
from jaxgbt.evaluation.evaluator import default_metric
from jaxgbt.objectives import logistic, logistic_loss, resolve, squared_error
from jaxgbt.objectives.derivatives import (
    grad_hess,
    group_derivatives,
    loss_values,
    newton_constant,
    row_derivatives,
)
from jaxgbt.objectives.ranking import _lambdarank_weights

CLOSED_FORMS = {
    "squared_error": (squared_error, lambda y, f: f - y, lambda y, f: np.ones_like(f)),
    "logistic": (logistic, lambda y, f: 1 / (1 + np.exp(-f)) - y,
                 lambda y, f: np.exp(-f) / (1 + np.exp(-f)) ** 2),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORMS))
def test_autodiff_g_h_equal_closed_forms(name):
    objective, g_exact, h_exact = CLOSED_FORMS[name]
    rng = np.random.default_rng(1)
    y = (rng.random(64) > 0.5).astype(np.float64)
    f = rng.normal(scale=3, size=(64, 1))
    with jax.enable_x64(True):
        g, h = grad_hess(objective.loss, vector_output=False)(jnp.asarray(y), jnp.asarray(f))
        g, h = np.asarray(g)[:, 0], np.asarray(h)[:, 0]
    np.testing.assert_allclose(g, g_exact(y, f[:, 0]), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(h, h_exact(y, f[:, 0]), rtol=1e-6, atol=1e-12)


def test_vector_output_hessian_is_the_diagonal():
    def loss(y, f):  # coupled outputs: the Hessian has off-diagonal terms
        return jnp.sum((f - y) ** 2) + f[0] * f[1]

    y = jnp.asarray(np.random.default_rng(0).normal(size=(5, 2)), jnp.float32)
    f = jnp.zeros((5, 2))
    g, h = jax.jit(grad_hess(loss, vector_output=True))(y, f)
    np.testing.assert_allclose(g, -2 * y + f[:, ::-1], rtol=1e-6)
    np.testing.assert_allclose(h, 2 * np.ones((5, 2)))


def test_negative_curvature_is_clipped_to_zero():
    def concave(y, f):
        return -((f - y) ** 2)

    _, h = grad_hess(concave, vector_output=False)(jnp.zeros(3), jnp.ones((3, 1)))
    np.testing.assert_array_equal(h, 0.0)


def test_newton_constant_matches_closed_form_starts():
    rng = np.random.default_rng(2)
    y = jnp.asarray((rng.random(500) < 0.3).astype(np.float32))
    w = jnp.asarray(rng.random(500).astype(np.float32) + 0.5)
    for objective in (squared_error, logistic):
        newton = newton_constant(objective.loss, False, y, w, n_outputs=1)
        np.testing.assert_allclose(newton, objective.init_score(y, w), rtol=1e-5, atol=1e-6)


def test_user_written_logistic_gives_the_builtin_model(binary_data):
    X, y = binary_data

    def my_logistic(y, f):
        return jnp.log1p(jnp.exp(f)) - y * f

    builtin = jaxgbt.fit("logistic", X, y, **SMALL)
    custom = jaxgbt.fit(my_logistic, X, y, **SMALL)
    np.testing.assert_allclose(custom.base_score, builtin.base_score, rtol=1e-5)
    np.testing.assert_array_equal(custom.feature, builtin.feature)
    np.testing.assert_array_equal(custom.threshold, builtin.threshold)
    np.testing.assert_allclose(custom.leaf_value, builtin.leaf_value, atol=1e-5)
    # predict applies the link only when the objective has one.
    np.testing.assert_allclose(builtin.predict(X), jax.nn.sigmoid(builtin.predict_raw(X)))
    np.testing.assert_array_equal(custom.predict(X), custom.predict_raw(X))
    with_link = jaxgbt.fit(my_logistic, X, y, link=jax.nn.sigmoid, **SMALL)
    np.testing.assert_allclose(with_link.predict(X), builtin.predict(X), atol=1e-5)


def test_resolve_rejects_unknown_names_and_non_callables():
    with pytest.raises(ValueError, match="not a built-in objective"):
        resolve("hinge_of_doom")
    with pytest.raises(TypeError, match="loss must be"):
        resolve(3.0)
    assert resolve(squared_error.loss).name == "custom:squared_error_loss"


# =======================================================================================
# Every built-in objective through the same checks.
#
# Each case: the objective's name, labels (and group=) made from the conftest features,
# the expected inverse link (NumPy, margins -> predictions), and the loss's form.

N_CLASSES = 3


def _signal(X):
    return np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2]


def _query_sizes(n_rows, rng):
    """Query sizes of 4..23 rows that add up to n_rows (ragged: groups are padded)."""
    sizes = []
    while sum(sizes) < n_rows:
        sizes.append(int(rng.integers(4, 24)))
    sizes[-1] -= sum(sizes) - n_rows
    if sizes[-1] < 2:
        sizes[-2] += sizes.pop()
    return np.array(sizes)


def _labels(kind, X, seed=0):
    """(y, group) of a kind of data; y float32 as fit would store it."""
    rng = np.random.default_rng(seed)
    n = X.shape[0]
    s = _signal(X)
    noisy = s + 0.3 * rng.normal(size=n)
    group = None
    if kind == "regression":
        y = noisy
    elif kind == "binary":
        y = (noisy > np.median(noisy)).astype(float)
    elif kind == "classes":
        y = np.digitize(noisy, np.quantile(noisy, [0.4, 0.75])).astype(float)
    elif kind == "multi":
        y = np.c_[noisy, X[:, 3] + 0.1 * rng.normal(size=n)]
    elif kind == "counts":
        y = rng.poisson(np.exp(0.5 * s)).astype(float)
    elif kind == "positive":
        y = np.exp(0.5 * s) * rng.gamma(2.0, 0.5, size=n)
    elif kind == "tweedie":  # compound Poisson-gamma: exact zeros and positive amounts
        y = rng.poisson(np.exp(0.3 * s)) * rng.gamma(2.0, 1.0, size=n)
    elif kind == "interval":
        time = np.exp(0.5 * s + 0.3 * rng.normal(size=n))
        how = rng.integers(0, 3, size=n)  # 0 observed, 1 right-censored, 2 interval
        lower = np.where(how == 1, time * rng.uniform(0.3, 1.0, size=n),
                         np.where(how == 2, 0.7 * time, time))
        upper = np.where(how == 1, np.inf, np.where(how == 2, 1.5 * time, time))
        y = np.c_[lower, upper]
    elif kind == "survival":  # rounded times: ties; 30% censored
        time = np.round(np.exp(-0.5 * s + 0.5 * rng.normal(size=n)) * 4) / 4 + 0.25
        y = np.c_[time, (rng.random(n) < 0.7).astype(float)]
    elif kind == "relevance":
        y = np.digitize(noisy, np.quantile(noisy, [0.5, 0.75, 0.9])).astype(float)
        sizes = _query_sizes(n, rng)
        group = np.repeat(np.arange(len(sizes)), sizes)
    else:
        raise AssertionError(kind)
    return y.astype(np.float32), group


def _sigmoid(f):
    return 1 / (1 + np.exp(-f))


def _softmax(f):
    e = np.exp(f - f.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


IDENTITY, PROBABILITY, CLASSES, POSITIVE = "identity", "probability", "classes", "positive"

# name -> (kind of labels, expected inverse link, what predict returns)
BUILTINS = {
    "squared_error": ("regression", lambda f: f, IDENTITY),
    "absolute_error": ("regression", lambda f: f, IDENTITY),
    "huber": ("regression", lambda f: f, IDENTITY),
    "pseudo_huber": ("regression", lambda f: f, IDENTITY),
    "quantile@0.9": ("heteroscedastic", lambda f: f, IDENTITY),
    "logistic": ("binary", _sigmoid, PROBABILITY),
    "softmax": ("classes", _softmax, CLASSES),
    "multi_squared_error": ("multi", lambda f: f, IDENTITY),
    "poisson": ("counts", np.exp, POSITIVE),
    "gamma": ("positive", np.exp, POSITIVE),
    "tweedie@1.5": ("tweedie", np.exp, POSITIVE),
    "exponential": ("binary", lambda f: _sigmoid(2 * f), PROBABILITY),
    "focal": ("binary", _sigmoid, PROBABILITY),
    "aft_normal": ("interval", np.exp, POSITIVE),
    "aft_logistic": ("interval", np.exp, POSITIVE),
    "cox": ("survival", np.exp, POSITIVE),
    "pairwise_logistic": ("relevance", lambda f: f, IDENTITY),
    "lambdarank_ndcg": ("relevance", lambda f: f, IDENTITY),
    "listwise_softmax": ("relevance", lambda f: f, IDENTITY),
}


@functools.cache
def _builtin_fit(name):
    """(objective, X, y, group, model): each built-in is fitted once per test session
    (the twin tests below reuse these fits and their compiled programs)."""
    kind = BUILTINS[name][0]
    if kind == "heteroscedastic":  # enough rows and trees for the coverage test
        (X, y, _), _ = _heteroscedastic()
        group, settings = None, dict(SMALL, n_trees=40, learning_rate=0.2)
    else:
        X, _ = make_regression()
        (y, group), settings = _labels(kind, X), SMALL
    objective = resolve(name)
    model = jaxgbt.fit(objective, X, y, group=group, **settings)
    return objective, X, y, group, model


def _heteroscedastic(n=4000):
    """((X, y, noise scale) of training rows, the same of held-out rows): y has a mean
    0.5 x_0 and a noise scale 0.1 + |x_1|."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    scale = 0.1 + np.abs(X[:, 1])
    y = (0.5 * X[:, 0] + scale * rng.normal(size=n)).astype(np.float32)
    half = n // 2
    return (X[:half], y[:half], scale[:half]), (X[half:], y[half:], scale[half:])


def _padded_groups(group):
    """(index i32[Q, M], mask bool[Q, M]) of contiguous query ids, padding -> row 0."""
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    sizes = np.diff(np.r_[starts, group.size])
    index = np.zeros((starts.size, sizes.max()), np.int32)
    mask = np.zeros(index.shape, bool)
    for q, (start, size) in enumerate(zip(starts, sizes, strict=True)):
        index[q, :size] = np.arange(start, start + size)
        mask[q, :size] = True
    return index, mask


@functools.partial(jax.jit, static_argnums=(0, 1))
def _summed_loss(objective, vector_output, y, raw, index, mask):
    if objective.kind == "dataset":
        return objective.loss(y, raw[:, 0], jnp.ones(raw.shape[0], bool))
    if objective.kind == "group":
        return jnp.sum(jax.vmap(objective.loss)(y[index], raw[:, 0][index], mask))
    return jnp.sum(loss_values(objective.loss, vector_output)(y, raw))


def _total_loss(objective, y, group, raw):
    """The objective's loss summed over the training set at margins raw of shape (N, K)."""
    index, mask = _padded_groups(group) if objective.kind == "group" else (None, None)
    raw = jnp.asarray(raw, jnp.float32).reshape(len(y), -1)
    return float(_summed_loss(objective, objective.n_outputs is not None, jnp.asarray(y), raw,
                              index, mask))


@jax.jit
def _predictions(model, X):
    return model.predict_raw(X), model.predict(X)


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtin_fits_predicts_through_its_link_and_lowers_its_loss(name):
    objective, X, y, group, model = _builtin_fit(name)
    _, link, returns = BUILTINS[name]
    n_rows = X.shape[0]
    raw, prediction = map(np.asarray, _predictions(model, X))
    n_outputs = {"softmax": N_CLASSES, "multi_squared_error": 2}.get(name)
    expected_shape = (n_rows,) if n_outputs is None else (n_rows, n_outputs)
    assert raw.shape == prediction.shape == expected_shape
    assert prediction.dtype == np.float32
    assert np.isfinite(prediction).all() and np.isfinite(model.base_score).all()
    np.testing.assert_allclose(prediction, link(raw.astype(np.float64)), rtol=2e-6, atol=1e-7)
    if returns == PROBABILITY:
        assert ((prediction >= 0) & (prediction <= 1)).all()
    elif returns == CLASSES:
        assert ((prediction >= 0) & (prediction <= 1)).all()
        np.testing.assert_allclose(prediction.sum(axis=1), 1.0, rtol=1e-5)
    elif returns == POSITIVE:
        assert (prediction > 0).all()
    else:
        np.testing.assert_array_equal(prediction, raw)
    # The trees lower the training loss below that of the constant start (8 trees at
    # rate 0.1: Tweedie's labels, mostly zeros, lower it least, by about 1%).
    start = np.broadcast_to(np.asarray(model.base_score), (n_rows, model.n_outputs))
    assert _total_loss(objective, y, group, raw) < 0.995 * _total_loss(objective, y, group, start)


def test_every_builtin_is_in_the_shared_list():
    covered = {resolve(name).name.partition("@")[0] for name in BUILTINS}
    families = {"huber", "pseudo_huber", "quantile", "tweedie", "focal", "aft_normal",
                "aft_logistic"}
    assert set(objectives.BUILTIN) | families <= covered


# =======================================================================================
# g and h against closed forms, in float64.


def _row_g_h(objective, y, f, curvature="exact"):
    vector_output = f.ndim == 2 and objective.n_outputs is not None
    fn = jax.jit(row_derivatives(objective.loss, vector_output, curvature, objective.fisher))
    raw = f if vector_output else f[:, None]
    g, h, h_full = fn(jnp.asarray(y), jnp.asarray(raw))
    squeeze = (lambda a: np.asarray(a)) if vector_output else (lambda a: np.asarray(a)[:, 0])
    return squeeze(g), squeeze(h), None if h_full is None else np.asarray(h_full)


def _closed_form_cases(rng, n=64):
    f = rng.normal(scale=2, size=n)
    binary = (rng.random(n) < 0.4).astype(float)
    regression = f + rng.normal(scale=2, size=n)
    counts = rng.poisson(3, size=n).astype(float)
    positive = rng.gamma(2.0, 1.0, size=n)
    amounts = rng.poisson(1, size=n) * rng.gamma(2.0, 1.0, size=n)
    power = 1.5
    delta = 1.3
    r = (regression - f) / delta
    sign = 2 * binary - 1
    return {
        "squared_error": (objectives.squared_error, regression, f, f - regression,
                          np.ones(n)),
        "logistic": (objectives.logistic, binary, f, _sigmoid(f) - binary,
                     _sigmoid(f) * (1 - _sigmoid(f))),
        "logistic_probability_label": (objectives.logistic, rng.random(n), f, None, None),
        "poisson": (objectives.poisson, counts, f, np.exp(f) - counts, np.exp(f)),
        "gamma": (objectives.gamma, positive, f, 1 - positive * np.exp(-f),
                  positive * np.exp(-f)),
        "tweedie": (objectives.tweedie(power), amounts, f,
                    -amounts * np.exp((1 - power) * f) + np.exp((2 - power) * f),
                    -(1 - power) * amounts * np.exp((1 - power) * f)
                    + (2 - power) * np.exp((2 - power) * f)),
        "exponential": (objectives.exponential, binary, f, -sign * np.exp(-sign * f),
                        np.exp(-sign * f)),
        "huber": (objectives.huber(delta), regression, f,
                  np.where(np.abs(r) <= 1, f - regression,
                           delta * np.sign(f - regression)),
                  np.where(np.abs(r) <= 1, 1.0, 0.0)),
        "pseudo_huber": (objectives.pseudo_huber(delta), regression, f,
                         (f - regression) / np.sqrt(1 + r * r), (1 + r * r) ** -1.5),
        "absolute_error": (objectives.absolute_error, regression, f,
                           np.sign(f - regression), np.zeros(n)),
        "quantile@0.9": (objectives.quantile(0.9), regression, f,
                         np.where(regression > f, -0.9, 0.1), np.zeros(n)),
    }


CLOSED_FORM_NAMES = sorted(_closed_form_cases(np.random.default_rng(0)))


@pytest.mark.parametrize("name", CLOSED_FORM_NAMES)
def test_row_g_h_equal_closed_forms_in_float64(name):
    rng = np.random.default_rng(3)
    with jax.enable_x64(True):
        objective, y, f, g_exact, h_exact = _closed_form_cases(rng)[name]
        g, h, _ = _row_g_h(objective, y, f)
    assert g.dtype == h.dtype == np.float64
    if name == "huber":  # both sides of delta are exercised
        assert 5 < int(h_exact.sum()) < len(h_exact) - 5
    if g_exact is None:  # a probability label: the same formulas as 0/1 labels
        g_exact, h_exact = _sigmoid(f) - y, _sigmoid(f) * (1 - _sigmoid(f))
    np.testing.assert_allclose(g, g_exact, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(h, h_exact, rtol=1e-6, atol=1e-12)


def test_vector_output_g_h_equal_closed_forms_in_float64():
    rng = np.random.default_rng(4)
    n = 48
    with jax.enable_x64(True):
        f = rng.normal(scale=2, size=(n, N_CLASSES))
        y = rng.integers(0, N_CLASSES, size=n).astype(float)
        g, h, h_full = _row_g_h(objectives.softmax, y, f, curvature="full")
        targets = rng.normal(size=(n, 2))
        f2 = rng.normal(size=(n, 2))
        g2, h2, _ = _row_g_h(objectives.multi_squared_error, targets, f2)
    p = _softmax(f)
    onehot = np.eye(N_CLASSES)[y.astype(int)]
    np.testing.assert_allclose(g, p - onehot, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(h, p * (1 - p), rtol=1e-6, atol=1e-12)
    full = p[:, :, None] * np.eye(N_CLASSES)[None] - p[:, :, None] * p[:, None, :]
    np.testing.assert_allclose(h_full, full, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(g2, f2 - targets, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(h2, np.ones((n, 2)))


def test_fisher_curvatures_equal_their_closed_forms_in_float64():
    rng = np.random.default_rng(5)
    n, power = 64, 1.3
    with jax.enable_x64(True):
        f = rng.normal(scale=2, size=n)
        _, h_gamma, _ = _row_g_h(objectives.gamma, rng.gamma(2.0, size=n), f, "fisher")
        _, h_tweedie, _ = _row_g_h(objectives.tweedie(power), rng.gamma(1.0, size=n), f,
                                   "fisher")
        _, h_poisson, _ = _row_g_h(objectives.poisson, rng.poisson(2, size=n) * 1.0, f,
                                   "fisher")
    np.testing.assert_allclose(h_gamma, np.ones(n))
    np.testing.assert_allclose(h_tweedie, np.exp((2 - power) * f), rtol=1e-6)
    np.testing.assert_allclose(h_poisson, np.exp(f), rtol=1e-6)


def _central_differences(loss, f, eps_g=1e-6, eps_h=1e-4):
    """(g, h) of a scalar function of one margin, by central differences (float64)."""
    g = (loss(f + eps_g) - loss(f - eps_g)) / (2 * eps_g)
    h = (loss(f + eps_h) - 2 * loss(f) + loss(f - eps_h)) / eps_h**2
    return g, h


@pytest.mark.parametrize("name", ["aft_normal", "aft_logistic@0.7", "focal@2"])
def test_row_g_h_equal_finite_differences_in_float64(name):
    objective = resolve(name)
    rng = np.random.default_rng(6)
    n = 60
    with jax.enable_x64(True):
        f = rng.normal(size=n)
        if name.startswith("aft"):
            time = np.exp(rng.normal(size=n))
            how = np.arange(n) % 3  # observed, right-censored, interval-censored
            y = np.c_[np.where(how == 2, 0.6 * time, time),
                      np.where(how == 0, time, np.where(how == 1, np.inf, 1.8 * time))]
        else:
            y = (rng.random(n) < 0.5).astype(float)
        g, h, _ = _row_g_h(objective, y, f)
        row_loss = jax.jit(jax.vmap(objective.loss))
        g_fd, h_fd = _central_differences(lambda v: np.asarray(row_loss(jnp.asarray(y), v)), f)
    np.testing.assert_allclose(g, g_fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(h, h_fd, rtol=1e-4, atol=1e-6)
    assert np.isfinite(g).all() and np.isfinite(h).all()


def _survival_data(rng, n):
    time = rng.integers(1, 8, size=n).astype(float)  # few distinct times: many ties
    event = (rng.random(n) < 0.6).astype(float)
    return np.c_[time, event], rng.normal(size=n)


@jax.jit
def _cox_checks(y, f):
    """The closed-form curvature, the autodiff Hessian diagonal and gradient, the
    gradient by central differences, and g, h by the path fit takes (one group holding
    every row, curvature "fisher")."""
    mask = jnp.ones(f.shape[0], bool)
    closed = objectives.cox.fisher(y, f, mask)
    autodiff_h = jnp.diagonal(jax.hessian(objectives.cox_loss, argnums=1)(y, f, mask))
    autodiff_g = jax.grad(objectives.cox_loss, argnums=1)(y, f, mask)
    eps = 1e-6
    shifted = jax.vmap(objectives.cox_loss, in_axes=(None, 0, None))
    shifts = eps * jnp.eye(f.shape[0])
    g_fd = (shifted(y, f[None] + shifts, mask) - shifted(y, f[None] - shifts, mask)) / (2 * eps)
    fit_path = group_derivatives(objectives.cox.loss, objectives.cox.curvature,
                                 objectives.cox.fisher)
    g, h, _ = fit_path(y, f[:, None], jnp.arange(f.shape[0])[None], mask[None])
    return closed, autodiff_h, autodiff_g, g_fd, g[:, 0], h[:, 0]


def test_cox_curvature_is_the_exact_hessian_diagonal_in_float64():
    rng = np.random.default_rng(7)
    with jax.enable_x64(True):
        y, f = _survival_data(rng, 40)
        closed, autodiff_h, autodiff_g, g_fd, g, h = map(np.asarray, _cox_checks(y, f))
    assert len(np.unique(y[:, 0])) < 10 and 0 < y[:, 1].mean() < 1  # ties and censoring
    np.testing.assert_allclose(closed, autodiff_h, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(autodiff_g, g_fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g, autodiff_g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, closed, rtol=1e-12, atol=1e-12)
    assert (closed > 0).all()


def _cox_reference(time, event, f):
    """Breslow negative log partial likelihood and its g and Hessian diagonal, by a loop
    over events: risk set R_i = {k: t_k >= t_i}, p_ik = e^{f_k} / sum_{R_i} e^f."""
    loss, g, h = 0.0, np.zeros(len(f)), np.zeros(len(f))
    for i in np.flatnonzero(event):
        at_risk = time >= time[i]
        p = np.exp(f[at_risk]) / np.exp(f[at_risk]).sum()
        loss += np.log(np.exp(f[at_risk]).sum()) - f[i]
        g[at_risk] += p
        g[i] -= 1
        h[at_risk] += p * (1 - p)
    return loss, g, h


@jax.jit
def _cox_loss_g_h(y, f, mask):
    return (objectives.cox_loss(y, f, mask), jax.grad(objectives.cox_loss, argnums=1)(y, f, mask),
            objectives.cox.fisher(y, f, mask))


def test_cox_equals_a_breslow_loop_and_masked_rows_are_dropped():
    rng = np.random.default_rng(8)
    n = 30
    with jax.enable_x64(True):
        y, f = _survival_data(rng, n)
        mask = rng.random(n) < 0.7
        loss, g, h = map(np.asarray, _cox_loss_g_h(y, f, mask))
    kept_loss, kept_g, kept_h = _cox_reference(y[mask, 0], y[mask, 1], f[mask])
    np.testing.assert_allclose(loss, kept_loss, rtol=1e-12)
    np.testing.assert_allclose(g[mask], kept_g, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h[mask], kept_h, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(g[~mask], 0.0)
    np.testing.assert_array_equal(h[~mask], 0.0)


# Ranking: three queries of 5, 3 and 7 rows padded to 7; padding entries point at an
# extra row 15 that belongs to no query, so its g and h must stay exactly 0.
QUERY_SIZES = (5, 3, 7)


def _ranking_layout(rng):
    n_real = sum(QUERY_SIZES)
    orphan = n_real
    width = max(QUERY_SIZES)
    index = np.full((len(QUERY_SIZES), width), orphan, np.int32)
    mask = np.zeros(index.shape, bool)
    start = 0
    for q, size in enumerate(QUERY_SIZES):
        index[q, :size] = np.arange(start, start + size)
        mask[q, :size] = True
        start += size
    y = rng.integers(0, 4, size=n_real + 1).astype(float)
    f = rng.normal(size=n_real + 1)
    return y, f, index, mask


def _lambdarank_reference(y, s, top_k=None, scale=True):
    """One query's LambdaRank pairs by a plain loop in LightGBM's order (its
    ``GetGradientsForOneQuery``): rows sorted by descending score (ties in row order), the
    row at position i < top_k paired with every later row of another grade, weight
    |delta gain x delta discount| / ideal DCG@top_k; then every weight times
    log2(1 + S) / S, S = sum of 2 w rho (``lambdarank_norm``; not with scale=False).
    Returns {(high, low): weight} of row pairs, high the row with the larger grade."""
    n = len(y)
    gain = 2.0**y - 1
    order = np.argsort(-s, kind="stable")
    discount = 1 / np.log2(np.arange(n) + 2.0)
    cut = n if top_k is None else min(top_k, n)
    max_dcg = np.sum(np.sort(gain)[::-1][:cut] / np.log2(np.arange(cut) + 2.0))
    weights = {}
    for i in range(min(n - 1, cut)):
        for j in range(i + 1, n):
            a, b = order[i], order[j]
            if y[a] == y[b]:
                continue
            high, low = (a, b) if y[a] > y[b] else (b, a)
            weights[high, low] = abs((gain[a] - gain[b]) * (discount[i] - discount[j])) / max_dcg
    total = sum(2 * w / (1 + np.exp(s[h] - s[lo])) for (h, lo), w in weights.items())
    if scale and total > 0:
        return {pair: w * np.log2(1 + total) / total for pair, w in weights.items()}
    return weights


def _ranking_loss_reference(name, y, s):
    """One unpadded query's loss by plain NumPy loops."""
    gain = 2.0**y - 1
    if name == "listwise_softmax":
        log_p = s - np.log(np.sum(np.exp(s)))
        return -np.sum(gain / max(gain.sum(), 1e-9) * log_p)
    if name == "pairwise_logistic":
        pairs = {(i, j): 1.0 for i in range(len(y)) for j in range(len(y)) if y[i] > y[j]}
    else:
        pairs = _lambdarank_reference(y, s)
    return sum(w * np.log1p(np.exp(-(s[i] - s[j]))) for (i, j), w in pairs.items())


@functools.partial(jax.jit, static_argnums=0)
def _padded_checks(loss, y, f, index, mask):
    """The summed loss of the padded queries at f, at f shifted by +-eps on each row in
    turn, and (g, h) by group_derivatives."""
    def total(f):
        return jnp.sum(jax.vmap(loss)(y[index], f[index], mask))

    def shifted(eps):
        return jax.vmap(total)(f[None] + eps * jnp.eye(f.shape[0]))

    g, h, _ = group_derivatives(loss)(y, f[:, None], index, mask)
    return total(f), [shifted(e) for e in (1e-6, -1e-6, 1e-4, -1e-4)], g[:, 0], h[:, 0]


@pytest.mark.parametrize("name", ["pairwise_logistic", "lambdarank_ndcg", "listwise_softmax"])
def test_group_loss_and_g_h_equal_references_and_padding_stays_zero(name):
    objective = resolve(name)
    rng = np.random.default_rng(9)
    with jax.enable_x64(True):
        y, f, index, mask = _ranking_layout(rng)
        value, (up, down, up_h, down_h), g, h = _padded_checks(objective.loss, y, f, index,
                                                               mask)
        value, g, h = float(value), np.asarray(g), np.asarray(h)
        g_fd = (np.asarray(up) - np.asarray(down)) / 2e-6
        h_fd = (np.asarray(up_h) - 2 * value + np.asarray(down_h)) / 1e-8
    # The padded loss is the sum of the unpadded queries' losses: padding is inert.
    bounds = np.cumsum((0,) + QUERY_SIZES)
    expected = sum(_ranking_loss_reference(name, y[a:b], f[a:b])
                   for a, b in zip(bounds[:-1], bounds[1:], strict=True))
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    # LambdaRank's weights (its query scale) move with f but are held constant, so its g
    # are the lambdas (test_lambdarank_gradient_is_the_lambdarank_lambdas), not the
    # loss's slope; the other losses' g and h are their slopes.
    if name != "lambdarank_ndcg":
        np.testing.assert_allclose(g, g_fd, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(h, h_fd, rtol=1e-4, atol=1e-6)
    assert np.any(g != 0.0) and np.all(h[:-1] >= 0.0)
    assert g[-1] == 0.0 and h[-1] == 0.0  # the row padding entries point at


def _lambdarank_lambdas(y, s, top_k=None):
    """LambdaRank gradient and curvature of one query (Burges 2010, LightGBM's
    lambdarank): for each pair of ``_lambdarank_reference`` with weight w and rho =
    sigmoid(-(s_high - s_low)), g_high -= w rho, g_low += w rho, and both h get
    w rho (1 - rho)."""
    g, h = np.zeros(len(y)), np.zeros(len(y))
    for (high, low), weight in _lambdarank_reference(y, s, top_k).items():
        rho = 1 / (1 + np.exp(s[high] - s[low]))
        g[high] -= weight * rho
        g[low] += weight * rho
        h[high] += weight * rho * (1 - rho)
        h[low] += weight * rho * (1 - rho)
    return g, h


@pytest.mark.parametrize("top_k", [None, 1, 3])
def test_lambdarank_gradient_is_the_lambdarank_lambdas(top_k):
    """The whole-list loss and ``lambdarank_ndcg@k`` (only pairs reaching the top k)
    against LightGBM's loop; with top_k=3 the 5- and 7-row queries drop pairs."""
    objective = objectives.lambdarank_ndcg if top_k is None else resolve(f"lambdarank_ndcg@{top_k}")
    rng = np.random.default_rng(10)
    with jax.enable_x64(True):
        y, f, index, mask = _ranking_layout(rng)
        fn = jax.jit(group_derivatives(objective.loss, "fisher", objective.fisher))
        g, h, _ = fn(jnp.asarray(y), jnp.asarray(f)[:, None], jnp.asarray(index),
                     jnp.asarray(mask))
    start = 0
    for size in QUERY_SIZES:
        rows = slice(start, start + size)
        g_loop, h_loop = _lambdarank_lambdas(y[rows], f[rows], top_k)
        np.testing.assert_allclose(np.asarray(g)[rows, 0], g_loop, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(np.asarray(h)[rows, 0], h_loop, rtol=1e-10, atol=1e-14)
        start += size


def test_lambdarank_at_k_names_read_back_and_refuse_bad_k():
    """``"lambdarank_ndcg@k"`` is one cached objective per k, its name read back from a
    saved model, ndcg@k its default metric; k must be a whole number >= 1."""
    objective = resolve("lambdarank_ndcg@3")
    assert objective is resolve("lambdarank_ndcg@3")
    assert (objective.name, objective.metric, objective.kind) == ("lambdarank_ndcg@3",
                                                                  "ndcg@3", "group")
    assert objectives.by_name("lambdarank_ndcg@3") is objective
    assert resolve("lambdarank_ndcg") is objectives.lambdarank_ndcg
    for bad, said in (("lambdarank_ndcg@0", "integer >= 1"),
                      ("lambdarank_ndcg@2.5", "cannot read")):
        with pytest.raises(ValueError, match=said):
            resolve(bad)


@pytest.mark.parametrize("s", [[0.4, 0.3, 0.2, 0.1, 0.0], [-2.0, -1.0, 0.0, 1.0, 2.0]])
def test_lambdarank_scales_each_query_to_the_log_of_its_lambdas(s):
    """A query's lambdas, summed over its pairs as 2 w rho, come to log2(1 + S) where S is
    that sum before the scale (XGBoost's and LightGBM's normalisation): a reversed query
    (S = 1.19) is scaled by 0.95, a well-ordered one (S = 0.24) by 1.30."""
    y, s = np.array([0.0, 1.0, 2.0, 3.0, 4.0]), np.array(s)
    rho = 1 / (1 + np.exp(s[:, None] - s[None, :]))
    raw = _lambdarank_reference(y, s, scale=False)
    raw_total = sum(2 * w * rho[i, j] for (i, j), w in raw.items())
    with jax.enable_x64(True):
        weights = np.asarray(_lambdarank_weights(jnp.asarray(y), jnp.asarray(s),
                                                 jnp.ones(5, bool)))
    total = np.sum(2 * weights * rho)
    np.testing.assert_allclose(total, np.log2(1 + raw_total), rtol=1e-12)
    assert abs(total / raw_total - 1) > 0.04


@pytest.mark.parametrize("name", ["pairwise_logistic", "lambdarank_ndcg"])
def test_pairwise_ranking_curvature_is_the_exact_hessian_diagonal(name):
    """The built-in pairwise losses' default curvature is their Hessian diagonal in
    closed form (one pass), equal to autodiff's (M Hessian-vector products)."""
    objective = objectives.BUILTIN[name]
    assert objective.curvature == "fisher"
    rng = np.random.default_rng(12)
    with jax.enable_x64(True):
        y, f, index, mask = _ranking_layout(rng)
        f[:3] = f[3]  # tied scores
        args = (jnp.asarray(y), jnp.asarray(f)[:, None], jnp.asarray(index), jnp.asarray(mask))
        closed = jax.jit(group_derivatives(objective.loss, "fisher", objective.fisher))(*args)
        autodiff = jax.jit(group_derivatives(objective.loss, "exact"))(*args)
    assert float(np.max(np.asarray(autodiff.h))) > 0
    np.testing.assert_allclose(closed.h, autodiff.h, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(closed.g, autodiff.g)


# =======================================================================================
# Zero Hessians: unit curvature for the structure, leaves refreshed to quantiles.


def _weighted_quantile_reference(values, weights, alpha):
    """The smallest value v with (weight of values <= v) >= alpha * total weight."""
    keep = weights > 0
    values, weights = values[keep].astype(np.float64), weights[keep].astype(np.float64)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return values[order][np.searchsorted(cumulative, alpha * cumulative[-1])]


@pytest.mark.parametrize("alpha", [0.1, 0.5, 0.9])
def test_quantile_leaves_equal_a_numpy_weighted_quantile_per_leaf(alpha):
    rng = np.random.default_rng(11)
    n, n_leaves = 300, 8
    residual = np.round(rng.normal(size=n), 2).astype(np.float32)  # rounded: ties
    weight = rng.uniform(0.1, 3.0, size=n).astype(np.float32)
    weight[rng.random(n) < 0.1] = 0.0
    leaf = rng.integers(0, n_leaves - 2, size=n).astype(np.int32)  # leaf 7 stays empty
    leaf[:5] = n_leaves - 2  # leaf 6: rows of weight 0 only
    weight[:5] = 0.0
    values = np.asarray(jax.jit(quantile_leaves, static_argnums=(3, 4))(
        jnp.asarray(residual), jnp.asarray(weight), jnp.asarray(leaf), n_leaves, alpha))
    expected = [_weighted_quantile_reference(residual[leaf == node], weight[leaf == node], alpha)
                for node in range(n_leaves - 2)]
    np.testing.assert_array_equal(values[: n_leaves - 2], np.float32(expected))
    np.testing.assert_array_equal(values[n_leaves - 2:], 0.0)


def test_quantile_fit_covers_its_level_on_held_out_heteroscedastic_data():
    _, X, y, _, model = _builtin_fit("quantile@0.9")  # 2000 rows, 40 trees, rate 0.2
    _, (X_test, y_test, scale) = _heteroscedastic()
    covered = np.asarray(model.predict(X_test)) >= y_test
    assert 0.85 <= covered.mean() <= 0.95, covered.mean()
    # Coverage given the noise level: a constant 0.9-quantile would cover about 82% of
    # the noisier half and 97% of the calmer one.
    noisy = scale > np.median(scale)
    assert 0.85 <= covered[noisy].mean() <= 0.95, covered[noisy].mean()
    assert 0.85 <= covered[~noisy].mean() <= 0.95, covered[~noisy].mean()
    # The first tree's leaves are the learning rate times the 0.9-quantile of the leaf's
    # residuals at the start: set by the refresh, not by the (unit-curvature) Newton step.
    residual = y - np.asarray(model.base_score)[0]
    leaf = np.asarray(model.leaf_index(X))[:, 0]
    leaves = np.unique(leaf)
    expected = [0.2 * _weighted_quantile_reference(residual[leaf == node],
                                                   np.ones((leaf == node).sum()), 0.9)
                for node in leaves]
    np.testing.assert_allclose(model.leaf_value[0, leaves, 0], expected, rtol=1e-5, atol=1e-6)


def test_zero_hessian_builtins_default_to_unit_curvature_with_refresh():
    assert objectives.absolute_error.curvature == "constant"
    assert objectives.absolute_error.leaf_quantile == 0.5
    assert resolve("quantile@0.9").curvature == "constant"
    assert resolve("quantile@0.9").leaf_quantile == 0.9
    assert resolve("huber@2").curvature == "constant"
    assert resolve("huber@2").leaf_quantile is None
    assert objectives.cox.curvature == "fisher"


# =======================================================================================
# Each built-in equals the same loss written by a user.


def _assert_same_model(custom, builtin, atol=1e-5):
    np.testing.assert_array_equal(custom.feature, builtin.feature)
    np.testing.assert_array_equal(custom.threshold, builtin.threshold)
    np.testing.assert_allclose(custom.leaf_value, builtin.leaf_value, rtol=1e-4, atol=atol)
    np.testing.assert_allclose(custom.base_score, builtin.base_score)


def my_poisson(y, f):
    return jnp.exp(f) - y * f


def my_softmax(y, f):
    log_p = f - jnp.log(jnp.sum(jnp.exp(f)))
    return -jnp.sum(jax.nn.one_hot(y.astype(jnp.int32), f.shape[0]) * log_p)


def my_lambdarank(y, f, mask):
    """LambdaRank-NDCG written from the paper (ranks by counting, ties by position), each
    query's weights scaled by log2(1 + S) / S as XGBoost and LightGBM do."""
    position = jnp.arange(f.shape[0])
    score = jax.lax.stop_gradient(jnp.where(mask, f, -jnp.inf))
    above = (score[None, :] > score[:, None]) | ((score[None, :] == score[:, None])
                                                 & (position[None, :] < position[:, None]))
    discount = 1.0 / jnp.log2(jnp.sum(above, axis=1) + 2.0)
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    ideal_dcg = jnp.sum(-jnp.sort(-gain) / jnp.log2(position + 2.0))
    weight = jnp.abs(jnp.subtract.outer(gain, gain) * jnp.subtract.outer(discount, discount))
    pair = mask[:, None] & mask[None, :] & (y[:, None] > y[None, :])
    weight = jnp.where(pair, weight, 0.0) / ideal_dcg
    lambdas = 2.0 * jnp.sum(weight * jax.nn.sigmoid(-(f[:, None] - f[None, :])))
    scale = jax.lax.stop_gradient(jnp.where(lambdas > 0, jnp.log2(1.0 + lambdas) / lambdas, 1.0))
    logistic = jax.nn.softplus(-(f[:, None] - f[None, :]))
    return jnp.sum(weight * scale * logistic)


@pytest.mark.parametrize("name, custom_loss", [("poisson", my_poisson),
                                               ("softmax", my_softmax),
                                               ("lambdarank_ndcg", my_lambdarank)])
def test_builtin_equals_its_user_written_twin(name, custom_loss):
    objective, X, y, group, builtin = _builtin_fit(name)
    n_outputs = N_CLASSES if name == "softmax" else None
    # A built-in's closed-form curvature ("fisher") is the twin's autodiff diagonal.
    hessian = "exact" if objective.curvature == "fisher" else objective.curvature
    custom = jaxgbt.fit(custom_loss, X, y, group=group, n_outputs=n_outputs,
                        hessian=hessian, base_score=builtin.base_score, **SMALL)
    assert custom.objective.name == f"custom:{custom_loss.__name__}"
    _assert_same_model(custom, builtin)


def test_structured_labels_exposure_offsets_the_margin():
    """Counts over exposures: loss(y, f) with y = {"count", "exposure"} and rate e^f.
    With exposure 1 it is Poisson; with exposure 2 the same counts mean half the rate:
    the same trees on a margin lower by log 2."""
    _, X, counts, _, builtin = _builtin_fit("poisson")

    def poisson_with_exposure(y, f):
        mean = y["exposure"] * jnp.exp(f)
        return mean - y["count"] * jnp.log(mean)

    ones = np.ones_like(counts)
    once = jaxgbt.fit(poisson_with_exposure, X, {"count": counts, "exposure": ones}, **SMALL)
    twice = jaxgbt.fit(poisson_with_exposure, X, {"count": counts, "exposure": 2 * ones},
                       **SMALL)
    # Exposure 1: built-in Poisson (its start is the log mean; here Newton steps find it).
    np.testing.assert_allclose(once.base_score, builtin.base_score, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(once.feature, builtin.feature)
    np.testing.assert_allclose(once.leaf_value, builtin.leaf_value, atol=1e-5)
    np.testing.assert_allclose(twice.base_score, once.base_score - np.log(2), atol=1e-5)
    np.testing.assert_array_equal(twice.feature, once.feature)
    np.testing.assert_allclose(twice.leaf_value, once.leaf_value, atol=1e-5)
    rate_once = np.exp(np.asarray(once.predict_raw(X)))
    rate_twice = np.exp(np.asarray(twice.predict_raw(X)))
    np.testing.assert_allclose(rate_twice, rate_once / 2, rtol=1e-4)


# =======================================================================================
# Curvature options.


def test_constant_curvature_leaves_are_minus_gradient_sum_over_count_plus_l2():
    # Huber (delta 1) with unit curvature: g = clip(f - y, -1, 1), h = 1 per row. The
    # exact Hessian would be 0 in the tails: Newton leaves would be -G / (n_inside + l2).
    objective, X, y, _, _ = _builtin_fit("huber")
    l2 = 3.0
    model = jaxgbt.fit(objective, X, y, hessian="constant", l2=l2, learning_rate=1.0,
                       **dict(SMALL, n_trees=1))
    g = np.clip(np.float64(model.base_score[0]) - y, -1.0, 1.0)
    assert (np.abs(g) == 1).mean() > 0.3  # many rows in the linear tails
    leaf = np.asarray(model.leaf_index(X))[:, 0]
    assert len(np.unique(leaf)) > 2  # a real split
    for node in range(2 ** SMALL["depth"]):
        expected = -g[leaf == node].sum() / ((leaf == node).sum() + l2)
        np.testing.assert_allclose(model.leaf_value[0, node, 0], expected, rtol=1e-5, atol=1e-7)


def test_full_softmax_hessian_sets_newton_leaves_and_lowers_the_loss():
    objective, X, y, _, diagonal = _builtin_fit("softmax")
    full = jaxgbt.fit("softmax", X, y, hessian="full", **SMALL)
    np.testing.assert_allclose(full.base_score, diagonal.base_score)
    assert not np.allclose(full.leaf_value, diagonal.leaf_value, atol=1e-3)
    start = np.broadcast_to(np.asarray(full.base_score), (len(y), N_CLASSES))
    assert (_total_loss(objective, y, None, full.predict_raw(X))
            < 0.99 * _total_loss(objective, y, None, start))
    # The first tree's leaves: -(sum of the K x K Hessians + l2 I)^-1 (sum of g).
    p = _softmax(np.broadcast_to(np.float64(full.base_score), (len(y), N_CLASSES)))
    g = p - np.eye(N_CLASSES)[y.astype(int)]
    H = p[:, :, None] * np.eye(N_CLASSES) - p[:, :, None] * p[:, None, :]
    leaf = np.asarray(full.leaf_index(X))[:, 0]
    for node in np.unique(leaf):
        rows = leaf == node
        expected = -np.linalg.solve(H[rows].sum(0) + 1.0 * np.eye(N_CLASSES), g[rows].sum(0))
        np.testing.assert_allclose(full.leaf_value[0, node], 0.1 * expected, rtol=1e-3,
                                   atol=1e-6)


def test_hessian_option_errors(regression_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="hessian='fisher' needs the objective's expected"):
        jaxgbt.fit(my_poisson, X, np.abs(y), hessian="fisher", **SMALL)
    with pytest.raises(ValueError, match="hessian='full' is for vector-output losses"):
        jaxgbt.fit("squared_error", X, y, hessian="full", **SMALL)
    with pytest.raises(ValueError, match="hessian='newton': use one of exact, full"):
        jaxgbt.fit("squared_error", X, y, hessian="newton", **SMALL)
    with pytest.raises(ValueError, match="hessian_floor=-1"):
        jaxgbt.fit("squared_error", X, y, hessian_floor=-1.0, **SMALL)


def test_hessian_floor_raises_small_curvature():
    # Poisson from a margin of log(1e-3): g = 1e-3 - y, h = 1e-3 on every row. With l2 = 0
    # the first tree's leaves are -G / H; a floor of 1 makes H the row count instead.
    objective, X, counts, _, _ = _builtin_fit("poisson")
    settings = dict(SMALL, n_trees=1, l2=0.0, min_child_weight=0.0, base_score=np.log(1e-3))
    free = jaxgbt.fit(objective, X, counts, **settings)
    floored = jaxgbt.fit(objective, X, counts, hessian_floor=1.0, **settings)
    # The gains scale by the same factor, so the splits are the same; the leaves are
    # 1000 times smaller.
    np.testing.assert_array_equal(floored.feature, free.feature)
    np.testing.assert_array_equal(floored.threshold, free.threshold)
    np.testing.assert_allclose(floored.leaf_value, 1e-3 * free.leaf_value, rtol=1e-4,
                               atol=1e-9)
    assert np.abs(free.leaf_value).max() > 10.0  # unfloored: -G / H = 1000 mean(y - 1e-3)


# =======================================================================================
# Input errors specific to objectives.


def _ranking_data():
    X, _ = make_regression()
    y, group = _labels("relevance", X)
    return X, y, group


@pytest.mark.parametrize("loss, y_of, message", [
    ("logistic", lambda y: np.where(y > 0, 2.0, 0.0), r"domain of loss 'logistic'.*\[0, 1\]"),
    ("poisson", lambda y: y, "domain of loss 'poisson'.*non-negative counts"),
    ("softmax", lambda y: np.abs(y), "loss 'softmax' needs the class indices 0, 1"),
    ("gamma", lambda y: np.abs(y) * (np.arange(len(y)) % 5 > 0), "positive values"),
    ("aft", lambda y: np.c_[np.exp(y) + 1, np.exp(y)], "0 < lower <= upper"),
    ("cox", lambda y: np.c_[np.exp(y), np.full(len(y), 2.0)], "event 0 or 1"),
    ("multi_squared_error", lambda y: y, r"2-D label array \(N, K\)"),
    ("softmax", lambda y: np.zeros_like(y), "at least 2 classes"),
])
def test_labels_outside_the_objective_domain_are_rejected(regression_data, loss, y_of,
                                                          message):
    X, y = regression_data
    with pytest.raises(ValueError, match=message):
        jaxgbt.fit(loss, X, y_of(y), **SMALL)


def test_group_errors():
    X, y, group = _ranking_data()
    with pytest.raises(ValueError, match="ranks rows within queries: pass group="):
        jaxgbt.fit("lambdarank_ndcg", X, y, **SMALL)
    with pytest.raises(ValueError, match="group= is for ranking losses.*'squared_error'"):
        jaxgbt.fit("squared_error", X, y, group=group, **SMALL)
    with pytest.raises(ValueError, match="group= does not apply to loss 'cox'"):
        jaxgbt.fit("cox", X, np.c_[np.exp(y) + 1, y > 1], group=group, **SMALL)
    split = group.copy()
    split[:3] = group[-1]  # the last query's id also on the first rows
    with pytest.raises(ValueError, match="group ids are not contiguous"):
        jaxgbt.fit("pairwise_logistic", X, y, group=split, **SMALL)
    with pytest.raises(ValueError, match=r"group must have shape \(256,\)"):
        jaxgbt.fit("listwise_softmax", X, y, group=group[:-1], **SMALL)
    with pytest.raises(ValueError, match="group must hold integer query ids"):
        jaxgbt.fit("listwise_softmax", X, y, group=group + 0.5, **SMALL)
    with pytest.raises(ValueError, match="n_outputs applies to per-row losses"):
        jaxgbt.fit("lambdarank_ndcg", X, y, group=group, n_outputs=2, **SMALL)


@pytest.mark.parametrize("name, message", [
    ("quantile@1.5", r"loss='quantile@1.5': quantile alpha=1.5 must lie in \(0, 1\)"),
    ("tweedie@2.5", r"tweedie power=2.5 must lie in \(1, 2\)"),
    ("aft_weibull", "loss='aft_weibull' is not a built-in objective.*aft_logistic@sigma"),
    ("quantile@high", r"loss='quantile@high': cannot read 'high'; write it as quantile@alpha"),
    ("quantile@", r"loss='quantile@': cannot read ''"),
    ("aftermath", "loss='aftermath' is not a built-in objective"),
])
def test_bad_objective_parameters_are_rejected(name, message):
    with pytest.raises(ValueError, match=message):
        resolve(name)


# =======================================================================================
# Objectives as values: callable, the facts other modules read, found again by name.

_ROWS = 4  # rows of the one query (or data set) that group and data-set losses see
# Arguments of one call of the loss, by kind of labels (see BUILTINS).
_CALL_ARGS = {
    "regression": (1.0, 0.3), "heteroscedastic": (1.0, 0.3), "binary": (1.0, 0.3),
    "counts": (3.0, 0.3), "positive": (2.0, 0.3), "tweedie": (2.0, 0.3),
    "classes": (2.0, [0.1, -0.3, 0.4]), "multi": ([1.0, -1.0], [0.5, 0.2]),
    "interval": ([1.5, 2.5], 0.2),
    "survival": ([[2.0, 1.0], [1.0, 0.0], [3.0, 1.0], [1.5, 1.0]], [0.3, -0.2, 0.1, 0.5],
                 [True, True, True, False]),
    "relevance": ([2.0, 0.0, 1.0, 0.0], [0.3, -0.2, 0.1, 0.5], [True, True, True, False]),
}


@pytest.mark.parametrize("name", list(BUILTINS))
def test_builtin_objective_is_callable_and_calls_its_loss(name):
    objective = resolve(name)
    args = [jnp.asarray(a) for a in _CALL_ARGS[BUILTINS[name][0]]]
    value = objective(*args)
    assert value.shape == ()
    np.testing.assert_array_equal(value, objective.loss(*args))
    if objective.kind == "row":  # vmap and grad take the objective itself
        y, f = (jnp.stack([a, a]) for a in args)
        np.testing.assert_array_equal(jax.vmap(objective)(y, f), jax.vmap(objective.loss)(y, f))
        np.testing.assert_array_equal(jax.grad(objective, argnums=1)(*args),
                                      jax.grad(objective.loss, argnums=1)(*args))


def test_objective_call_example_and_loaded_custom_objective():
    np.testing.assert_allclose(objectives.logistic(1.0, 0.0), np.log(2.0), rtol=1e-6)
    loaded = objectives.Objective("custom:my_loss", loss=None)  # as load() rebuilds it
    with pytest.raises(TypeError, match="'custom:my_loss' has no loss function"):
        loaded(1.0, 0.0)


# name -> (classification, min_classes, metric): what cv, fit and the evaluator read.
FACTS = {
    "squared_error": (False, None, "rmse"),
    "absolute_error": (False, None, "mae"),
    "huber": (False, None, "mae"),
    "pseudo_huber": (False, None, "mae"),
    "quantile@0.9": (False, None, "pinball@0.9"),
    "logistic": (True, None, "logloss"),
    "softmax": (True, 2, "multi_logloss"),
    "multi_squared_error": (False, None, "rmse"),
    "poisson": (False, None, "poisson_deviance"),
    "gamma": (False, None, "gamma_deviance"),
    "tweedie@1.5": (False, None, "tweedie@1.5"),
    "exponential": (True, None, "logloss"),
    "focal": (True, None, "logloss"),
    "aft_normal": (False, None, None),
    "aft_logistic": (False, None, None),
    "cox": (False, None, "concordance_index"),
    "pairwise_logistic": (False, None, "ndcg@10"),
    "lambdarank_ndcg": (False, None, "ndcg@10"),
    "listwise_softmax": (False, None, "ndcg@10"),
    # Other parameters of the families: the value goes into the metric's name.
    "quantile": (False, None, "pinball@0.5"),
    "quantile@0.25": (False, None, "pinball@0.25"),
    "tweedie@1.2": (False, None, "tweedie@1.2"),
    "huber@2": (False, None, "mae"),
    "focal@0.5": (True, None, "logloss"),
    "aft_logistic@2": (False, None, None),
}


@pytest.mark.parametrize("name", list(FACTS))
def test_builtin_objective_facts(name):
    objective = resolve(name)
    classification, min_classes, metric = FACTS[name]
    assert objective.custom is False
    assert objective.classification is classification
    assert objective.min_classes == min_classes
    assert objective.metric == metric
    chosen = default_metric(objective, objective.n_outputs is not None, objective.kind == "group")
    if metric is None:  # judged by its own loss, or by ndcg@10 with group=
        assert chosen.name == "loss" and chosen.on_margin
        assert default_metric(objective, False, grouped=True) is metrics.get("ndcg@10")
    else:
        assert chosen is metrics.get(metric)


def test_every_builtin_has_its_facts_checked():
    assert set(BUILTINS) <= set(FACTS)


def test_custom_loss_facts():
    def my_loss(y, f):
        return (f - y) ** 2

    custom = resolve(my_loss)
    assert (custom.name, custom.custom, custom.classification, custom.min_classes,
            custom.metric) == ("custom:my_loss", True, False, None, None)
    assert resolve(my_loss, link=jnp.exp).custom  # a link keeps every other fact
    assert resolve(custom) is custom  # fit_many and cv hand fit the resolved objective
    # An Objective built by hand is taken as given: not "custom" (a per-row loss).
    mine = objectives.Objective("mine", my_loss, classification=True, metric="auc")
    assert resolve(mine) is mine and not mine.custom
    assert default_metric(mine, False, False) is metrics.auc
    linked = resolve("logistic", link=jnp.exp)
    assert linked.link is jnp.exp and linked.classification and linked.metric == "logloss"
    assert default_metric(custom, False, False).name == "loss"
    assert default_metric(custom, False, True) is metrics.get("ndcg@10")


def test_objective_stays_a_hashable_tuple_and_is_found_again_by_name():
    q = resolve("quantile@0.9")
    assert q is objectives.quantile(0.9) and q == objectives.quantile(0.9)
    assert hash(q) == hash(objectives.quantile(0.9))
    moved = q._replace(link=jnp.exp)
    assert moved != q and moved.metric == q.metric and moved.leaf_quantile == 0.9
    assert isinstance(q, tuple) and len(q) == len(objectives.Objective._fields)

    @functools.partial(jax.jit, static_argnums=0)
    def total(objective, y, f):
        return jnp.sum(jax.vmap(objective)(y, f))

    y, f = jnp.array([0.0, 1.0, 1.0]), jnp.array([0.3, -1.0, 2.0])
    np.testing.assert_allclose(total(objectives.logistic, y, f),
                               jnp.sum(jax.vmap(logistic_loss)(y, f)), rtol=1e-6)
    total(q, y, f)
    total(resolve("logistic"), y, f)
    assert total._cache_size() == 2  # equal objectives share one compiled program
    # A saved model stores the name; loading finds the very same object again.
    for name in list(BUILTINS) + list(FACTS):
        objective = resolve(name)
        assert objectives.by_name(objective.name) is objective


def test_bare_family_names_are_their_default_value():
    assert resolve("quantile") is resolve("quantile@0.5") is objectives.quantile(0.5)
    assert resolve("aft") is resolve("aft_normal@1") is objectives.aft("normal", 1.0)
    assert objectives.by_name("aftermath") is None  # no longer an AFT by its prefix
    assert objectives.by_name("quantile@") is None


# =======================================================================================
# Regressions: starts, parameters and label domains that were once wrong.


def test_softmax_start_is_the_log_class_frequencies():
    X, _ = make_regression()
    y = np.random.default_rng(14).choice(N_CLASSES, size=len(X), p=[0.6, 0.3, 0.1])
    model = jaxgbt.fit("softmax", X, y, **SMALL)
    frequencies = np.bincount(y) / len(y)
    np.testing.assert_allclose(jax.nn.softmax(model.base_score), frequencies, atol=2e-3)


def test_custom_poisson_start_is_the_log_mean_for_large_counts():
    counts = np.random.default_rng(13).poisson(20.0, size=256).astype(np.float32)
    start = newton_constant(my_poisson, False, jnp.asarray(counts), jnp.ones(256), 1)
    np.testing.assert_allclose(start, [np.log(counts.mean())], rtol=1e-4)


@pytest.mark.parametrize("name", ["huber@0", "huber@-1", "pseudo_huber@0", "focal@-1"])
def test_nonpositive_objective_parameters_are_rejected(name):
    with pytest.raises(ValueError, match="delta|gamma"):
        resolve(name)


def test_aft_infinite_lower_bound_is_rejected(regression_data):
    _, y = regression_data
    bounds = np.c_[np.exp(y), np.exp(y)]
    bounds[0] = np.inf
    with pytest.raises(ValueError, match="lower"):
        check_y(bounds, len(y), resolve("aft"))  # the label check fit runs first
