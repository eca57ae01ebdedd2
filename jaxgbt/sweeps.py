"""Many models as one program: parameter sweeps (``fit_many``) and K-fold
cross-validation (``cv``), both as ``jaxgbt.fit`` under ``jax.vmap``.

The data are validated and binned once per call on the host; every member's rounds
then run in the same compiled chunks, batched over members. A member differs from the
others only in traced arrays: hyperparameters, sample weights (cv's fold masks are 0/1
weights) and seeds. The result is one stacked ``Booster``; ``models[i]`` (or
``member(models, i)``) is an ordinary model.
"""

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.data import validation as check
from jaxgbt.fitting import fit
from jaxgbt.evaluation.evaluator import resolve_metrics
from jaxgbt.model import Booster
from jaxgbt.objectives import Objective, resolve
from jaxgbt.engine.resources import available_bytes, estimate_fit_memory
from jaxgbt.core.sampling import sample_capacity

# fit's arguments that are traced arrays, so they can differ between members.
SWEEPABLE = ("learning_rate", "l2", "l1", "min_split_gain", "min_child_weight",
             "hessian_floor", "base_score", "sample_weight", "seed", "subsample",
             "colsample_bytree", "colsample_bylevel", "colsample_bynode", "goss_top_rate",
             "goss_other_rate")
_RATES = ("subsample", "colsample_bytree", "colsample_bylevel", "colsample_bynode",
          "goss_top_rate",
          "goss_other_rate")
