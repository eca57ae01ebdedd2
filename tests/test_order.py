import jax.numpy as jnp
import numpy as np

from jaxgbt._order import from_order_key, order_key


def test_order_key_orders_floats_as_their_values():
    rng = np.random.default_rng(11)
    values = np.concatenate([rng.normal(size=200) * 10.0 ** rng.integers(-30, 30, 200),
                             [0.0, -0.0, np.inf, -np.inf, 1e-30, -1e-30, 3.0, 3.0]])
    values = values.astype(np.float32)
    key = np.asarray(order_key(jnp.asarray(values)))
    assert key.dtype == np.int32
    order = np.argsort(values, kind="stable")
    assert np.all(np.diff(key[order]) >= 0)  # the same order
    assert np.array_equal(np.diff(key[order]) == 0, np.diff(values[order]) == 0)  # ties
    with_nan = np.array([np.nan, np.inf, -np.nan, 1.0], np.float32)
    key = np.asarray(order_key(jnp.asarray(with_nan)))
    assert key[0] == key[2] > key[1] > key[3]  # every NaN above +inf, as jnp.sort puts them


def test_from_order_key_inverts_it():
    values = np.array([-np.inf, -3.5, -1e-30, 0.0, 1e-30, 2.0, np.inf], np.float32)
    back = np.asarray(from_order_key(order_key(jnp.asarray(values)), jnp.float32))
    np.testing.assert_array_equal(back, values)
