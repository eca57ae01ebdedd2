"""Model selection: K-fold cross-validation (``cv``) as one vmapped fit over fold masks,
the fold assignment it uses (``fold_ids``: plain, stratified or by query), and
``fit_auto``, a fit whose learning rate, number of trees and, if asked, depth and other
traced settings are cross-validated."""

import functools
import itertools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt import spec
from jaxgbt.core.config import GrowPolicy
from jaxgbt.core.dtypes import MAX_DEPTH
from jaxgbt.data import categorical, frames
from jaxgbt.data import validation as check
from jaxgbt.data.dataset import read_shared_X
from jaxgbt.evaluation.evaluator import metric_name, resolve_metrics
from jaxgbt.fitting import fit
from jaxgbt.model import Booster
from jaxgbt.objectives import Objective, resolve
from jaxgbt.sweeps import FIT_KEYWORDS, member_rows, vmapped_fit


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


# fit's keywords and the folds' own: a name from another library's cross-validation
# (``nfold``) is answered with jaxgbt's (``n_folds``).
CV_KEYWORDS = FIT_KEYWORDS | {"n_folds", "fold_seed"}


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
      **fit_kwargs: other ``fit`` arguments, shared by all fits. With
        ``early_stopping_rounds``, each fold model stops on its own held-out score: its
        later rounds are skipped (on CPU they cost next to nothing) and its curve stays
        flat from there, so the mean curve and ``best_round`` still span every round.

    Returns:
      A CVResult.
    """
    spec.check_keywords(fit_kwargs, CV_KEYWORDS, "cv", renamed=spec.CV_NAMES)
    objective = resolve(loss, fit_kwargs.pop("link", None))
    if objective.kind == "dataset":
        raise ValueError(f"cv: loss {objective.name!r} couples all rows (its risk sets), so a "
                         "held-out row of weight 0 still changes the others' gradients; "
                         "cross-validate it with separate fits on each fold's rows.")
    for name in ("eval_set", "eval_base_margin"):
        if name in fit_kwargs:
            raise ValueError(f"cv: {name} is not allowed; each fold is scored on its held-out "
                             "rows, and best_round comes from the mean curve.")
    columns = frames.column_names(X)
    X = read_shared_X(X)  # read once for every fold
    fit_kwargs["feature_names"] = check.check_feature_names(fit_kwargs.get("feature_names"),
                                                            columns, X.shape[1])
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
            labels = check.check_y(y, n_rows, objective)
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
        config_rows, n_configs = member_rows(params, fit_kwargs)
        if "sample_weight" in config_rows:
            raise ValueError("cv: sweep sample_weight through the sample_weight argument, not "
                             "params (the fold masks multiply it).")
    # Flat members, configuration-major: member c * n_folds + k is config c on fold k.
    rows = {name: jnp.repeat(values, n_folds, axis=0) for name, values in config_rows.items()}
    rows["sample_weight"] = jnp.tile(jnp.asarray(train_weight), (n_configs, 1))
    rows["_valid_weight"] = jnp.tile(jnp.asarray(valid_weight), (n_configs, 1))
    fit_kwargs = dict(fit_kwargs, eval_metric=eval_metric, group=group)
    models = vmapped_fit(objective, X, y, rows, n_configs * n_folds, fit_kwargs, batch_size)

    shape = (n_folds,) if params is None else (n_configs, n_folds)
    models = _reshaped(models, shape)
    history = {key: np.asarray(values) for key, values in models.history.items()}
    mean = {key: values.mean(axis=-2) for key, values in history.items()}
    std = {key: values.std(axis=-2) for key, values in history.items()}
    metric = resolve_metrics(eval_metric, objective, False, group is not None)[0]
    # By name: the history's keys come back sorted from the vmapped fit, not in the
    # order of eval_metric.
    watched = mean[f"valid:{metric_name(metric)}"]
    finite = np.where(np.isnan(watched), -np.inf if metric.higher_is_better else np.inf, watched)
    best = (np.argmax if metric.higher_is_better else np.argmin)(finite, axis=-1)
    best_score = np.take_along_axis(watched, best[..., None], axis=-1)[..., 0]
    return CVResult(models, folds, history, mean, std, best, best_score)


# The learning rates ``fit_auto`` cross-validates by default, all in one program.
AUTO_LEARNING_RATES = (0.03, 0.1, 0.3)
# Rounds without improvement after which a fold model of ``fit_auto`` stops
# (docs/accuracy.md measures it against growing every model to ``max_trees``).
AUTO_EARLY_STOPPING_ROUNDS = 50


class AutoFit(NamedTuple):
    """What ``fit_auto`` returns.

    Attributes:
      model: the Booster fitted on every row with the chosen settings.
      learning_rate: the chosen learning rate.
      n_trees: the chosen number of trees (the best round of the cross-validation + 1).
      cv: the ``CVResult`` they were chosen from, at the chosen depth. Axis 0 of its
        arrays: the rates; with ``grid``, the candidates, each combination of the
        grid's values (in ``itertools.product`` order) with every rate in turn.
      depth: the depth of the trees (the chosen one of ``depths``).
      cv_by_depth: {depth: CVResult} for every depth cross-validated, with the chosen
        growth policy.
      settings: {name: value}, the chosen value of each setting of ``grid``; {} without.
      grow_policy: the growth policy of the trees (the chosen one of ``grow_policies``).
      cv_by_policy: {grow_policy: CVResult} for every policy cross-validated, at the
        chosen depth.
    """

    model: Booster
    learning_rate: float
    n_trees: int
    cv: CVResult
    depth: int = 6
    cv_by_depth: dict[int, CVResult] | None = None
    settings: dict[str, float] | None = None
    grow_policy: str = "oblivious"
    cv_by_policy: dict[str, CVResult] | None = None


@functools.partial(jax.jit, static_argnums=1)
def _reshaped(models: Booster, shape: tuple[int, ...]) -> Booster:
    """The stacked models with their leading member axis as ``shape``, as one program
    (eagerly, each array's reshape compiled one of its own)."""
    return jax.tree.map(lambda a: a.reshape(shape + a.shape[1:]), models)


def fit_auto(loss: "str | Objective | Callable", X, y, *, max_trees: int = 1000,
             learning_rates=AUTO_LEARNING_RATES, depths=None, grow_policies=None,
             grid: Mapping[str, Any] | None = None, n_folds: int = 5,
             early_stopping_rounds: int | None = AUTO_EARLY_STOPPING_ROUNDS, group=None,
             sample_weight=None, eval_metric=None, fold_seed: int = 0,
             batch_size: int | None = None, **fit_kwargs) -> AutoFit:
    """A fit that chooses its own learning rate, number of trees and, if asked, depth
    and growth policy, for users who do not tune.

    Every rate of ``learning_rates`` is cross-validated over ``n_folds`` folds for up to
    ``max_trees`` rounds: rates x folds models trained as one vmapped program (``cv``
    with a sweep, the learning rate being traced). The (rate, round) with the best mean
    held-out score of the first metric is refitted on every row: that rate, and the
    round + 1 trees. Each fold model stops once its held-out score has not improved
    for ``early_stopping_rounds`` rounds, so the cost is about (rates x folds) fits of
    the rounds each rate needs plus that patience, and one refit; at most (rates x
    folds + 1) fits of ``max_trees`` trees. With ``depths``, this is done once per
    depth (a depth is a shape, so each compiles its own program) and the best (depth,
    rate, round) wins, the earlier depth of the list on a tie; ``grow_policies`` the
    same for growth policies (with both, every (depth, policy) pair, depths first).
    With ``grid``, every
    combination of its values is cross-validated with every rate in the same vmapped
    program (they are traced settings, as ``fit_many`` sweeps them), and the best
    (combination, rate, round) wins, the earlier candidate on a tie.

    Example::

        auto = jaxgbt.fit_auto("logistic", X, y)
        auto.model.predict(X_test); auto.learning_rate, auto.n_trees
        jaxgbt.fit_auto("logistic", X, y, depths=[4, 6, 8]).depth
        jaxgbt.fit_auto("poisson", X, y, grow_policies=["oblivious", "depthwise"]).grow_policy
        jaxgbt.fit_auto("softmax", X, y, grid={"min_data_in_leaf": [0, 20]}).settings

    Args:
      loss, X, y: as for ``jaxgbt.fit``.
      max_trees: the most trees the cross-validation grows (>= 1).
      learning_rates: the rates to choose from (each as ``fit`` checks it).
      depths: depths to choose from (distinct integers in [1, 12]); None keeps
        ``depth`` (``fit``'s default 6, or the one passed).
      grow_policies: growth policies to choose from (distinct, each "oblivious",
        "depthwise" or "lossguide"); None keeps ``grow_policy`` (``fit``'s default
        "oblivious", or the one passed). Oblivious trees win on most small and medium
        sets, the others on some larger ones (docs/training.md, "Growth policies").
      grid: {name: list of values} of traced ``fit`` settings to choose from as well
        (``spec.TRACED`` but ``learning_rate``, ``base_score``, ``sample_weight`` and
        ``seed``: e.g. ``l2``, ``min_data_in_leaf``, ``subsample``), each value checked
        as ``fit`` checks it; None chooses none.
      early_stopping_rounds: the patience of each fold model (``cv``); None grows
        every model to ``max_trees``.
      n_folds, group, sample_weight, eval_metric, fold_seed, batch_size: as for ``cv``
        (``eval_metric``'s first metric chooses; default the objective's own).
      **fit_kwargs: any other ``fit`` setting, the same for every fit (regularisation,
        categorical columns, ...); not ``n_trees`` or ``learning_rate``, which this
        chooses, nor ``depth`` together with ``depths`` (``grow_policy`` with
        ``grow_policies``). ``one_hot_max_size`` is 64
        unless given: the folds' weights are traced, so their categorical columns are
        one-hot (target statistics are computed on the host), and the refit encodes
        them as the folds did.

    Returns:
      An AutoFit.
    """
    spec.check_keywords(fit_kwargs, CV_KEYWORDS, "fit_auto", renamed=spec.CV_NAMES)
    rates, shape_settings = _auto_choices(max_trees, learning_rates, depths, grow_policies,
                                          early_stopping_rounds, fit_kwargs)
    fit_kwargs = {"one_hot_max_size": categorical.ONE_HOT_MAX_SIZE, **fit_kwargs}
    candidates = [(combination, rate) for combination in _grid_combinations(grid, fit_kwargs)
                  for rate in rates]
    sweep = {"learning_rate": [rate for _, rate in candidates],
             **{name: [combination[name] for combination, _ in candidates]
                for name in candidates[0][0]}}
    objective = resolve(loss, fit_kwargs.get("link"))
    metric = resolve_metrics(eval_metric, objective, False, group is not None)[0]
    worst = -np.inf if metric.higher_is_better else np.inf
    results, best = {}, None  # best: (score, shape setting, rate index)
    for setting in shape_settings:
        result = cv(loss, X, y, n_folds=n_folds, group=group, sample_weight=sample_weight,
                    eval_metric=eval_metric, fold_seed=fold_seed, batch_size=batch_size,
                    params=sweep, n_trees=max_trees,
                    early_stopping_rounds=early_stopping_rounds, **setting, **fit_kwargs)
        results[setting.get("depth"), setting.get("grow_policy")] = result
        scores = np.where(np.isnan(result.best_score), worst, result.best_score)
        chosen = int((np.argmax if metric.higher_is_better else np.argmin)(scores))
        better = np.greater if metric.higher_is_better else np.less
        if best is None or better(scores[chosen], best[0]):
            best = (scores[chosen], setting, chosen)
    _, setting, chosen = best
    depth, policy = setting.get("depth"), setting.get("grow_policy")
    result = results[depth, policy]
    n_trees = int(result.best_round[chosen]) + 1
    combination, rate = candidates[chosen]
    model = fit(loss, X, y, n_trees=n_trees, learning_rate=rate, group=group,
                sample_weight=sample_weight, **setting, **combination, **fit_kwargs)
    by_depth = {model.depth if d is None else d: value
                for (d, p), value in results.items() if p == policy}
    by_policy = {model.grow_policy if p is None else p: value
                 for (d, p), value in results.items() if d == depth}
    return AutoFit(model, rate, n_trees, result, model.depth, by_depth, combination,
                   model.grow_policy, by_policy)


# Traced settings that fit_auto's grid cannot hold: chosen by fit_auto itself (the rate),
# or per row or per fit rather than a regularisation to choose.
_NOT_IN_GRID = ("learning_rate", "base_score", "sample_weight", "seed")


def _grid_combinations(grid, fit_kwargs: dict) -> list[dict]:
    """Every combination of ``fit_auto``'s ``grid`` values as {name: float}, in
    ``itertools.product`` order ([{}] for no grid); each name and value checked."""
    if grid is None:
        return [{}]
    if not isinstance(grid, Mapping) or not grid:
        raise TypeError(f"grid must be a non-empty dict of setting name -> list of values; "
                        f"got {grid!r}.")
    values = {}
    for name, choices in grid.items():
        if name not in spec.TRACED or name in _NOT_IN_GRID:
            allowed = ", ".join(n for n in spec.TRACED if n not in _NOT_IN_GRID)
            hint = (" (use learning_rates=)" if name == "learning_rate"
                    else " (use depths=)" if name == "depth" else "")
            raise ValueError(f"grid[{name!r}]: fit_auto's grid holds traced fit settings "
                             f"it can sweep in one program: {allowed}{hint}.")
        if name in fit_kwargs:
            raise ValueError(f"fit_auto: pass {name}= or grid[{name!r}], not both.")
        if isinstance(choices, (str, bytes)) or np.ndim(choices) != 1 or len(choices) == 0:
            raise TypeError(f"grid[{name!r}] must be a non-empty list of numbers; got "
                            f"{choices!r}.")
        values[name] = [float(spec.check_traced(name, value, f"grid[{name!r}][{i}]"))
                        for i, value in enumerate(choices)]
    return [dict(zip(values, combination, strict=True))
            for combination in itertools.product(*values.values())]


def _auto_choices(max_trees, learning_rates, depths, grow_policies, early_stopping_rounds,
                  fit_kwargs: dict) -> tuple[list[float], list[dict]]:
    """Checks ``fit_auto``'s own arguments; returns the rates as floats and one dict of
    fit settings per (depth, growth policy) to try: {"depth": d} and
    {"grow_policy": p} where ``depths`` and ``grow_policies`` are given ([{}] when
    neither is: ``depth`` and ``grow_policy`` as given)."""
    for name in ("n_trees", "learning_rate", "params"):
        if name in fit_kwargs:
            raise ValueError(f"fit_auto chooses {name.replace('params', 'the sweep')} itself; "
                             f"drop {name}= (use max_trees= and learning_rates= to bound "
                             "the choice), or call jaxgbt.fit / jaxgbt.cv.")
    check.check_int(max_trees, "max_trees", 1)
    if early_stopping_rounds is not None:
        check.check_int(early_stopping_rounds, "early_stopping_rounds", 1)
    if isinstance(learning_rates, (str, bytes)) or not np.ndim(learning_rates) == 1 \
            or len(learning_rates) == 0:
        raise TypeError(f"learning_rates must be a non-empty list of numbers; got "
                        f"{learning_rates!r}.")
    rates = []
    for i, rate in enumerate(learning_rates):
        if callable(rate):
            raise TypeError(f"learning_rates[{i}] is a schedule; fit_auto chooses among "
                            "constant rates (a schedule can be passed to jaxgbt.cv or fit).")
        rates.append(float(spec.check_traced("learning_rate", rate, f"learning_rates[{i}]")))
    by_depth = [{}] if depths is None else [{"depth": d} for d in _checked_depths(depths,
                                                                                 fit_kwargs)]
    if grow_policies is None:
        return rates, by_depth
    if "grow_policy" in fit_kwargs:
        raise ValueError("fit_auto: pass grow_policy= or grow_policies=, not both "
                         "(grow_policies= lists the policies to choose from).")
    if isinstance(grow_policies, (str, bytes)) or np.ndim(grow_policies) != 1 \
            or len(grow_policies) == 0:
        raise TypeError(f"grow_policies must be a non-empty list of names; got "
                        f"{grow_policies!r}.")
    checked = [spec.check_mode(policy, f"grow_policies[{i}]", GrowPolicy)
               for i, policy in enumerate(grow_policies)]
    if len(set(checked)) != len(checked):
        raise ValueError(f"grow_policies must be distinct; got {list(grow_policies)!r}.")
    return rates, [{**setting, "grow_policy": policy} for setting in by_depth
                   for policy in checked]


def _checked_depths(depths, fit_kwargs: dict) -> list[int]:
    if "depth" in fit_kwargs:
        raise ValueError("fit_auto: pass depth= or depths=, not both (depths= lists the "
                         "depths to choose from).")
    if isinstance(depths, (str, bytes)) or np.ndim(depths) != 1 or len(depths) == 0:
        raise TypeError(f"depths must be a non-empty list of integers; got {depths!r}.")
    checked = [check.check_int(d, f"depths[{i}]", 1, MAX_DEPTH) for i, d in enumerate(depths)]
    if len(set(checked)) != len(checked):
        raise ValueError(f"depths must be distinct; got {list(depths)!r}.")
    return checked


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
