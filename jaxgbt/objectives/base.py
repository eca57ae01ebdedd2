"""The Objective type and the small helpers several families share: the weighted mean
(the start of most objectives) and the label-domain checks run on the host before fit.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

Loss = Callable[..., jax.Array]
Link = Callable[[jax.Array], jax.Array]


class Objective(NamedTuple):
    """A loss and what comes with it.

    Calling an objective calls its loss: ``logistic(y_i, f_i)`` is
    ``logistic.loss(y_i, f_i)``, and ``jax.vmap`` and ``jax.grad`` take the objective
    itself. ``jax.jit``, ``jax.eval_shape`` and ``jax.checkpoint`` keep a weak reference
    to the function, which a tuple cannot have: give them ``objective.loss``.

    Attributes:
      name: name used in saved models and messages.
      loss: the loss (see ``jaxgbt.objectives`` for its three forms).
      link: inverse link applied by ``Booster.predict`` to raw margins, or None for
        the identity.
      init_score: ``init_score(y, weight) -> f32[K]`` giving the constant start, or
        None to find it by Newton steps on the loss itself.
      y_domain: (description, host check ``y -> bool``) of the allowed labels, or None
        for any finite label.
      curvature: default curvature, one of ``derivatives.CURVATURES``.
      fisher: the objective's own curvature for ``curvature="fisher"``: the expected
        Hessian of one row (``fisher(y_i, f_i)``), or for group/data-set losses a
        closed-form Hessian diagonal (``fisher(y_q, f_q, mask_q) -> f32[M]``).
      leaf_quantile: when set, leaves are refreshed to this weighted quantile of the
        residuals y - f (absolute error, quantile), see ``jaxgbt.core.leaves``.
      n_outputs: ``n_outputs(y) -> K`` for vector-output objectives, else None.
      kind: "row", "group" or "dataset".
      y_allows_inf: labels may be +inf (right-censored AFT upper bounds).
      custom: a user's own loss function, wrapped by ``resolve`` (named
        ``"custom:<function name>"``); with ``group=`` it is taken as a per-query loss.
        False for the built-ins and for any Objective passed as one.
      classification: the labels are classes (0/1 or class indices), so ``cv``
        stratifies its folds by them.
      min_classes: the fewest classes y must hold (softmax: 2, one output per class),
        or None.
      metric: the name of the default eval metric (``jaxgbt.evaluation.metrics.get``),
        or None: the objective's own loss, or ``"ndcg@10"`` with ``group=``.
    """

    name: str
    loss: Loss
    link: Link | None = None
    init_score: Callable[[Any, jax.Array], jax.Array] | None = None
    y_domain: tuple[str, Callable[[Any], bool]] | None = None
    curvature: str = "exact"
    fisher: Callable | None = None
    leaf_quantile: float | None = None
    n_outputs: Callable[[Any], int] | None = None
    kind: str = "row"
    y_allows_inf: bool = False
    custom: bool = False
    classification: bool = False
    min_classes: int | None = None
    metric: str | None = None

    def __call__(self, *args, **kwargs) -> jax.Array:
        """The loss: ``loss(y_i, f_i)`` per row, ``loss(y_q, f_q, mask_q)`` per group."""
        if self.loss is None:  # a model loaded from a file keeps a custom loss's name only
            raise TypeError(f"objective {self.name!r} has no loss function (a loaded model "
                            "does not store a custom loss, which is code).")
        return self.loss(*args, **kwargs)


# ---------------------------------------------------------------------------------------
# Constant starts and label checks shared by several objectives.


def weighted_mean(y, weight):
    return jnp.atleast_1d(jnp.sum(weight * y) / jnp.sum(weight))


def weighted_quantile(alpha: float):
    def init(y, weight):
        order = jnp.argsort(y)
        cumulative = jnp.cumsum(weight[order])
        position = jnp.searchsorted(cumulative, alpha * cumulative[-1])
        return jnp.atleast_1d(y[order][jnp.clip(position, 0, y.shape[0] - 1)])

    return init


def is_probability(y) -> bool:
    return bool(((y >= 0) & (y <= 1)).all())


def is_binary(y) -> bool:
    return bool(np.isin(y, (0, 1)).all())


def is_nonnegative(y) -> bool:
    return bool((y >= 0).all())


def is_positive(y) -> bool:
    return bool((y > 0).all())


def is_class_label(y) -> bool:
    return y.ndim == 1 and bool(((y >= 0) & (y == np.round(y))).all())


def is_interval(y) -> bool:
    return (y.ndim == 2 and y.shape[1] == 2 and bool((y[:, 0] > 0).all())
            and bool(np.isfinite(y[:, 0]).all())
            and bool((y[:, 1] >= y[:, 0]).all()))


def is_time_event(y) -> bool:
    return (y.ndim == 2 and y.shape[1] == 2 and bool((y[:, 0] > 0).all())
            and bool(np.isin(y[:, 1], (0, 1)).all()))
