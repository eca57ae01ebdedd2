"""Gradients and curvature of a loss, by automatic differentiation.

This is the only place jaxgbt differentiates a loss. Built-in and user losses go
through the same code. Boosting needs a positive quadratic model of the loss around
the current margins; its curvature is a choice (``CURVATURES``):

  exact     the Hessian from autodiff (its diagonal for vector outputs)
  full      vector outputs: the diagonal grows the trees, the full K x K Hessian sets
            the leaves (a Newton step per leaf)
  fisher    the objective's expected Hessian (``Objective.fisher``), positive where the
            exact one may not be (gamma/Tweedie with log link, Cox)
  constant  1 per unit weight: plain gradient boosting, for losses whose Hessian is 0
            almost everywhere (absolute error, quantile), usually with leaf refresh

Whatever the choice, negative values are clipped to ``hessian_floor`` (>= 0).
"""

import typing
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp

from jaxgbt.objectives import Loss

Curvature = Literal["exact", "full", "fisher", "constant"]
CURVATURES = typing.get_args(Curvature)


class Derivatives(NamedTuple):
    """Per-row derivatives of the loss at the current margins.

    Attributes:
      g: f32[N, K] gradient.
      h: f32[N, K] curvature used to grow trees (a diagonal).
      h_full: f32[N, K, K] for ``curvature="full"``, else None.
    """

    g: jax.Array
    h: jax.Array
    h_full: jax.Array | None = None


# The Newton start steps by the gradient alone where the summed curvature is below this
# fraction of the summed weight (no usable step size there).
_MIN_RELATIVE_CURVATURE = 1e-6
# Near the minimum a step changes the mean loss by less than float32 can resolve in a sum
# of N rows, so the halving test (a step must not increase the loss) rejects good steps
# at random and the start stopped about 2e-5 short of the closed form. A step whose
# predicted decrease (G^2 / 2H per unit weight) is below this fraction of the loss is
# taken whole: there the quadratic model is exact to far more than the loss's rounding.
_UNRESOLVED_DECREASE = 1e-5


def _scalar_g_h(loss, y_i, f_i):
    # One forward-over-reverse pass gives g and h together.
    return jax.jvp(lambda f: jax.grad(loss, argnums=1)(y_i, f), (f_i,), (jnp.ones_like(f_i),))


def row_derivatives(loss: Loss, vector_output: bool, curvature: str = "exact",
                    fisher: Callable | None = None) -> Callable[..., Derivatives]:
    """Returns ``fn(y, raw, hessian_floor=0) -> Derivatives`` over all rows.

    Args:
      loss: ``loss(y_i, f_i) -> scalar`` for one row.
      vector_output: False when ``f_i`` is a scalar, True when it has shape (K,).
      curvature: one of ``CURVATURES``.
      fisher: ``fisher(y_i, f_i)`` -> expected Hessian of one row (shape () or (K,)),
        for ``curvature="fisher"``.

    ``y`` has rows on axis 0 (any pytree) and ``raw`` is f32[N, K].
    """

    def vector_row(y_i, f_i):
        g = jax.grad(loss, argnums=1)(y_i, f_i)
        full = jax.hessian(loss, argnums=1)(y_i, f_i)
        return g, jnp.diagonal(full), full

    def fn(y, raw, hessian_floor=0.0):
        h_full = None
        if vector_output:
            g, h, full = jax.vmap(vector_row)(y, raw)
            if curvature == "full":
                h_full = full
        else:
            g, h = jax.vmap(lambda y_i, f_i: _scalar_g_h(loss, y_i, f_i))(y, raw[:, 0])
            g, h = g[:, None], h[:, None]
        if curvature == "fisher":
            expected = jax.vmap(fisher)(y, raw if vector_output else raw[:, 0])
            h = expected.reshape(g.shape)
        elif curvature == "constant":
            h = jnp.ones_like(g)
        return Derivatives(g, jnp.maximum(h, hessian_floor), h_full)

    return fn


# Floats of per-group temporaries (about M x M per group, M x M x M for an autodiff
# Hessian) that one step of the map over groups may hold, times a few arrays of that size.
GROUP_BATCH_FLOATS = 2**22


