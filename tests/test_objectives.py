import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL

import jaxgbt
from jaxgbt._derivatives import grad_hess, newton_constant
from jaxgbt.objectives import logistic, resolve, squared_error

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
    g, h = grad_hess(loss, vector_output=True)(y, f)
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
