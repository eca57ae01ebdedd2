"""max_delta_step (XGBoost's and LightGBM's): every Newton leaf value held to [-d, d],
and splits scored by the loss change at the held values, against a float64 reference
found by minimising the leaf's regularised quadratic directly."""

import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import MODEL_ARRAYS, SMALL, assert_same_model, assert_same_numbers

import jaxgbt
import jaxgbt.core.split as split
from jaxgbt import spec
from jaxgbt.core.split import SplitParams

L2, L1, STEP = 1.0, 0.5, 0.3


def _params(max_delta_step=STEP, l2=L2, l1=L1):
    return SplitParams(*(jnp.float32(v) for v in (l2, l1, 0.0, 0.0)),
                       max_delta_step=None if max_delta_step is None
                       else jnp.float32(max_delta_step))


def _best_bounded(G: float, H: float, l2: float, l1: float, bound: float) -> tuple[float, float]:
    """(w, score): the w in [-bound, bound] that minimises G w + (H + l2) w^2 / 2 + l1 |w|,
    found on a fine grid refined around its best point (no closed form used), and the
    score -2 times that minimum, the units of the gain T(G)^2 / (H + l2)."""
    def objective(w):
        return G * w + 0.5 * (H + l2) * w * w + l1 * np.abs(w)

    grid = np.linspace(-bound, bound, 200_001)
    w = grid[np.argmin(objective(grid))]
    fine = np.clip(np.linspace(w - 1e-5, w + 1e-5, 20_001), -bound, bound)
    w = fine[np.argmin(objective(fine))]
    return w, -2.0 * objective(w)


def _bounded_level_gains(hist: np.ndarray, bound: float) -> tuple[np.ndarray, np.ndarray]:
    """f64[F, B - 1, 2] gains of a level whose leaves are held to [-bound, bound], and
    the cosine scores sum(-w T(G)) / sqrt(sum(w^2 H)) at the held w, from the reference's
    candidates and children."""
    K = hist.shape[3] // 2
    gains = np.zeros((hist.shape[0], hist.shape[2] - 1, 2))
    cosine = np.zeros_like(gains)

    def held(G, H):
        w = -reference.soft_threshold(G, L1) / (H + L2)
        w = min(max(w, -bound), bound)
        T = reference.soft_threshold(G, L1)
        return w, -(2 * T * w + (H + L2) * w * w), -w * T, w * w * H

    for f, b, missing_right in reference._candidates(hist):
        total = numerator = denominator = 0.0
        for n in range(hist.shape[1]):
            parent = reference._sum_bins(hist[f, n], range(hist.shape[2]))
            for k in range(K):
                total -= held(parent[k], parent[K + k])[1]
            for child in reference._children(hist[f, n], b, missing_right):
                for k in range(K):
                    _, score, num, den = held(child[k], child[K + k])
                    total += score
                    numerator += num
                    denominator += den
        gains[f, b, missing_right] = total
        cosine[f, b, missing_right] = numerator / np.sqrt(denominator) if denominator else 0.0
    return gains, cosine


def test_held_leaves_and_scores_match_the_bounded_minimum():
    rng = np.random.default_rng(0)
    G = rng.normal(scale=4.0, size=40)
    H = rng.uniform(0.0, 3.0, size=40)
    got_w = np.asarray(split.leaf_weight(jnp.asarray(G, jnp.float32), jnp.asarray(H, jnp.float32),
                                         _params()))
    got_score = [float(split._score_by_output(jnp.asarray([[g], [h]], jnp.float32), _params())[0])
                 for g, h in zip(G, H, strict=True)]
    expected = [_best_bounded(g, h, L2, L1, STEP) for g, h in zip(G, H, strict=True)]
    np.testing.assert_allclose(got_w, [w for w, _ in expected], atol=1e-5)
    np.testing.assert_allclose(got_score, [s for _, s in expected], rtol=1e-4, atol=1e-5)
    held = np.abs(got_w) >= STEP - 1e-6
    assert 5 < held.sum() < 35  # both kinds of leaf are in the test
    # Unheld, the score is the gain's own T(G)^2 / (H + l2).
    free = [reference.score([g], [h], L2, L1) for g, h in zip(G, H, strict=True)]
    np.testing.assert_allclose(np.array(got_score)[~held], np.array(free)[~held], rtol=1e-4)


