"""Objectives by name: the built-ins, the parametrised families (``"quantile@0.9"``),
``resolve`` (what fit accepts as ``loss``) and ``by_name`` (a saved model's objective)."""

import functools

from jaxgbt.objectives.base import Link, Loss, Objective
from jaxgbt.objectives.classification import exponential, focal, logistic, softmax
from jaxgbt.objectives.counts import gamma, poisson, tweedie
from jaxgbt.objectives.naming import Family, parse
from jaxgbt.objectives.ranking import (
    lambdarank_ndcg,
    lambdarank_ndcg_at,
    listwise_softmax,
    pairwise_logistic,
)
from jaxgbt.objectives.regression import (
    absolute_error,
    huber,
    multi_squared_error,
    pseudo_huber,
    quantile,
    squared_error,
)
from jaxgbt.objectives.survival import aft, cox

# Built-ins by name; parametrised ones with their defaults ("quantile" is the median).
BUILTIN: dict[str, Objective] = {obj.name: obj for obj in (
    squared_error, absolute_error, logistic, softmax, multi_squared_error, poisson, gamma,
    exponential, cox, pairwise_logistic, lambdarank_ndcg, listwise_softmax)}

# "base@value" names; a bare base is the family with its default value (if it has one).
FAMILIES: dict[str, Family] = {
    "huber": Family(huber, float, "huber@delta (delta > 0)", 1.0),
    "pseudo_huber": Family(pseudo_huber, float, "pseudo_huber@delta (delta > 0)", 1.0),
    "quantile": Family(quantile, float, "quantile@alpha (0 < alpha < 1)", 0.5),
    "tweedie": Family(tweedie, float, "tweedie@power (1 < power < 2)", 1.5),
    "focal": Family(focal, float, "focal@gamma (gamma >= 0)", 2.0),
    "aft": Family(functools.partial(aft, "normal"), float, "aft@sigma (= aft_normal@sigma)", 1.0),
    "aft_normal": Family(functools.partial(aft, "normal"), float, "aft_normal@sigma", 1.0),
    "aft_logistic": Family(functools.partial(aft, "logistic"), float, "aft_logistic@sigma",
                           1.0),
    # the bare name is the whole-list built-in, not a family member
    "lambdarank_ndcg": Family(lambdarank_ndcg_at, int, "lambdarank_ndcg@k (k an integer >= 1)"),
}


def _builtin(name: str) -> Objective | None:
    """The built-in of a name, None for an unknown name; ValueError for a bad value."""
    return BUILTIN.get(name) or parse(name, FAMILIES, "loss=")


def resolve(loss: "str | Objective | Loss", link: Link | None = None) -> Objective:
    """Turns what a user passed as ``loss`` into an Objective.

    Args:
      loss: a built-in name (``"logistic"``, ``"quantile@0.9"``...), an Objective, or a
        function ``loss(y, f)`` (or ``loss(y_q, f_q, mask_q)`` with ``group=``).
      link: an inverse link for a custom loss (replaces a built-in's when given).

    Raises:
      ValueError: an unknown name or a bad parameter in a name.
      TypeError: something that is neither a name, an Objective nor a callable.
    """
    if isinstance(loss, str):
        objective = _builtin(loss)
        if objective is None:
            known = ", ".join(sorted(BUILTIN) + [family.form for family in FAMILIES.values()])
            raise ValueError(f"loss={loss!r} is not a built-in objective; use one of {known} "
                             "or pass a function loss(y, f) -> scalar.")
    elif isinstance(loss, Objective):
        objective = loss
    elif callable(loss):
        name = getattr(loss, "__name__", type(loss).__name__)
        objective = Objective(name=f"custom:{name}", loss=loss, custom=True)
    else:
        raise TypeError(f"loss must be a built-in name, a jaxgbt Objective or a function "
                        f"loss(y, f) -> scalar; got {type(loss).__name__}.")
    if link is not None:
        if not callable(link):
            raise TypeError("link must be a function of the raw margin; "
                            f"got {type(link).__name__}.")
        objective = objective._replace(link=link)
    return objective


def by_name(name: str) -> Objective | None:
    """The built-in objective of a saved model's objective name, or None."""
    try:
        return _builtin(name)
    except ValueError:
        return None
