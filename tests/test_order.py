import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.order import from_order_key, kth_largest, order_key


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


def test_kth_largest_equals_the_sorted_value():
    rng = np.random.default_rng(5)
    values = np.abs(rng.normal(size=1000)).astype(np.float32)
    values[:200] = np.round(values[:200], 1)  # ties
    values[200:300] = 0.0
    values[300:305] = np.inf
    kth = jax.jit(kth_largest)
    descending = np.sort(values)[::-1]
    for k in (1, 2, 5, 6, 137, 500, 700, 999, 1000):
        assert float(kth(jnp.asarray(values), k)) == descending[k - 1], k
    with_nan = values.copy()
    with_nan[7] = np.nan  # sorts as the largest, as in jnp.sort
    assert np.isnan(float(kth(jnp.asarray(with_nan), 1)))
    assert float(kth(jnp.asarray(with_nan), 2)) == np.inf
    with jax.enable_x64(True):
        doubles = np.abs(rng.normal(size=300))
        assert float(kth_largest(jnp.asarray(doubles), 42)) == np.sort(doubles)[::-1][41]
    signed = rng.normal(size=500).astype(np.float32)  # negative values too
    assert float(kth(jnp.asarray(signed), 123)) == np.sort(signed)[::-1][122]