def test_level_gains_and_cosine_scores_match_the_reference():
    rng = np.random.default_rng(1)
    n_rows, n_bins = 200, 6
    bins = rng.integers(0, n_bins, (3, n_rows))
    node = rng.integers(0, 2, n_rows)
    target = 3.0 * (bins[0] > 2) + rng.normal(size=n_rows)
    gh = np.column_stack([-target, np.full(n_rows, 0.4)])  # large gradients, small curvature
    hist = reference.histogram(bins, node, gh, 2, n_bins)
    gains, _, cosine = split.level_gains_and_parent(jnp.asarray(hist, jnp.float32), _params(),
                                                    cosine=True)
    expected_gains, expected_cosine = _bounded_level_gains(hist, STEP)
    np.testing.assert_allclose(np.asarray(gains), expected_gains, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.asarray(cosine), expected_cosine, rtol=1e-4, atol=1e-4)
    free = reference.level_gains(hist, L2, L1, 0.0)
    assert not np.allclose(free, expected_gains, rtol=1e-2)  # the bound changes the gains


def _heavy_counts(seed=0, n_rows=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3)).astype(np.float32)
    y = rng.poisson(np.exp(0.5 * X[:, 0])).astype(np.float32)
    y[rng.random(n_rows) < 0.03] *= 30  # a few counts far above the rest
    return X, y


@pytest.mark.parametrize("settings", [
    {}, {"grow_policy": "depthwise"}, {"grow_policy": "lossguide", "max_leaves": 5},
    {"boosting": "ordered"}, {"leaf_newton_steps": 3}, {"score_function": "cosine"}],
    ids=["oblivious", "depthwise", "lossguide", "ordered", "newton_3", "cosine"])
def test_every_leaf_of_a_fit_is_held(settings):
    X, y = _heavy_counts()
    kwargs = dict(SMALL, learning_rate=0.1, **settings)
    held = jaxgbt.fit("poisson", X, y, max_delta_step=0.2, **kwargs)
    assert np.abs(np.asarray(held.leaf_value)).max() <= 0.1 * 0.2 * (1 + 1e-6)
    free = jaxgbt.fit("poisson", X, y, **kwargs)
    assert np.abs(np.asarray(free.leaf_value)).max() > 0.1 * 0.2 * 2  # the bound binds


def test_the_full_hessian_leaves_are_held():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(240, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int32) + (X[:, 1] > 0.5)
    model = jaxgbt.fit("softmax", X, y, hessian="full", max_delta_step=0.3, **SMALL)
    assert np.abs(np.asarray(model.leaf_value)).max() <= 0.1 * 0.3 * (1 + 1e-6)


def test_off_at_zero_with_no_clipping_in_the_program():
    at_zero = spec.boost_params(0.1, 1.0, 0.0, 0.0, 1.0, 0.0, 0, dict.fromkeys(spec.RATES, 0.5),
                                1.0, 1.0, max_delta_step=0)
    assert at_zero.split.max_delta_step is None
    X, y = _heavy_counts()
    assert_same_model(jaxgbt.fit("poisson", X, y, **SMALL),
                      jaxgbt.fit("poisson", X, y, max_delta_step=0.0, **SMALL))


def test_a_sweep_holds_each_member_to_its_own_bound_and_0_is_off():
    X, y = _heavy_counts()
    models = jaxgbt.fit_many("poisson", X, y, {"max_delta_step": [0.0, 0.2]}, **SMALL)
    off, plain = models[0], jaxgbt.fit("poisson", X, y, **SMALL)
    for field in MODEL_ARRAYS:
        if field != "split_gain":
            assert_same_numbers(getattr(off, field), getattr(plain, field), err_msg=field)
    # The same splits and leaves; the gains they record agree to float32 rounding only:
    # on an AMD EPYC with AVX-512 XLA:CPU rounded the sweep's gains (the held and the
    # free terms, one chosen per member) otherwise than the plain fit's (relative
    # 1.2e-5), where an AVX2 processor gave the same bits.
    np.testing.assert_allclose(off.split_gain, plain.split_gain, rtol=1e-5, atol=1e-5)
    held = models[1]
    np.testing.assert_allclose(np.asarray(held.leaf_value), np.asarray(
        jaxgbt.fit("poisson", X, y, max_delta_step=0.2, **SMALL).leaf_value), rtol=1e-5,
        atol=1e-7)


def test_a_negative_value_is_refused_by_name():
    X, y = _heavy_counts()
    with pytest.raises(ValueError, match="max_delta_step"):
        jaxgbt.fit("poisson", X, y, max_delta_step=-0.5, **SMALL)
