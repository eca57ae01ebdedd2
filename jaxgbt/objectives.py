"""Built-in objectives: plain per-row JAX losses plus the facts boosting needs.

An objective is a loss ``loss(y, f) -> scalar`` for one row, written as a user would
write it, together with its inverse link (margin -> prediction) and, when a closed
form exists, the constant that minimises it. Built-ins take the same path as user
losses: jaxgbt differentiates them with ``jax.grad``; nothing is special-cased.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

Loss = Callable[[Any, jax.Array], jax.Array]
Link = Callable[[jax.Array], jax.Array]


class Objective(NamedTuple):
    """A loss and what comes with it.

    Attributes:
      name: name used in saved models and messages.
      loss: ``loss(y_i, f_i) -> scalar`` for one row; ``f_i`` has shape () for scalar
        models and (K,) for vector-output models.
      link: inverse link applied by ``Booster.predict`` to raw margins, or None for
        the identity.
      init_score: ``init_score(y, weight) -> f32[K]`` giving the constant start, or
        None to find it by Newton steps on the loss itself.
      y_domain: a description of the allowed labels, used in error messages, and a
        host-side check ``(y: np.ndarray) -> bool``; None accepts any finite label.
    """

    name: str
    loss: Loss
    link: Link | None = None
    init_score: Callable[[jax.Array, jax.Array], jax.Array] | None = None
    y_domain: tuple[str, Callable[[Any], bool]] | None = None


def squared_error_loss(y, f):
    """Half the squared error, so that g = f - y and h = 1."""
    return 0.5 * (f - y) ** 2


def logistic_loss(y, f):
    """Binary cross-entropy on the margin, y in {0, 1} (or a probability)."""
    # log(1 + e^f) - y f written with logaddexp: no overflow for large |f|.
    return jnp.logaddexp(0.0, f) - y * f


def _weighted_mean(y, weight):
    return jnp.atleast_1d(jnp.sum(weight * y) / jnp.sum(weight))


def _logistic_init(y, weight):
    # The log-odds of the weighted mean label, clipped away from 0 and 1 so that a
    # label column with one class still starts at a finite margin.
    p = jnp.clip(_weighted_mean(y, weight), 1e-6, 1.0 - 1e-6)
    return jnp.log(p) - jnp.log1p(-p)


def _is_probability(y) -> bool:
    return bool(((y >= 0) & (y <= 1)).all())


squared_error = Objective(
    name="squared_error",
    loss=squared_error_loss,
    link=None,
    init_score=_weighted_mean,
)

logistic = Objective(
    name="logistic",
    loss=logistic_loss,
    link=jax.nn.sigmoid,
    init_score=_logistic_init,
    y_domain=("labels in [0, 1] (0/1 classes or probabilities)", _is_probability),
)

BUILTIN: dict[str, Objective] = {obj.name: obj for obj in (squared_error, logistic)}


def resolve(loss: "str | Objective | Loss", link: Link | None = None) -> Objective:
    """Turns what a user passed as ``loss`` into an Objective.

    Args:
      loss: a built-in name, an Objective, or a per-row function ``loss(y, f)``.
      link: an inverse link for a custom loss (ignored for built-ins unless given).

    Raises:
      ValueError: an unknown name.
      TypeError: something that is neither a name, an Objective nor a callable.
    """
    if isinstance(loss, str):
        if loss not in BUILTIN:
            known = ", ".join(sorted(BUILTIN))
            raise ValueError(f"loss={loss!r} is not a built-in objective; use one of {known} "
                             "or pass a function loss(y, f) -> scalar.")
        objective = BUILTIN[loss]
    elif isinstance(loss, Objective):
        objective = loss
    elif callable(loss):
        name = getattr(loss, "__name__", type(loss).__name__)
        objective = Objective(name=f"custom:{name}", loss=loss)
    else:
        raise TypeError(f"loss must be a built-in name, a jaxgbt Objective or a function "
                        f"loss(y, f) -> scalar; got {type(loss).__name__}.")
    if link is not None:
        if not callable(link):
            raise TypeError("link must be a function of the raw margin; "
                            f"got {type(link).__name__}.")
        objective = objective._replace(link=link)
    return objective