def group_derivatives(loss: Callable, curvature: str = "exact",
                      fisher: Callable | None = None) -> Callable[..., Derivatives]:
    """Returns ``fn(y, raw, index, mask, hessian_floor=0) -> Derivatives`` for a loss
    over groups of rows (queries).

    Args:
      loss: ``loss(y_q, f_q, mask_q) -> scalar`` for one group padded to M rows:
        ``y_q`` and ``f_q`` of shape (M,) (``y_q`` any pytree), ``mask_q`` bool[M].
      curvature: ``"exact"`` (the Hessian's diagonal by autodiff, M Hessian-vector
        products per group), ``"fisher"`` (``fisher(y_q, f_q, mask_q) -> f32[M]``) or
        ``"constant"``.

    ``index`` is i32[Q, M], the rows of each group (padding entries point at row 0 and
    are masked out), and ``mask`` bool[Q, M].
    """

    def one_group(args):
        y_q, f_q, mask_q = args
        g = jax.grad(loss, argnums=1)(y_q, f_q, mask_q)
        if curvature == "fisher":
            h = fisher(y_q, f_q, mask_q)
        elif curvature == "constant":
            h = jnp.ones_like(g)
        else:
            h = jnp.diagonal(jax.hessian(loss, argnums=1)(y_q, f_q, mask_q))
        return jnp.where(mask_q, g, 0.0), jnp.where(mask_q, h, 0.0)

    def fn(y, raw, index, mask, hessian_floor=0.0):
        f = raw[:, 0]
        y_groups = jax.tree.map(lambda a: a[index], y)
        # lax.map over batches of groups bounds the memory of the per-group temporaries
        # (M x M pairs, times M for an autodiff Hessian) while each step has enough work:
        # one group per step was several times slower (docs/benchmarks.md).
        n_groups, width = index.shape
        per_group = width * width * (width if curvature == "exact" else 1)
        batch = max(1, min(n_groups, GROUP_BATCH_FLOATS // per_group))
        g_groups, h_groups = jax.lax.map(one_group, (y_groups, f[index], mask),
                                         batch_size=batch)
        g = jnp.zeros_like(f).at[index].add(g_groups)
        h = jnp.zeros_like(f).at[index].add(h_groups)
        return Derivatives(g[:, None], jnp.maximum(h, hessian_floor)[:, None])

    return fn


def loss_values(loss: Loss, vector_output: bool) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """Returns ``fn(y, raw: f32[N, K]) -> f32[N]``, the per-row loss."""

    def fn(y, raw):
        f = raw if vector_output else raw[:, 0]
        return jax.vmap(loss)(y, f)

    return fn


def newton_constant(loss: Loss, vector_output: bool, y, weight: jax.Array, n_outputs: int,
                    n_steps: int = 20, n_halvings: int = 12) -> jax.Array:
    """The constant margin ``c : f32[K]`` that minimises the weighted loss.

    Damped Newton steps from 0 on the same g/h used for the trees: each step is halved
    until the weighted loss does not increase (a log-link loss with large labels would
    otherwise overshoot from 0), except a step too small for float32 losses to tell
    apart (``_UNRESOLVED_DECREASE``), which is taken whole. Where the summed Hessian is
    (close to) zero, as for absolute error, the step uses unit curvature per unit
    weight, a gradient step.
    """
    derivatives = row_derivatives(loss, vector_output)
    values = loss_values(loss, vector_output)
    total_weight = jnp.sum(weight)

    def mean_loss(c):
        raw = jnp.broadcast_to(c, (weight.shape[0], n_outputs))
        return jnp.sum(weight * values(y, raw)) / total_weight

    def step(c, _):
        raw = jnp.broadcast_to(c, (weight.shape[0], n_outputs))
        g, h, _ = derivatives(y, raw)
        G = jnp.matmul(weight, g, precision=jax.lax.Precision.HIGHEST)
        H = jnp.matmul(weight, h, precision=jax.lax.Precision.HIGHEST)
        H = jnp.where(H > _MIN_RELATIVE_CURVATURE * total_weight, H, total_weight)
        direction = -G / H
        now = mean_loss(c)
        scales = 0.5 ** jnp.arange(n_halvings, dtype=jnp.float32)
        trial = jax.vmap(lambda a: mean_loss(c + a * direction))(scales)
        predicted_decrease = jnp.sum(G * G / H) / (2 * total_weight)
        unresolved = predicted_decrease <= _UNRESOLVED_DECREASE * jnp.abs(now)
        better = jnp.isfinite(trial) & ((trial <= now) | (unresolved & (scales == 1.0)))
        # The largest step that does not increase the loss; none: stay.
        scale = jnp.where(better.any(), scales[jnp.argmax(better)], 0.0)
        return c + scale * direction, None

    c, _ = jax.lax.scan(step, jnp.zeros((n_outputs,), jnp.float32), None, length=n_steps)
    return c


def grad_hess(loss: Loss, vector_output: bool) -> Callable[[jax.Array, jax.Array], tuple]:
    """``fn(y, raw) -> (g, h)``: exact per-row g and (diagonal) h, clipped at 0."""
    derivatives = row_derivatives(loss, vector_output)

    def fn(y, raw):
        g, h, _ = derivatives(y, raw)
        return g, h

    return fn
