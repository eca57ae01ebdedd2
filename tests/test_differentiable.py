"""Tests for jaxgbt.differentiable: gradients, soft trees, fine-tuning."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import SMALL, make_binary, make_regression

import jaxgbt
from jaxgbt import differentiable as dj


@pytest.fixture(scope="module")
def regression_model():
    X, y = make_regression()
    return jaxgbt.fit("squared_error", X, y, **SMALL), X, y


@pytest.fixture(scope="module")
def binary_model():
    X, y = make_binary(n_rows=768)
    fit, valid, test = np.split(np.arange(len(y)), [256, 512])
    model = jaxgbt.fit("logistic", X[fit], y[fit], **SMALL)
    return model, (X[fit], y[fit]), (X[valid], y[valid]), (X[test], y[test])


def soft_reference(model, X, temperature):
    """Float64 NumPy soft predictions: every leaf's path probability, written out."""
    feature, threshold = np.asarray(model.feature), np.asarray(model.threshold, np.float64)
    default_left = np.asarray(model.default_left)
    leaf_value = np.asarray(model.leaf_value, np.float64)
    X = np.asarray(X, np.float64)
    T, D = feature.shape
    raw = np.tile(np.asarray(model.base_score, np.float64), (len(X), 1))
    for t in range(T):
        for leaf in range(2**D):
            weight = np.ones(len(X))
            for d in range(D):
                goes_right = (leaf >> (D - 1 - d)) & 1
                x = X[:, feature[t, d]]
                p_right = np.where(np.isnan(x), (~default_left[t, d]).astype(float),
                                   1 / (1 + np.exp(-(np.nan_to_num(x) - threshold[t, d])
                                                   / temperature)))
                weight = weight * (p_right if goes_right else 1 - p_right)
            raw += weight[:, None] * leaf_value[t, leaf][None, :]
    return raw[:, 0]


# Gradients of the hard model -------------------------------------------------------------


def test_gradient_wrt_leaves_matches_finite_differences(regression_model):
    model, X, y = regression_model
    fn = jaxgbt.as_function(model)
    params = {"leaf_value": model.leaf_value, "base_score": model.base_score}

    @jax.jit
    def loss(p):  # a nonlinear loss of the predictions
        return jnp.mean(jnp.log(jnp.cosh(fn(p, X) - y)))

    grads = jax.grad(loss)(params)
    rng = np.random.default_rng(0)
    # Directional derivatives, central differences: predictions are linear in the leaves,
    # so the only error is the loss's curvature (O(eps^2)) and float32 rounding.
    eps = 1e-2
    for _ in range(3):
        direction = jax.tree.map(lambda a: jnp.asarray(rng.normal(size=a.shape), a.dtype), params)
        up = jax.tree.map(lambda a, d: a + eps * d, params, direction)  # noqa: B023
        down = jax.tree.map(lambda a, d: a - eps * d, params, direction)  # noqa: B023
        numeric = (loss(up) - loss(down)) / (2 * eps)
        analytic = sum(jnp.vdot(g, d) for g, d in zip(jax.tree.leaves(grads),
                                                      jax.tree.leaves(direction), strict=True))
        np.testing.assert_allclose(analytic, numeric, rtol=2e-3)
    # Single coordinates too, including a leaf no row reaches (gradient exactly 0).
    leaves = np.asarray(model.leaf_index(X))
    empty = [(t, leaf) for t in range(model.n_trees) for leaf in range(8)
             if not (leaves[:, t] == leaf).any()]
    for t, leaf in [(0, int(leaves[0, 0])), (5, int(leaves[3, 5]))] + empty[:1]:
        bump = jnp.zeros_like(model.leaf_value).at[t, leaf, 0].set(eps)
        up = loss({**params, "leaf_value": model.leaf_value + bump})
        down = loss({**params, "leaf_value": model.leaf_value - bump})
        np.testing.assert_allclose(grads["leaf_value"][t, leaf, 0], (up - down) / (2 * eps),
                                   rtol=5e-3, atol=1e-6)


