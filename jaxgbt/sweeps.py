"""Many models as one program: parameter sweeps (``fit_many``), as ``jaxgbt.fit`` under
``jax.vmap`` (cross-validation, ``model_selection.cv``, is built on it).

The data are validated and binned once per call on the host; every member's rounds
then run in the same compiled chunks, batched over members. A member differs from the
others only in traced arrays: hyperparameters, sample weights (cv's fold masks are 0/1
weights) and seeds. The result is one stacked ``Booster``; ``models[i]`` (or
is an ordinary model.
"""

import inspect
import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt import spec
from jaxgbt.core.sampling import sample_capacity
from jaxgbt.data import frames
from jaxgbt.data import validation as check
from jaxgbt.data.dataset import read_shared_X
from jaxgbt.engine.resources import available_bytes, estimate_fit_memory
from jaxgbt.fitting import fit
from jaxgbt.model import Booster
from jaxgbt.objectives import Objective, resolve

# fit's arguments that are traced arrays, so they can differ between members.
SWEEPABLE = spec.TRACED
# fit's other arguments decide shapes or code: never per member.
STATIC_ARGUMENTS = tuple(name for name in inspect.signature(fit).parameters
                         if name not in SWEEPABLE)
# What ``fit_kwargs`` may name, here and in ``model_selection``.
FIT_KEYWORDS = frozenset(inspect.signature(fit).parameters)

_MSG_NOT_PER_MEMBER = (
    "{name} cannot differ between members: it decides shapes or code, so each value "
    "needs its own program. Sweepable (traced) parameters: {sweepable}. Loop over "
    "{name} in Python and call fit_many once per value.")


def fit_many(loss: "str | Objective | Callable", X, y, params: Mapping[str, Any], *,
             batch_size: int | None = None, **fit_kwargs) -> Booster:
    """Fits one model per row of ``params`` as one vmapped program.

    Example::

        models = jaxgbt.fit_many("logistic", X, y, params={
            "learning_rate": [0.03, 0.1, 0.3], "l2": [1.0, 1.0, 10.0], "seed": [0, 1, 2]},
            n_trees=200, depth=6, subsample=0.8)
        models[1].predict(X_test)                          # one member, an ordinary model
        jax.vmap(lambda m: m.predict(X_test))(models)      # all of them: f32[3, N_test]

    Args:
      loss: as for ``jaxgbt.fit``.
      X, y: as for ``jaxgbt.fit``, shared by every member.
      params: ``{name: values}`` with one value per member (M of them) for names in
        ``SWEEPABLE``; ``sample_weight`` is f32[M, N] and ``base_score`` f32[M] or
        f32[M, K]. A parameter the same for every member goes in ``fit_kwargs``.
      batch_size: members trained together; None trains all M at once. Smaller
        batches need less memory; every batch reuses the same compiled program.
      **fit_kwargs: any other ``jaxgbt.fit`` argument, the same for every member
        (``n_trees``, ``depth``, ``sampling``, ``eval_set``, ...). With
        ``early_stopping_rounds`` each member stops on its own validation curve: its
        later rounds are skipped and hold empty trees, and ``best_round`` is i32[M].
        Not allowed: ``callbacks`` and ``checkpoint_path``, which need the host in the
        loop.

    Returns:
      A stacked Booster: every array field has a leading axis of size M, and
      ``history`` (with an ``eval_set``) holds f32[M, T] per key.

    Member i equals ``jaxgbt.fit(loss, X, y, **fit_kwargs, **{k: v[i] for k, v in
    params.items()})``, with two exceptions that follow from the binning being done
    once on the host for all members: swept ``sample_weight`` bins with unweighted
    quantiles, and a swept ``seed`` picks the binning rows (N > 200,000 only) with
    seed 0.
    """
    spec.check_keywords(fit_kwargs, FIT_KEYWORDS, "fit_many")
    objective = resolve(loss, fit_kwargs.pop("link", None))
    rows, n_members = member_rows(params, fit_kwargs)
    columns = frames.column_names(X)
    X = read_shared_X(X)  # read once for every member
    fit_kwargs["feature_names"] = check.check_feature_names(fit_kwargs.get("feature_names"),
                                                            columns, X.shape[1])
    return vmapped_fit(objective, X, y, rows, n_members, fit_kwargs, batch_size)


def member(models: Booster, index: int) -> Booster:
    """Deprecated: use ``models[index]`` (``Booster.__getitem__``), which this calls."""
    warnings.warn("jaxgbt.member(models, i) is deprecated; use models[i].", DeprecationWarning,
                  stacklevel=2)
    return models[index]


def n_members(models: Booster) -> int:
    """M, the number of models stacked in ``models`` (0 for a single model)."""
    return models.feature.shape[0] if models.feature.ndim > 2 else 0


