"""jaxgbt.engine.batching.one_model_at_a_time: vmap maps over models on CPU, batches elsewhere."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from numpy.testing import assert_allclose

from jaxgbt.engine.batching import one_model_at_a_time


def _member(shared, x, pair, nothing):
    """A function of a shared array, a batched array, a pytree and a None argument."""
    assert nothing is None
    scale, shift = pair
    return {"sum": jnp.sum(shared * x) * scale + shift, "row": x + shared}


_wrapped = one_model_at_a_time(_member)
_SHARED = jnp.arange(4.0)
_X = jnp.asarray(np.random.default_rng(0).normal(size=(3, 4)), jnp.float32)
_PAIR = (jnp.asarray([1.0, 2.0, 3.0]), jnp.float32(0.5))  # scale batched, shift not


def _expected():
    return jax.vmap(_member, in_axes=(None, 0, (0, None), None))(_SHARED, _X, _PAIR, None)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_vmap_equals_plain_vmap(monkeypatch, backend):
    monkeypatch.setattr(jax, "default_backend", lambda: backend)
    mapped = jax.vmap(_wrapped, in_axes=(None, 0, (0, None), None))
    out = jax.jit(mapped)(_SHARED, _X, _PAIR, None)
    for key, value in _expected().items():
        assert_allclose(out[key], value, rtol=1e-6)
    # On CPU the members run in a loop (lax.map is a scan); elsewhere there is none.
    jaxpr = str(jax.make_jaxpr(mapped)(_SHARED, _X, _PAIR, None))
    assert ("scan[" in jaxpr) == (backend == "cpu")


def test_nested_vmap_maps_each_level():
    outer = np.random.default_rng(1).normal(size=(2, 3, 4)).astype(np.float32)
    nested = jax.vmap(jax.vmap(_wrapped, in_axes=(None, 0, (0, None), None)),
                      in_axes=(None, 0, (None, None), None))
    out = jax.jit(nested)(_SHARED, jnp.asarray(outer), _PAIR, None)
    for i in range(2):
        expected = jax.vmap(_member, in_axes=(None, 0, (0, None), None))(
            _SHARED, jnp.asarray(outer[i]), _PAIR, None)
        assert_allclose(out["sum"][i], expected["sum"], rtol=1e-6)
        assert_allclose(out["row"][i], expected["row"], rtol=1e-6)


def test_unbatched_call_is_the_function():
    out = _wrapped(_SHARED, _X[0], (jnp.float32(2.0), jnp.float32(1.0)), None)
    assert_allclose(out["sum"], 2.0 * float(jnp.sum(_SHARED * _X[0])) + 1.0, rtol=1e-6)