def test_hard_model_gives_no_gradient_to_thresholds_or_inputs(regression_model):
    model, X, _ = regression_model
    fn = jaxgbt.as_function(model)
    g_params, g_X = jax.jit(jax.grad(lambda p, X: jnp.sum(fn(p, X)), argnums=(0, 1)))(
        dj.params_of(model), jnp.asarray(X))
    assert np.all(np.asarray(g_params["threshold"]) == 0)
    assert np.all(np.asarray(g_X) == 0)
    assert np.abs(np.asarray(g_params["leaf_value"])).sum() > 0


def test_model_inside_a_larger_jax_model(regression_model):
    model, X, y = regression_model
    fn = jaxgbt.as_function(model)

    def larger(params, X):  # a linear layer on top of the ensemble's margin
        return params["a"] * fn(params["trees"], X) + params["b"]

    params = {"trees": dj.params_of(model), "a": jnp.float32(1.0), "b": jnp.float32(0.0)}
    grads = jax.jit(jax.grad(lambda p: jnp.mean((larger(p, X) - y) ** 2)))(params)
    assert jax.tree.structure(grads) == jax.tree.structure(params)
    np.testing.assert_allclose(larger(params, X), model.predict_raw(X), rtol=1e-6)


def test_model_pytree_through_jit_and_grad(regression_model):
    model, X, _ = regression_model
    soft = jax.jit(lambda m, X: dj.soft_predict_raw(m, X, 0.5))
    np.testing.assert_allclose(soft(model, X), dj.soft_predict_raw(model, X, 0.5), rtol=1e-6)
    grads = jax.grad(lambda m: jnp.sum(dj.soft_predict_raw(m, X, 0.5)), allow_int=True)(model)
    assert np.abs(np.asarray(grads.threshold)).max() > 0


def test_with_params_checks_names_and_shapes(regression_model):
    model, _, _ = regression_model
    with pytest.raises(ValueError, match="unknown parameter"):
        dj.with_params(model, {"feature": model.feature})
    with pytest.raises(ValueError, match="leaf_value has shape"):
        dj.with_params(model, {"leaf_value": model.leaf_value[:2]})


# Soft trees ------------------------------------------------------------------------------


def test_soft_model_matches_a_float64_reference(regression_model):
    model, X, _ = regression_model
    X = X[:64].copy()
    X[::7, 1] = np.nan  # missing values take the default direction
    for trees in (model, model.first_trees(5)):  # 5: not a multiple of the scan's step
        for temperature in (0.3, 2.0):
            np.testing.assert_allclose(dj.soft_predict_raw(trees, X, temperature),
                                       soft_reference(trees, X, temperature), rtol=2e-5,
                                       atol=2e-5)


def test_soft_tends_to_hard_as_temperature_goes_to_zero(regression_model):
    model, X, _ = regression_model
    # The thresholds are bin edges: move any row sitting within 1e-3 of one away from it.
    thresholds = np.unique(np.asarray(model.threshold))
    X = X.copy()
    for _ in range(3):
        near = np.abs(X[..., None] - thresholds).min(-1) < 1e-3
        X[near] += 2e-3
    hard = np.asarray(model.predict_raw(X))
    errors = [np.abs(np.asarray(dj.soft_predict_raw(model, X, t)) - hard).max()
              for t in (1.0, 1e-2, 1e-3, 1e-5)]
    assert errors[0] > errors[1] > errors[2]
    # At 1e-5 every sigmoid argument exceeds 100 (gap 1e-3 / 1e-5): 0 or 1 in float32.
    np.testing.assert_allclose(dj.soft_predict_raw(model, X, 1e-5), hard,
                               rtol=1e-4, atol=1e-4 * np.abs(hard).max())


