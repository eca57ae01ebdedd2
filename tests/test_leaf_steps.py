"""Several Newton steps per leaf value (``leaf_newton_steps``): each leaf's value after k
steps equals k float64 Newton steps on that leaf's rows, with the derivatives taken again
after each step, and enough steps reach the leaf's regularised minimum."""

import numpy as np
import pytest
from conftest import N_FEATURES, N_ROWS

import jaxgbt

N_CLASSES = 3
STEPS = 6
L1, L2 = 0.5, 1.0


def _logistic(y, f):
    p = 1 / (1 + np.exp(-f[:, 0]))
    return (p - y)[:, None], (p * (1 - p))[:, None, None]


def _poisson(y, f):
    mu = np.exp(f[:, 0])
    return (mu - y)[:, None], mu[:, None, None]


def _softmax(y, f):
    p = np.exp(f - f.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    return p - np.eye(N_CLASSES)[y.astype(int)], (p[:, :, None] * np.eye(N_CLASSES)
                                                   - p[:, :, None] * p[:, None, :])


def _labels(loss, score, rng):
    if loss == "logistic":
        return (score + rng.normal(size=score.shape) > 0).astype(np.float32)
    if loss == "poisson":
        return rng.poisson(np.exp(0.5 * score)).astype(np.float32)
    return np.digitize(score + 0.5 * rng.normal(size=score.shape), [-0.5, 0.5]).astype(
        np.float32)


def _soft_threshold(x, t):
    return np.sign(x) * np.maximum(np.abs(x) - t, 0.0)


def _reference_steps(derivatives, y, weight, start, n_steps, l1, diagonal):
    """float64: a leaf's value after n_steps Newton steps from 0, each on the weighted
    sums of the derivatives at ``start`` f64[K] moved by the value so far."""
    value = np.zeros(start.shape[0])
    for _ in range(n_steps):
        g, h = derivatives(y, np.broadcast_to(start + value, (y.shape[0], start.shape[0])))
        G = (weight[:, None] * g).sum(axis=0)
        H = (weight[:, None, None] * h).sum(axis=0)
        if diagonal:
            H = np.diag(np.diag(H))
        value = -np.linalg.solve(H + L2 * np.eye(len(G)), _soft_threshold(G - H @ value, l1))
    return value


@pytest.mark.parametrize(("loss", "derivatives", "hessian", "l1"), [
    ("logistic", _logistic, None, L1),
    ("poisson", _poisson, None, 0.0),
    ("softmax", _softmax, "full", 0.0),
])
def test_each_leaf_takes_the_float64_newton_steps_to_its_minimum(loss, derivatives,
                                                                  hessian, l1):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    y = _labels(loss, X[:, 0] - X[:, 1], rng)
    weight = rng.uniform(0.5, 2.0, size=N_ROWS).astype(np.float32)
    one_tree = dict(n_trees=1, depth=3, n_bins=16, learning_rate=1.0, l2=L2, l1=l1,
                    random_strength=0.0, sample_weight=weight, hessian=hessian)
    model = jaxgbt.fit(loss, X, y, leaf_newton_steps=STEPS, **one_tree)
    leaf = np.asarray(model.leaf_index(X))[:, 0]
    values = np.asarray(model.leaf_value, np.float64).reshape(-1, 2**3, model.n_outputs)[0]
    start = np.asarray(model.base_score, np.float64)
    w64 = weight.astype(np.float64)
    for node in np.unique(leaf):
        rows = leaf == node
        expected = _reference_steps(derivatives, y[rows], w64[rows], start, STEPS, l1,
                                    diagonal=hessian is None)
        np.testing.assert_allclose(values[node], expected, rtol=2e-4, atol=2e-5,
                                   err_msg=f"leaf {node}")
        # converged: the regularised objective's gradient is 0 there (sign of w for l1)
        g, _ = derivatives(y[rows], np.broadcast_to(start + expected,
                                                    (rows.sum(), len(start))))
        optimality = (w64[rows, None] * g).sum(axis=0) + L2 * expected + l1 * np.sign(expected)
        np.testing.assert_allclose(optimality, 0.0, atol=1e-4 * rows.sum())
    # one step stops short of that minimum where the curvature changes along the step
    single = jaxgbt.fit(loss, X, y, **one_tree)
    assert not np.allclose(np.asarray(single.leaf_value), np.asarray(model.leaf_value),
                           rtol=1e-3, atol=1e-4)


def test_steps_are_refused_below_one_and_for_quantile_leaves():
    X, y = np.zeros((8, 2), np.float32), np.zeros(8, np.float32)
    with pytest.raises(ValueError, match="leaf_newton_steps=0 is out of range"):
        jaxgbt.fit("logistic", X, y, leaf_newton_steps=0)
    with pytest.raises(TypeError, match="leaf_newton_steps must be an integer"):
        jaxgbt.fit("logistic", X, y, leaf_newton_steps=2.5)
    with pytest.raises(ValueError, match="quantiles of the residuals"):
        jaxgbt.fit("absolute_error", X, y, leaf_newton_steps=3)