_NONNEGATIVE = ("l2", "l1", "min_split_gain", "min_child_weight", "hessian_floor")

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
        (``n_trees``, ``depth``, ``sampling``, ``eval_set``, ...). Not allowed:
        ``early_stopping_rounds``, ``callbacks`` and ``checkpoint_path``, which need the
        host in the loop (pick the best round from ``models.history`` instead).

    Returns:
      A stacked Booster: every array field has a leading axis of size M, and
      ``history`` (with an ``eval_set``) holds f32[M, T] per key.

    Member i equals ``jaxgbt.fit(loss, X, y, **fit_kwargs, **{k: v[i] for k, v in
    params.items()})``, with two exceptions that follow from the binning being done
    once on the host for all members: swept ``sample_weight`` bins with unweighted
    quantiles, and a swept ``seed`` picks the binning rows (N > 200,000 only) with
    seed 0.
    """
    objective = resolve(loss, fit_kwargs.pop("link", None))
    rows, n_members = _member_rows(params, fit_kwargs)
    X = check.check_X(X)
    return _vmapped_fit(objective, X, y, rows, n_members, fit_kwargs, batch_size)


def member(models: Booster, index: int) -> Booster:
    """Member ``index`` of a stacked model, an ordinary Booster (same as ``models[index]``)."""
    return models[index]


def n_members(models: Booster) -> int:
    """M, the number of models stacked in ``models`` (0 for a single model)."""
    return models.feature.shape[0] if models.feature.ndim > 2 else 0


class CVResult(NamedTuple):
    """What ``cv`` returns.

    Attributes:
      models: the fold models, stacked: leading axis n_folds (n_configs, n_folds with
        ``params``); ``models[k]`` was trained without fold k.
      folds: i32[N], each row's validation fold.
      history: {"valid:<metric>": f32[n_folds, T]} (f32[n_configs, n_folds, T] with
        ``params``): each fold model's score on its held-out rows after every round.
      mean, std: the same keys, f32[T] (f32[n_configs, T]): mean and standard
        deviation (ddof=0) over folds.
      best_round: i32[] (i32[n_configs]): the round with the best mean of the first
        metric; ``n_trees=best_round + 1`` refits the chosen model.
      best_score: f32[] (f32[n_configs]): that mean.
    """

    models: Booster
    folds: np.ndarray
    history: dict[str, np.ndarray]
    mean: dict[str, np.ndarray]
    std: dict[str, np.ndarray]
    best_round: np.ndarray
    best_score: np.ndarray


def cv(loss: "str | Objective | Callable", X, y, *, n_folds: int = 5,
       stratified: bool | None = None, group=None, folds=None, shuffle: bool = True,
       fold_seed: int = 0, sample_weight=None, eval_metric=None,
       params: Mapping[str, Any] | None = None, batch_size: int | None = None,
       **fit_kwargs) -> CVResult:
    """K-fold cross-validation as one vmapped fit over fold masks.

    Fold k's model is trained with weights ``sample_weight * (folds != k)`` and scored
    every round on all of X with weights ``sample_weight * (folds == k)``: a row of
    weight 0 adds nothing to the gradients, histograms, start or metric, so each fold
    model is the model fitted on the other folds' rows alone (with the bin edges of
    all rows, computed once).

    Example::

        result = jaxgbt.cv("logistic", X, y, n_folds=5, n_trees=300, learning_rate=0.1)
        result.mean["valid:logloss"], result.std["valid:logloss"]   # f32[300] each
        result.best_round

    Args:
      loss, X, y: as for ``jaxgbt.fit``.
      n_folds: K >= 2.
      stratified: keep each class's share equal across folds; default: True for the
        objectives whose labels are classes (``Objective.classification``: logistic,
        softmax, focal, exponential).
      group: query ids (ranking): passed to ``fit``, and a query's rows stay in one
        fold (folds then balance row counts over whole queries).
      folds: i32[N] fold ids in [0, n_folds) to use instead of drawing them.
      shuffle: shuffle rows (or queries) before dealing them to folds.
      fold_seed: seeds that shuffle (``seed`` in fit_kwargs seeds the fits).
      sample_weight: f32[N] weights, multiplied by the fold masks.
      eval_metric: as for ``fit``; the first metric picks ``best_round``.
      params: optionally a sweep as in ``fit_many``: every configuration is
        cross-validated, all n_configs x n_folds fits in one program.
      batch_size: fits trained together (see ``fit_many``).
      **fit_kwargs: other ``fit`` arguments, shared by all fits.

    Returns:
      A CVResult.
    """
    objective = resolve(loss, fit_kwargs.pop("link", None))
    if objective.kind == "dataset":
        raise ValueError(f"cv: loss {objective.name!r} couples all rows (its risk sets), so a "
                         "held-out row of weight 0 still changes the others' gradients; "
                         "cross-validate it with separate fits on each fold's rows.")
    for name in ("eval_set", "early_stopping_rounds"):
        if name in fit_kwargs:
            raise ValueError(f"cv: {name} is not allowed; each fold is scored on its held-out "
                             "rows, and best_round comes from the mean curve.")
    X = check.check_X(X)
    n_rows = X.shape[0]
    weight = check.check_sample_weight(sample_weight, n_rows)
    if folds is None:
        labels = None
        if stratified is None:
            stratified = group is None and objective.classification
        if stratified:
            if group is not None:
                raise ValueError("cv: stratified=True and group= together are not supported; "
                                 "grouped folds keep whole queries.")
            labels = np.asarray(y)
        folds = fold_ids(n_rows, n_folds, labels=labels,
                         group=None if group is None else check.check_group(group, n_rows),
                         shuffle=shuffle, seed=fold_seed)
    else:
        folds = _check_folds(folds, n_rows, n_folds)
    held_out = (folds[None, :] == np.arange(n_folds)[:, None]).astype(np.float32)  # [K, N]
    train_weight = weight[None] * (1.0 - held_out)
    valid_weight = weight[None] * held_out
    for k in range(n_folds):
        if train_weight[k].sum() <= 0 or valid_weight[k].sum() <= 0:
            raise ValueError(f"cv: fold {k} leaves no rows of positive weight to train on or "
                             "to score; use fewer folds or check sample_weight.")

    if params is None:
        config_rows, n_configs = {}, 1
    else:
        config_rows, n_configs = _member_rows(params, fit_kwargs)
        if "sample_weight" in config_rows:
            raise ValueError("cv: sweep sample_weight through the sample_weight argument, not "
                             "params (the fold masks multiply it).")
    # Flat members, configuration-major: member c * n_folds + k is config c on fold k.
    rows = {name: jnp.repeat(values, n_folds, axis=0) for name, values in config_rows.items()}
    rows["sample_weight"] = jnp.tile(jnp.asarray(train_weight), (n_configs, 1))
    rows["_valid_weight"] = jnp.tile(jnp.asarray(valid_weight), (n_configs, 1))
    fit_kwargs = dict(fit_kwargs, eval_metric=eval_metric, group=group)
    models = _vmapped_fit(objective, X, y, rows, n_configs * n_folds, fit_kwargs, batch_size)

    shape = (n_folds,) if params is None else (n_configs, n_folds)
    models = jax.tree.map(lambda a: a.reshape(shape + a.shape[1:]), models)
    history = {key: np.asarray(values) for key, values in models.history.items()}
    mean = {key: values.mean(axis=-2) for key, values in history.items()}
    std = {key: values.std(axis=-2) for key, values in history.items()}
    metric = resolve_metrics(eval_metric, objective, False, group is not None)[0]
    watched = mean[next(iter(history))]
    finite = np.where(np.isnan(watched), -np.inf if metric.higher_is_better else np.inf, watched)
    best = (np.argmax if metric.higher_is_better else np.argmin)(finite, axis=-1)
    best_score = np.take_along_axis(watched, best[..., None], axis=-1)[..., 0]
    return CVResult(models, folds, history, mean, std, best, best_score)


def fold_ids(n_rows: int, n_folds: int, *, labels=None, group=None, shuffle: bool = True,
             seed: int = 0) -> np.ndarray:
    """i32[N]: a validation fold per row.

    Args:
      n_rows: N.
      n_folds: K, 2..N.
      labels: f32[N] classes to stratify by (each class dealt round-robin over the
        folds, so a class's count differs by at most 1 between folds), or None.
      group: query ids i32[N] (a query's rows contiguous): whole queries go to one fold,
        each to the fold with the fewest rows so far, largest queries first.
      shuffle: shuffle rows (or queries) first; without it, row i of a class (or query
        i) goes to fold i % K in order.
      seed: seeds the shuffle.
    """
    check.check_int(n_folds, "n_folds", 2, n_rows)
    rng = np.random.default_rng(seed)
    folds = np.empty(n_rows, np.int32)
    if group is not None:
        starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
        sizes = np.diff(np.r_[starts, n_rows])
        if starts.size < n_folds:
            raise ValueError(f"n_folds={n_folds} but group has only {starts.size} queries; "
                             "use at most that many folds.")
        order = rng.permutation(starts.size) if shuffle else np.arange(starts.size)
        order = order[np.argsort(-sizes[order], kind="stable")]  # largest first
        filled = np.zeros(n_folds, np.int64)
        query_fold = np.empty(starts.size, np.int32)
        for query in order:
            query_fold[query] = int(np.argmin(filled))
            filled[query_fold[query]] += sizes[query]
        return np.repeat(query_fold, sizes).astype(np.int32)
    if labels is None:
        order = rng.permutation(n_rows) if shuffle else np.arange(n_rows)
        folds[order] = np.arange(n_rows) % n_folds
        return folds
    labels = np.asarray(labels)
    if labels.shape != (n_rows,):
        raise ValueError(f"stratified folds need one class label per row; y has shape "
                         f"{labels.shape}. Pass stratified=False or folds=.")
    offset = 0
    for value in np.unique(labels):
        rows = np.flatnonzero(labels == value)
        if shuffle:
            rows = rng.permutation(rows)
        # Continue the round-robin where the previous class stopped, so fold sizes
        # differ by at most one overall as well.
        folds[rows] = (offset + np.arange(rows.size)) % n_folds
        offset += rows.size
    return folds


def _check_folds(folds, n_rows: int, n_folds: int) -> np.ndarray:
    folds = np.asarray(folds)
    if folds.shape != (n_rows,) or not np.issubdtype(folds.dtype, np.integer):
        raise ValueError(f"folds must be integers of shape ({n_rows},), one fold id per row; "
                         f"got dtype {folds.dtype}, shape {folds.shape}.")
    if folds.min() < 0 or folds.max() >= n_folds:
        raise ValueError(f"folds must lie in [0, {n_folds}) for n_folds={n_folds}; got "
                         f"[{folds.min()}, {folds.max()}].")
    return folds.astype(np.int32)


def _member_rows(params: Mapping[str, Any], fit_kwargs: Mapping[str, Any]
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
                             if name in _STATIC_ARGUMENTS else
                             f"params: {name!r} is not a fit argument that can be swept; use "
                             f"one of {sweepable}.")
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


# fit arguments that decide shapes or code: never per member.
_STATIC_ARGUMENTS = ("n_trees", "depth", "n_bins", "n_outputs", "sampling", "hessian", "link",
                     "group", "devices", "monotone_constraints", "interaction_constraints",
                     "eval_set", "eval_metric", "loss", "boosting")


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
        label = f"params[{name!r}][{i}]"
        if name == "learning_rate":
            if not np.isfinite(value) or value <= 0:
                raise ValueError(f"{label}={value} must be a finite number > 0.")
        elif name in _RATES:
            check.check_rate(value, label)
        elif name in _NONNEGATIVE:
            check.check_nonnegative(value, label)
    return jnp.asarray(array, jnp.float32)


def _vmapped_fit(objective: Objective, X: np.ndarray, y, rows: dict[str, jax.Array],
                 n_members: int, fit_kwargs: dict, batch_size: int | None) -> Booster:
    """``fit`` under vmap over ``rows`` (leading axis n_members), in batches."""
    for name in ("early_stopping_rounds", "callbacks", "checkpoint_path"):
        if fit_kwargs.get(name):
            raise ValueError(f"{name} needs the host between rounds, so it cannot be used with "
                             "many models at once; pick the round from models.history.")
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
        return fit(objective, X, y, **kwargs, **row)

    n_batches = math.ceil(n_members / batch_size)
    # The last batch is padded with copies of the last member, so that every batch has
    # the same shape and reuses one compiled program.
    index = np.minimum(np.arange(n_batches * batch_size), n_members - 1)
    batches = []
    for b in range(n_batches):
        take = jnp.asarray(index[b * batch_size:(b + 1) * batch_size])
        batches.append(jax.vmap(fit_one)({name: values[take] for name, values in rows.items()}))
    if n_batches == 1:
        models = batches[0]
    else:
        models = jax.tree.map(lambda *parts: jnp.concatenate(parts), *batches)
    return jax.tree.map(lambda a: a[:n_members], models)


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


def _check_memory(X: np.ndarray, n_outputs: int, fit_kwargs: dict, batch_size: int,
                  with_valid: bool) -> None:
    """Raises MemoryError, naming batch_size, when a batch would not fit in memory."""
    fits, shared, per_member = max_batch_size(X.shape[0], X.shape[1], n_outputs, fit_kwargs,
                                              with_valid)
    if batch_size > fits:
        need = shared + batch_size * per_member
        raise MemoryError(f"{batch_size} models at once need about {need / 2**30:.2f} GiB, more "
                          f"than is free; pass batch_size={fits} (or less) to train them in "
                          "batches.")
