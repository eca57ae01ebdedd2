"""Per-row gradients and Hessians of a loss, by automatic differentiation.

This is the only place jaxgbt differentiates a loss. Built-in and user losses go
through the same code.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxgbt.objectives import Loss


def grad_hess(loss: Loss, vector_output: bool) -> Callable[[jax.Array, jax.Array], tuple]:
    """Returns ``fn(y, raw) -> (g, h)`` over all rows.

    Args:
      loss: ``loss(y_i, f_i) -> scalar`` for one row.
      vector_output: False when ``f_i`` is a scalar, True when it has shape (K,).

    The returned function takes ``y`` with rows on axis 0 (any pytree) and
    ``raw : f32[N, K]`` and gives ``g, h : f32[N, K]``. For vector outputs ``h`` is
    the diagonal of the per-row Hessian. Negative curvature (a non-convex loss) is
    clipped to 0: boosting needs a non-negative quadratic model; the leaf denominator
    ``H + l2`` is floored separately (see ``split.py``).
    """

    def scalar_row(y_i, f_i):
        # One forward-over-reverse pass gives g and h together.
        g, h = jax.jvp(lambda f: jax.grad(loss, argnums=1)(y_i, f), (f_i,), (jnp.ones_like(f_i),))
        return g, h

    def vector_row(y_i, f_i):
        g = jax.grad(loss, argnums=1)(y_i, f_i)
        h = jnp.diagonal(jax.hessian(loss, argnums=1)(y_i, f_i))
        return g, h

    def fn(y, raw):
        if vector_output:
            g, h = jax.vmap(vector_row)(y, raw)
        else:
            g, h = jax.vmap(scalar_row)(y, raw[:, 0])
            g, h = g[:, None], h[:, None]
        return g, jnp.maximum(h, 0.0)

    return fn


def loss_values(loss: Loss, vector_output: bool) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """Returns ``fn(y, raw: f32[N, K]) -> f32[N]``, the per-row loss."""

    def fn(y, raw):
        f = raw if vector_output else raw[:, 0]
        return jax.vmap(loss)(y, f)

    return fn


def newton_constant(loss: Loss, vector_output: bool, y, weight: jax.Array, n_outputs: int,
                    n_steps: int = 8) -> jax.Array:
    """The constant margin ``c : f32[K]`` that minimises the weighted loss.

    A few Newton steps from 0 on the same g/h used for the trees. Where the summed
    Hessian is (close to) zero, as for absolute error, the step falls back to unit
    curvature per unit weight, a plain gradient step, so that it stays finite.
    """
    gh = grad_hess(loss, vector_output)
    total_weight = jnp.sum(weight)

    def step(c, _):
        raw = jnp.broadcast_to(c, (weight.shape[0], n_outputs))
        g, h = gh(y, raw)
        G = weight @ g
        H = weight @ h
        H = jnp.where(H > 1e-6 * total_weight, H, total_weight)
        return c - G / H, None

    c, _ = jax.lax.scan(step, jnp.zeros((n_outputs,), jnp.float32), None, length=n_steps)
    return c
