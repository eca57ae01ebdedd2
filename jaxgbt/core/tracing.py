"""Whether a value is a JAX tracer: the one question code asks to tell a concrete value
(checked and computed on the host) from one inside ``jit``/``vmap`` (left to the trace).
Also ``traced_like``, which gives a concrete value the trace of another."""

import functools

import jax
import jax.numpy as jnp

try:  # the public name; kept importable across JAX releases
    from jax.core import Tracer as _Tracer
except ImportError:  # pragma: no cover - a JAX without jax.core.Tracer
    from jax._src.core import Tracer as _Tracer


def is_traced(value) -> bool:
    """True for a tracer (an abstract value under ``jit``, ``vmap`` or ``grad``)."""
    return isinstance(value, _Tracer)


def traced_like(value, references):
    """``value`` (a pytree of arrays), unchanged, carried by the trace of ``references``
    (a pytree): under ``jax.vmap``, batched as the traced ones among them.

    A value that a loop passes back to a compiled function starts concrete (margins at
    the base score) and comes back batched once the function has seen a batched
    argument. Without this, the function would be compiled twice, once for each form:
    the boosting chunk costs a second or more each time. ``value`` is returned as it is
    when any of its leaves is traced already, or when no reference is.
    """
    if any(is_traced(leaf) for leaf in jax.tree.leaves(value)):
        return value
    traced = [leaf for leaf in jax.tree.leaves(references) if is_traced(leaf)]
    if not traced:
        return value
    return _carried(value, traced)


@jax.jit
def _carried(value, references):
    # A False that depends on every reference (their first 0 entries), so that the
    # select below is batched as they are; its two cases are the value itself, so no
    # entry changes (not even the sign of a zero, as adding 0 would).
    never = functools.reduce(jnp.logical_or, [jnp.any(jnp.ravel(r)[:0]) for r in references])
    return jax.tree.map(lambda leaf: jnp.where(never, leaf, leaf), value)