def test_soft_gradients_reach_thresholds_inputs_and_temperature(regression_model):
    model, X, _ = regression_model

    def loss(params, X, temperature):
        return jnp.sum(jaxgbt.as_function(model, temperature)(params, X) ** 2)

    g_params, g_X, g_temperature = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(
        dj.params_of(model), jnp.asarray(X), 0.5)
    assert np.isfinite(np.asarray(g_X)).all()
    assert np.abs(np.asarray(g_X)).max() > 0
    assert np.abs(np.asarray(g_params["threshold"])).max() > 0
    assert np.isfinite(g_temperature) and g_temperature != 0


def test_soft_gradients_match_finite_differences_in_float64(regression_model):
    model, X, _ = regression_model
    X = X[:32].astype(np.float64)
    X[3, 0] = np.nan
    with jax.enable_x64(True):
        model64 = dataclasses.replace(model, threshold=model.threshold.astype(jnp.float64),
                                      leaf_value=model.leaf_value.astype(jnp.float64),
                                      base_score=model.base_score.astype(jnp.float64))
        temperature = jnp.asarray(np.full(X.shape[1], 0.4))

        @jax.jit
        def loss(threshold, X):
            m = dataclasses.replace(model64, threshold=threshold)
            return jnp.sum(jnp.tanh(dj.soft_predict_raw(m, X, temperature)))

        g_threshold, g_X = jax.grad(loss, argnums=(0, 1))(model64.threshold, jnp.asarray(X))
        assert g_X.dtype == jnp.float64 and np.isfinite(np.asarray(g_X)).all()
        assert float(g_X[3, 0]) == 0.0  # a missing value routes by default_left, flatly
        eps = 1e-6
        for index in [(0, 0), (2, 1), (7, 2)]:
            bump = jnp.zeros_like(model64.threshold).at[index].set(eps)
            numeric = (loss(model64.threshold + bump, X) - loss(model64.threshold - bump, X))
            np.testing.assert_allclose(g_threshold[index], numeric / (2 * eps), rtol=1e-6,
                                       atol=1e-9)
        for row, column in [(0, 0), (5, 2)]:
            bump = jnp.zeros(X.shape).at[row, column].set(eps)
            numeric = loss(model64.threshold, X + bump) - loss(model64.threshold, X - bump)
            np.testing.assert_allclose(g_X[row, column], numeric / (2 * eps), rtol=1e-6,
                                       atol=1e-9)


def test_soft_model_with_infinite_thresholds_and_missing_values(regression_model):
    model, X, _ = regression_model
    threshold = model.threshold.at[0, 0].set(jnp.inf).at[1, 2].set(-jnp.inf)
    model = dataclasses.replace(model, threshold=threshold)
    X = X[:64].copy()
    X[:, model.feature[0, 0]] = np.nan  # NaN meets the infinite threshold too
    hard = np.asarray(model.predict_raw(X))
    np.testing.assert_allclose(dj.soft_predict_raw(model, X, 1e-6), hard, rtol=1e-5, atol=1e-5)
    g_threshold, g_X, g_temperature = jax.grad(
        lambda t, X, T: jnp.sum(dj.soft_predict_raw(dataclasses.replace(model, threshold=t),
                                                    X, T)), argnums=(0, 1, 2))(
        model.threshold, jnp.asarray(X), 0.5)
    assert np.isfinite(np.asarray(g_threshold)).all() and np.isfinite(np.asarray(g_X)).all()
    assert np.isfinite(g_temperature)
    assert g_threshold[0, 0] == 0 and g_threshold[1, 2] == 0


def test_soft_predict_checks_temperature_shape(regression_model):
    model, X, _ = regression_model
    with pytest.raises(ValueError, match="one value per feature"):
        dj.soft_predict_raw(model, X, jnp.ones(3))


# A non-decomposable loss -----------------------------------------------------------------


