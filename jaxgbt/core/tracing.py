"""Whether a value is a JAX tracer: the one question code asks to tell a concrete value
(checked and computed on the host) from one inside ``jit``/``vmap`` (left to the trace)."""

try:  # the public name; kept importable across JAX releases
    from jax.core import Tracer as _Tracer
except ImportError:  # pragma: no cover - a JAX without jax.core.Tracer
    from jax._src.core import Tracer as _Tracer


def is_traced(value) -> bool:
    """True for a tracer (an abstract value under ``jit``, ``vmap`` or ``grad``)."""
    return isinstance(value, _Tracer)