def member_rows(params: Mapping[str, Any], fit_kwargs: Mapping[str, Any]
                 ) -> tuple[dict[str, jax.Array], int]:
    """Checks a sweep on the host; returns its values as arrays with a leading axis M."""
    if not isinstance(params, Mapping) or not params:
        raise TypeError("params must be a non-empty dict {name: one value per model}, e.g. "
                        "{'learning_rate': [0.03, 0.1], 'l2': [1.0, 10.0]}.")
    sweepable = ", ".join(SWEEPABLE)
    rows, n_members = {}, None
    for name, values in params.items():
        if name not in SWEEPABLE:
            raise ValueError(_MSG_NOT_PER_MEMBER.format(name=name, sweepable=sweepable)
                             if name in STATIC_ARGUMENTS else
                             f"params: {name!r} is not a fit argument that can be swept"
                             + (f" ({hint})" if (hint := spec.keyword_hint(name, SWEEPABLE))
                                else "") + f"; use one of {sweepable}.")
        if name in fit_kwargs:
            raise ValueError(f"{name} is given both in params and as a keyword argument; "
                             "give it in one place.")
        array = np.asarray(values)
        if array.ndim == 0 or array.shape[0] == 0:
            raise ValueError(f"params[{name!r}] must hold one value per model (a non-empty "
                             f"sequence); got {values!r}.")
        if n_members is not None and array.shape[0] != n_members:
            lengths = {key: len(np.asarray(v)) for key, v in params.items()}
            raise ValueError(f"params must hold the same number of values per name; got "
                             f"{lengths}.")
        n_members = array.shape[0]
        rows[name] = _check_values(name, array)
    return rows, n_members


def _check_values(name: str, array: np.ndarray) -> jax.Array:
    """One swept parameter, checked element by element with fit's own checks."""
    if name == "seed":
        if not np.issubdtype(array.dtype, np.integer) or array.ndim != 1:
            raise TypeError(f"params['seed'] must be integers, one per model; got {array!r}.")
        for i, value in enumerate(array):
            check.check_int(int(value), f"params['seed'][{i}]", 0, 2**32 - 1)
        # uint32: every seed fit accepts (up to 2**32 - 1) gives PRNGKey(seed) exactly.
        return jnp.asarray(array.astype(np.uint32))
    if name == "sample_weight":
        if array.ndim != 2:
            raise ValueError("params['sample_weight'] must have shape (M, N): one weight per "
                             f"row of X for each model; got shape {array.shape}.")
        for weights in array:
            check.check_sample_weight(weights, weights.shape[0])
        return jnp.asarray(array, jnp.float32)
    if not np.issubdtype(array.dtype, np.number) or array.dtype == bool:
        raise TypeError(f"params[{name!r}] must hold numbers; got dtype {array.dtype}.")
    if name == "base_score":
        if array.ndim > 2 or not np.isfinite(array).all():
            raise ValueError("params['base_score'] must be finite, of shape (M,) or (M, K).")
        return jnp.asarray(array, jnp.float32)
    if array.ndim != 1:
        raise ValueError(f"params[{name!r}] must hold one number per model; got shape "
                         f"{array.shape}.")
    for i, value in enumerate(array):
        spec.check_traced(name, value, f"params[{name!r}][{i}]")
    return jnp.asarray(array, jnp.float32)


def vmapped_fit(objective: Objective, X, y, rows: dict[str, jax.Array],
                 n_members: int, fit_kwargs: dict, batch_size: int | None) -> Booster:
    """``fit`` under vmap over ``rows`` (leading axis n_members), in batches; X is
    f32[N, F] or a ``frames.Table`` (``read_shared_X``)."""
    for name in ("callbacks", "checkpoint_path"):
        if fit_kwargs.get(name):
            raise ValueError(f"{name} needs the host between rounds, so it cannot be used with "
                             "many models at once; use early_stopping_rounds with an eval_set "
                             "(decided inside the program), or read models.history.")
    if batch_size is None:
        batch_size = n_members
    check.check_int(batch_size, "batch_size", 1)
    batch_size = min(batch_size, n_members)
    _check_memory(X, _n_outputs(objective, y, fit_kwargs), fit_kwargs, batch_size,
                  "_valid_weight" in rows)
    valid_set = None
    if "_valid_weight" in rows:
        valid_set = dict(X=X, y=y, group=fit_kwargs.get("group"), name="valid")

    def fit_one(row):
        row = dict(row)
        kwargs = dict(fit_kwargs)
        if valid_set is not None:
            kwargs["eval_set"] = [dict(valid_set, sample_weight=row.pop("_valid_weight"))]
            if kwargs.get("base_margin") is not None:  # the validation rows are X's
                kwargs["eval_base_margin"] = [kwargs["base_margin"]]
        return fit(objective, X, y, **kwargs, **row)

    n_batches = math.ceil(n_members / batch_size)
    # The last batch is padded with copies of the last member, so that every batch has
    # the same shape and reuses one compiled program.
    index = np.minimum(np.arange(n_batches * batch_size), n_members - 1)
    batches = []
    for b in range(n_batches):
        take = index[b * batch_size:(b + 1) * batch_size]
        batches.append(jax.vmap(fit_one)({name: _take(values, take)
                                          for name, values in rows.items()}))
    if n_batches == 1:
        models = batches[0]
    else:
        models = jax.tree.map(lambda *parts: jnp.concatenate(parts), *batches)
    if n_batches * batch_size != n_members:
        models = jax.tree.map(lambda a: a[:n_members], models)
    if not any(check.is_traced(a) for a in jax.tree.leaves(models)):
        _check_members_finite(models, rows, n_members)
    return models