def test_pairwise_auc_loss_matches_all_pairs_and_tends_to_one_minus_auc():
    rng = np.random.default_rng(1)
    y = (rng.random(700) > 0.6).astype(np.float32)  # 700: more than one block of pairs
    f = (rng.normal(size=700) + y).astype(np.float32)
    pos, neg = f[y > 0].astype(np.float64), f[y == 0].astype(np.float64)
    expected = np.mean(1 / (1 + np.exp(-(neg[None, :] - pos[:, None]) / 0.5)))
    wide, sharp = jax.jit(lambda y, f: (dj.pairwise_auc_loss(y, f, scale=0.5),
                                        dj.pairwise_auc_loss(y, f, scale=1e-4)))(y, f)
    np.testing.assert_allclose(wide, expected, rtol=1e-5)
    np.testing.assert_allclose(sharp, 1 - jaxgbt.metrics.auc(y, f), atol=1e-3)


# Fine-tuning -----------------------------------------------------------------------------


def test_finetune_auc_surrogate_improves_held_out_surrogate(binary_model):
    model, fit, valid, test = binary_model
    before = dj.pairwise_auc_loss(test[1], model.predict_raw(test[0]))
    trace = jaxgbt.finetune_trace(model, dj.pairwise_auc_loss, *fit,
                                  optimizer=optax.adam(1e-3), steps=60, eval_set=valid)
    after = dj.pairwise_auc_loss(test[1], trace.model.predict_raw(test[0]))
    assert trace.best_step > 0
    assert trace.valid_loss[trace.best_step] < trace.valid_loss[0]
    assert after < before  # on rows neither stage saw
    # Nothing mutated: the given model predicts as before.
    np.testing.assert_array_equal(model.leaf_value, binary_model[0].leaf_value)
    assert np.asarray(trace.model.leaf_value).shape == np.asarray(model.leaf_value).shape
    assert not np.array_equal(trace.model.leaf_value, model.leaf_value)
    np.testing.assert_array_equal(trace.model.threshold, model.threshold)


def test_finetune_returns_the_given_model_when_no_step_helps(binary_model):
    model, fit, valid, _ = binary_model
    # Gradient ascent (a negative step size) only makes the validation loss worse.
    trace = jaxgbt.finetune_trace(model, dj.pairwise_auc_loss, *fit,
                                  optimizer=optax.sgd(-0.1), steps=5, eval_set=valid, patience=3)
    assert trace.best_step == 0
    np.testing.assert_array_equal(trace.model.leaf_value, model.leaf_value)
    assert np.isnan(trace.train_loss[3:]).all()  # stopped after 3 steps without progress


def test_finetune_thresholds_through_the_soft_model(binary_model):
    model, fit, valid, _ = binary_model
    temperature = 0.1 * fit[0].std(axis=0)
    tuned = jaxgbt.finetune(model, dj.pairwise_auc_loss, *fit, steps=20,
                            what=("leaves", "thresholds"), temperature=temperature,
                            optimizer=optax.adam(1e-3))
    assert not np.array_equal(tuned.threshold, model.threshold)
    assert np.isfinite(np.asarray(tuned.threshold)).all()
    np.testing.assert_array_equal(tuned.feature, model.feature)
    with pytest.raises(ValueError, match="needs a temperature"):
        jaxgbt.finetune(model, dj.pairwise_auc_loss, *fit, what=("thresholds",))
    with pytest.raises(ValueError, match="choose one or more"):
        jaxgbt.finetune(model, dj.pairwise_auc_loss, *fit, what=("features",))
    with pytest.raises(ValueError, match="patience needs an eval_set"):
        jaxgbt.finetune(model, dj.pairwise_auc_loss, *fit, patience=3)


def test_finetune_minibatches_and_l2_penalty(regression_model):
    model, X, y = regression_model

    def mse(y, f):
        return jnp.mean((y - f) ** 2)

    loose = jaxgbt.finetune(model, mse, X, y, steps=30, batch_size=64)
    tight = jaxgbt.finetune(model, mse, X, y, steps=30, batch_size=64, l2=1e3)
    assert mse(y, loose.predict_raw(X)) < mse(y, model.predict_raw(X))
    change = lambda m: float(jnp.sum((m.leaf_value - model.leaf_value) ** 2))  # noqa: E731
    assert change(tight) < change(loose)
