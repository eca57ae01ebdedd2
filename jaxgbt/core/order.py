"""Floats as integers of the same order: XLA:CPU sorts and compares one integer array
far faster than floats (docs/benchmarks.md), and an order statistic can be found bit by
bit on them without any sort."""

import jax
import jax.numpy as jnp
from jax import lax

_INT_OF_WIDTH = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}
_UINT_OF_WIDTH = {2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}


def order_key(x: jax.Array) -> jax.Array:
    """Signed integers (of x's width) ordered as the floats x are, -0.0 equal to 0.0 and
    every NaN above +inf (as ``jnp.sort`` places them)."""
    int_dtype = _INT_OF_WIDTH[x.dtype.itemsize]
    x = jnp.where(jnp.isnan(x), jnp.array(jnp.nan, x.dtype), x + 0)  # one zero, one NaN
    bits = lax.bitcast_convert_type(x, int_dtype)
    magnitude = jnp.array(jnp.iinfo(int_dtype).max, int_dtype)
    # A negative float's magnitude bits grow as it falls: flip them.
    return jnp.where(bits < 0, bits ^ magnitude, bits)


def from_order_key(key: jax.Array, dtype) -> jax.Array:
    """The float of ``order_key`` (its inverse, for keys of non-NaN values)."""
    magnitude = jnp.array(jnp.iinfo(key.dtype).max, key.dtype)
    return lax.bitcast_convert_type(jnp.where(key < 0, key ^ magnitude, key), dtype)


def unsigned_order_key(x: jax.Array) -> jax.Array:
    """``order_key`` moved to unsigned integers (the sign bit flipped), so that an order
    statistic can be found bit by bit from the highest."""
    width = x.dtype.itemsize
    key = lax.bitcast_convert_type(order_key(x), _UINT_OF_WIDTH[width])
    return key ^ jnp.array(1 << (8 * width - 1), key.dtype)


def from_unsigned_order_key(key: jax.Array, dtype) -> jax.Array:
    """The float of ``unsigned_order_key`` (for keys of non-NaN values)."""
    width = key.dtype.itemsize
    signed = key ^ jnp.array(1 << (8 * width - 1), key.dtype)
    return from_order_key(lax.bitcast_convert_type(signed, _INT_OF_WIDTH[width]), dtype)


def kth_largest(values: jax.Array, k: jax.Array) -> jax.Array:
    """The k-th largest of ``values`` f32[N] (or f64[N]), NaN counting as the largest,
    without a sort: exactly ``jnp.sort(values)[::-1][k - 1]`` for k i32[] in [1, N].

    The largest key with at least k values at or above it, decided bit by bit: for f32,
    32 passes of a comparison and a count over N values, far cheaper than XLA:CPU's sort.
    """
    key = unsigned_order_key(values)
    n_bits = 8 * values.dtype.itemsize

    def next_bit(i, found):
        candidate = found | jnp.left_shift(jnp.array(1, key.dtype),
                                           jnp.array(n_bits - 1, key.dtype) - i.astype(key.dtype))
        return jnp.where(jnp.sum(key >= candidate) >= k, candidate, found)

    found = lax.fori_loop(0, n_bits, next_bit, jnp.array(0, key.dtype))
    return from_unsigned_order_key(found, values.dtype)