def _take(values, index: np.ndarray):
    """The members ``index`` of swept values: on the host when they are concrete (an
    eager gather compiles a program for every new shape)."""
    if check.is_traced(values):
        return values[jnp.asarray(index)]
    return jax.device_put(np.asarray(values)[index])


def _check_members_finite(models: Booster, rows: Mapping[str, Any], n_members: int) -> None:
    """Raises, as ``fit`` does for one model, when a member's leaf values or starting
    margin are NaN or infinite (NaN gradients, or margins that overflowed), naming the
    first such member and its swept settings."""
    leaves = np.asarray(models.leaf_value).reshape(n_members, -1)
    start = np.asarray(models.base_score).reshape(n_members, -1)
    finite = np.isfinite(leaves).all(axis=1) & np.isfinite(start).all(axis=1)
    if finite.all():
        return
    first = int(np.argmin(finite))
    settings = {name: np.asarray(values[first]).tolist() for name, values in rows.items()
                if not name.startswith("_") and np.ndim(values[first]) == 0}
    raise FloatingPointError(
        f"{int((~finite).sum())} of {n_members} members have NaN or infinite leaf values, "
        f"first member {first} ({settings or 'its sample weights'}): its loss gave NaN or "
        "infinite gradients, or its margins overflowed. Lower learning_rate, raise l2, or "
        "make the loss safe for large margins; each member is checked as fit checks one.")


def _n_outputs(objective: Objective, y, fit_kwargs: dict) -> int:
    """K, for the memory estimate (fit itself checks it)."""
    if objective.n_outputs is not None:
        try:
            return int(objective.n_outputs(y))
        except Exception:  # noqa: BLE001 - bad labels: fit raises the real error
            return 1
    return fit_kwargs.get("n_outputs") or 1


def max_batch_size(n_rows: int, n_features: int, n_outputs: int, fit_kwargs: dict,
                   with_valid: bool = False) -> tuple[int, int, int]:
    """(members that fit in free memory at once, bytes shared, bytes per member)."""
    # A subsample shared by every member (not swept) gathers each round's drawn rows
    # (a value that is not a rate is left for fit to reject, with its own message).
    subsample = fit_kwargs.get("subsample", 1.0)
    gathered = (sample_capacity(fit_kwargs.get("sampling", "bernoulli"), subsample, n_rows)
                if isinstance(subsample, int | float) and 0 < subsample <= 1 else None)
    one = estimate_fit_memory(n_rows, n_features, fit_kwargs.get("n_bins", 256),
                              fit_kwargs.get("depth", 6), n_outputs, gathered_rows=gathered)
    # Each member has its own per-row state and histograms (and validation margins);
    # the binned matrix is shared.
    per_member = one.rows + one.histograms + (2 * n_rows * 4 * n_outputs if with_valid else 0)
    shared = one.binned * (2 if with_valid else 1)
    free = available_bytes(jax.devices()[0])
    fits = 2**31 if free is None else max(1, int((free - shared) // per_member))
    return fits, shared, per_member


def _check_memory(X, n_outputs: int, fit_kwargs: dict, batch_size: int,
                  with_valid: bool) -> None:
    """Raises MemoryError, naming batch_size, when a batch would not fit in memory."""
    fits, shared, per_member = max_batch_size(X.shape[0], X.shape[1], n_outputs, fit_kwargs,
                                              with_valid)
    if batch_size > fits:
        need = shared + batch_size * per_member
        raise MemoryError(f"{batch_size} models at once need about {need / 2**30:.2f} GiB, more "
                          f"than is free; pass batch_size={fits} (or less) to train them in "
                          "batches.")
