"""Every setting of ``fit``, checked once on the host, before any data is read or traced.

``fit``'s arguments fall in two groups:
- traced hyperparameters (``TRACED``): they become the f32 (or u32 seed) arrays of
  ``BoostParams``, so a new value neither recompiles nor stops ``jax.vmap``; these are
  what ``fit_many`` sweeps, checked per member with the same ``check_traced`` as here;
- static settings: everything else. They decide shapes or code and end up in the
  hashable ``BoostConfig`` (``build_config``).
Modes are ``Literal`` types owned by the module of their concept (``core.config``,
``objectives.derivatives``) and checked here with ``check_mode``.
"""

import typing
from collections.abc import Collection, Iterable, Mapping
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.config import (
    ROW_AXIS,
    BoostConfig,
    Boosting,
    GrowPolicy,
    MultiStrategy,
    RowSampling,
    SplitCurvature,
)
from jaxgbt.core.constraints import interaction_sets
from jaxgbt.core.layout import default_max_leaves, layout
from jaxgbt.core.round import BoostParams
from jaxgbt.core.sampling import SamplingParams, sample_capacity, seed_key
from jaxgbt.core.split import SplitParams
from jaxgbt.data import categorical
from jaxgbt.data import validation as check
from jaxgbt.objectives import Objective
from jaxgbt.objectives.derivatives import Curvature

LossKind = Literal["row", "group", "dataset"]

# Fractions in (0, 1] and penalties >= 0 among the traced hyperparameters.
RATES = ("subsample", "colsample_bytree", "colsample_bylevel", "colsample_bynode",
         "goss_top_rate", "goss_other_rate")
NONNEGATIVE = ("l2", "l1", "min_child_weight", "min_data_in_leaf",
               "hessian_floor", "random_strength", "bagging_temperature", "leaf_shrinkage",
               "max_delta_step")
# fit's arguments that are traced arrays, so they can differ between vmapped models
# (``min_split_gain`` may be negative: ``min_split_gain`` below checks it).
TRACED = ("learning_rate", "l2", "l1", "min_split_gain", *NONNEGATIVE[2:], "base_score",
          "sample_weight", "seed", *RATES)


# The other libraries' ways to weigh rows by their class: XGBoost's scale_pos_weight,
# LightGBM's class_weight and is_unbalance, CatBoost's class_weights and auto_class_weights.
CLASS_WEIGHT_NAMES = ("scale_pos_weight", "class_weight", "class_weights", "auto_class_weights",
                      "is_unbalance")

# The names XGBoost, LightGBM, CatBoost and scikit-learn's HistGradientBoosting give
# fit's settings, where jaxgbt's differ: a keyword jaxgbt does not take is answered with
# its own name (``check_keywords``). A value is jaxgbt's keyword, then what else to know.
OTHER_LIBRARIES_NAMES = {
    **dict.fromkeys(("n_estimators", "num_boost_round", "num_iterations", "num_rounds",
                     "nrounds", "iterations", "num_trees", "max_iter"), "n_trees"),
    "max_depth": "depth",
    **dict.fromkeys(("eta", "shrinkage_rate"), "learning_rate"),
    **dict.fromkeys(("reg_lambda", "lambda", "lambda_l2", "l2_leaf_reg",
                     "l2_regularization"), "l2"),
    **dict.fromkeys(("reg_alpha", "lambda_l1"), "l1"),
    **dict.fromkeys(("gamma", "min_split_loss", "min_gain_to_split"), "min_split_gain"),
    **dict.fromkeys(("min_sum_hessian_in_leaf", "min_hessian"), "min_child_weight"),
    **dict.fromkeys(("min_child_samples", "min_data_per_leaf", "min_samples_leaf"),
                    "min_data_in_leaf"),
    **dict.fromkeys(("num_leaves", "max_leaf_nodes"),
                    'max_leaves, with grow_policy="lossguide"'),
    **dict.fromkeys(("max_bin", "max_bins", "border_count"),
                    "n_bins, which counts the missing values' bin too"),
    **dict.fromkeys(("random_state", "random_seed", "bagging_seed"), "seed"),
    "feature_fraction": "colsample_bytree",
    "feature_fraction_bynode": "colsample_bynode",
    "rsm": "colsample_bylevel",
    "bagging_fraction": "subsample",
    "bootstrap_type": "sampling",
    "boosting_type": 'boosting ("plain" or "ordered"); LightGBM\'s "goss" is '
                     'sampling="goss", its "rf" jaxgbt.fit_forest',
    **dict.fromkeys(("cat_features", "categorical_feature", "enable_categorical"),
                    "categorical_features"),
    "max_cat_to_onehot": "one_hot_max_size",
    **dict.fromkeys(("early_stopping_round", "od_wait", "n_iter_no_change"),
                    "early_stopping_rounds, with an eval_set"),
    "leaf_estimation_iterations": "leaf_newton_steps",
    **dict.fromkeys(("objective", "loss_function"), "loss"),
    "num_class": "n_outputs, which softmax reads from the labels",
    "init_score": "base_margin",
    "weight": "sample_weight, one weight per row",
    **dict.fromkeys(CLASS_WEIGHT_NAMES, "sample_weight, one weight per row; JaxGBTClassifier "
                                        "takes class_weight ('balanced' or {label: weight})"),
    "poisson_max_delta_step": "max_delta_step, which holds every leaf value to "
                              "[-max_delta_step, max_delta_step] as XGBoost's does (LightGBM's "
                              "poisson_max_delta_step raises the Poisson Hessian instead)",
    "monotonic_cst": "monotone_constraints",
    "interaction_cst": "interaction_constraints",
    "top_rate": "goss_top_rate",
    "other_rate": "goss_other_rate",
    **dict.fromkeys(("query", "qid", "group_id"), "group"),
    **dict.fromkeys(("sampling_method", "data_sample_strategy"), "sampling"),
    "baseline": "base_margin",
    **dict.fromkeys(("eval_init_score", "base_margin_eval_set"), "eval_base_margin"),
    "valid_sets": "eval_set",
    "metric": "eval_metric",
    "verbosity": "verbose",
    "xgb_model": "init_model",
    **dict.fromkeys(("device", "device_type", "task_type"), "devices"),
    **dict.fromkeys(("n_jobs", "nthread", "num_threads", "thread_count"),
                    "devices, which takes JAX devices, not threads: a CPU device runs on "
                    "every core"),
    "boost_from_average": "base_score, whose default starts from the loss's best "
                          "constant",
    "leaf_estimation_method": 'hessian ("exact": Newton steps, "constant": gradient '
                              "steps)",
    "simple_ctr": "target_statistic",
    **dict.fromkeys(("verbose_eval", "silent", "logging_level"), "verbose"),
    "snapshot_file": "checkpoint_path",
    "snapshot_interval": "checkpoint_every",
}


# Other libraries' settings with no jaxgbt keyword, answered with what does the same
# (rather than with the nearest name: ``n_jobs`` is not ``n_bins``).
FIT_INSTEAD = {
    "tree_method": 'jaxgbt\'s trees are always grown from histograms (XGBoost\'s "hist"); '
                   "grow_policy chooses their shape",
    **dict.fromkeys(("bagging_freq", "subsample_freq", "sampling_frequency"),
                    "rows are drawn anew every round when subsample < 1"),
    "use_best_model": "after early stopping, predict uses the trees up to best_round by "
                      "default",
    "extra_trees": "no random thresholds; random_strength adds noise to the split scores",
    "linear_tree": "the leaves hold constants, not linear models",
    **dict.fromkeys(("eval_sample_weight", "sample_weight_eval_set"),
                    "give each eval_set entry its weights: eval_set=[(X_val, y_val, w_val)]"),
}


# cv's and fit_auto's own names in the other libraries' cross-validation calls
# (``xgboost.cv``, ``lightgbm.cv``, ``catboost.cv``).
CV_NAMES = {**OTHER_LIBRARIES_NAMES,
            **dict.fromkeys(("nfold", "fold_count", "num_folds", "n_splits"), "n_folds"),
            "partition_random_seed": "fold_seed"}


def keyword_hint(name: str, accepted: Collection[str]) -> str:
    """``check.keyword_hint`` with fit's names in other libraries."""
    return check.keyword_hint(name, accepted, renamed=OTHER_LIBRARIES_NAMES,
                              instead=FIT_INSTEAD)


def check_keywords(given: Iterable[str], accepted: Collection[str], where: str,
                   error: type[Exception] = TypeError,
                   renamed: Mapping[str, str] = OTHER_LIBRARIES_NAMES) -> None:
    """``check.check_keywords`` with fit's names in other libraries (``renamed``)."""
    check.check_keywords(given, accepted, where, renamed=renamed, instead=FIT_INSTEAD,
                         error=error)


# Decorates fit and the other calls that take its settings as keywords.
keywords_checked = check.keywords_checked(renamed=OTHER_LIBRARIES_NAMES, instead=FIT_INSTEAD)

# The patience of early stopping on a validation set held out by eval_fraction (the
# command line's --eval-fraction, the scikit-learn estimators' eval_fraction).
DEFAULT_EARLY_STOPPING_ROUNDS = 50

# The scikit-learn estimators' constructors answer scikit-learn's validation_fraction
# with their eval_fraction, and JaxGBTClassifier's the class-weight names with its
# class_weight.
ESTIMATOR_NAMES = {**OTHER_LIBRARIES_NAMES, "validation_fraction": "eval_fraction"}
CLASSIFIER_NAMES = {**ESTIMATOR_NAMES,
                    **dict.fromkeys(CLASS_WEIGHT_NAMES, "class_weight, 'balanced' or "
                                                        "{label: weight}")}
estimator_keywords_checked = check.keywords_checked(renamed=ESTIMATOR_NAMES,
                                                    instead=FIT_INSTEAD)
classifier_keywords_checked = check.keywords_checked(renamed=CLASSIFIER_NAMES,
                                                     instead=FIT_INSTEAD)


def check_mode(value, name: str, mode) -> str:
    """``value`` if it is one of the strings of the ``Literal`` type ``mode``."""
    return check.check_choice(value, name, typing.get_args(mode))


def check_split_curvature(split_curvature, grow_policy: str, monotone_constraints
                          ) -> str | None:
    """``split_curvature`` (None: chosen by ``search_defaults``) checked against the
    growth policy: depthwise and leaf-wise trees bound each leaf under
    ``monotone_constraints`` by values the search computes, which a search by weights
    would give in other units than the Newton leaves'."""
    if split_curvature is None:
        return None
    check_mode(split_curvature, "split_curvature", SplitCurvature)
    if (split_curvature == "weight" and monotone_constraints is not None
            and grow_policy != "oblivious"):
        raise ValueError(
            f"split_curvature='weight' with monotone_constraints needs "
            f"grow_policy='oblivious', got {grow_policy!r}: {grow_policy} trees bound "
            "their leaves by the search's values, which would not be the Newton leaves'. "
            "Use grow_policy='oblivious', or split_curvature='hessian'.")
    return split_curvature


# The search's defaults, by regime (``search_defaults``): CatBoost's in its regime, the
# Newton search of XGBoost and LightGBM with l2 = 1 elsewhere.
CATBOOST_SEARCH = {"split_curvature": "weight", "score_function": "cosine", "l2": 3.0}
NEWTON_SEARCH = {"split_curvature": "hessian", "score_function": "l2", "l2": 1.0}


def labels_are_values(y, kind: LossKind, vector_output: bool) -> bool:
    """Whether a per-row loss's labels are values, not classes: anything but labels of
    0s and 1s (one label or one per output; for a dict of arrays, every array) and a
    class index per row of a vector output.

    Read from the labels, not the loss, so that a loss written by hand fits the model of
    its built-in twin: a logistic loss of one's own on 0/1 labels reads them as classes,
    squared error, Poisson or Tweedie on any other labels as values (Poisson counts that
    are all 0 or 1 as classes), and so does a loss of counts and exposures given as a
    dict. Ranking and Cox's losses (``kind`` "group", "dataset") are not read as values."""
    if kind != "row":
        return False
    arrays = [np.asarray(a) for a in y.values()] if isinstance(y, Mapping) else [np.asarray(y)]
    class_index = vector_output and not isinstance(y, Mapping) and arrays[0].ndim == 1
    zero_one = all(bool(np.all((a == 0) | (a == 1))) for a in arrays)
    return not (class_index or zero_one)


def catboost_regime(encoder, y, kind: LossKind, vector_output: bool, grow_policy: str,
                    n_rows: int, distributed: bool, monotone_constraints=None) -> bool:
    """Whether a fit is in CatBoost's regime: fewer than ``categorical.SMALL_DATA_ROWS``
    training rows of one process whose labels ``y`` are values (``labels_are_values``)
    or that split on a column of target statistics (there by default every column of
    more than two categories, ``categorical.default_one_hot_max_size``), with oblivious
    trees, or with depthwise or leaf-wise ones without ``monotone_constraints`` (which
    they cannot search by weights: ``check_split_curvature``). The labels are read only
    on few rows of one process."""
    with_statistics = encoder is not None and any(
        column.kind == categorical.TARGET for column in encoder.columns)
    small = n_rows < categorical.SMALL_DATA_ROWS and not distributed
    searchable = grow_policy == "oblivious" or monotone_constraints is None
    return small and searchable and (with_statistics
                                     or labels_are_values(y, kind, vector_output))


def search_defaults(values: dict, encoder, y, kind: LossKind, vector_output: bool,
                    grow_policy: str, n_rows: int, distributed: bool,
                    monotone_constraints=None) -> dict:
    """``values`` ({"split_curvature", "score_function", "l2"}: each as given, or None)
    with each None replaced: by CatBoost's defaults in its regime (``catboost_regime``),
    the search by weights, its cosine score and l2 = 3, else by the Newton search
    ranked by its gain with l2 = 1.

    Why: on small data with target statistics CatBoost's three together were better
    beyond noise than the Newton defaults on 15 of 26 (dataset, metric) rows of the
    accuracy suite, its multiclass tasks and four held-out sets with oblivious trees,
    and worse on none; on small data whose labels are values, on 4 of 6 regression and
    count rows, and worse on none. Depthwise and leaf-wise trees with the Newton search
    were worse than the oblivious defaults on 11 and 12 of 18 rows of the five sets and
    five tasks, with the three on 2 and 3. Outside it the search by weights was worse on
    3 of 23 rows and better on none, l2 = 3 worse on the larger multiclass sets and
    small classes without statistics (digits), and the three worse on a regression set
    of 5,093 training rows (docs/accuracy.md, "The split search by weights" and "Small
    regression and count data")."""
    regime = CATBOOST_SEARCH if catboost_regime(
        encoder, y, kind, vector_output, grow_policy, n_rows, distributed,
        monotone_constraints) else NEWTON_SEARCH
    return {name: regime[name] if value is None else value for name, value in values.items()}


def check_traced(name: str, value, label: str | None = None):
    """A concrete value of the traced hyperparameter ``name`` (a float, or an int seed),
    checked as ``fit`` checks it; ``label`` names it in errors (default ``name``)."""
    label = label or name
    if name == "learning_rate":
        return check.check_learning_rate(value, label)
    if name in RATES:
        return check.check_rate(value, label)
    if name in NONNEGATIVE:
        return check.check_nonnegative(value, label)
    if name == "min_split_gain":
        return check.check_min_split_gain(value, label)
    if name == "seed":
        return value if check.is_traced(value) else check.check_int(value, label, 0, 2**32 - 1)
    raise ValueError(f"{name!r} is not a traced hyperparameter of fit; use one of {TRACED}.")


def min_split_gain(value, grow_policy: str):
    """``fit``'s ``min_split_gain``, checked, with its default for None: -inf for oblivious
    trees, whose every level then splits on its best-ranked candidate as CatBoost grows
    its symmetric trees (docs/accuracy.md: better than 0 on 4 of 52 rows of the suite and
    its held-out sets, worse on none), and 0 for depthwise and leaf-wise trees.

    A negative value (a level may split at a loss of gain) is for oblivious trees alone:
    depthwise and leaf-wise trees would split nodes for no gain at all. A traced value
    is not checked."""
    if value is None:
        return float("-inf") if grow_policy == "oblivious" else 0.0
    check.check_min_split_gain(value)
    if not check.is_traced(value) and float(value) < 0 and grow_policy != "oblivious":
        raise ValueError(
            f"min_split_gain={value} with grow_policy={grow_policy!r}: a negative "
            "min_split_gain grows every level of an oblivious tree (CatBoost's trees), and "
            "a depthwise or leaf-wise tree would split its nodes for no gain. Use "
            "grow_policy='oblivious', or min_split_gain >= 0.")
    return value


def boost_params(learning_rate, l2, l1, min_split_gain, min_child_weight, hessian_floor,
                 seed, rates: dict, random_strength, bagging_temperature,
                 min_data_in_leaf=0, leaf_shrinkage=0, max_delta_step=0) -> BoostParams:
    """The traced hyperparameters, checked, as ``BoostParams`` (constraints not yet set).

    Args:
      learning_rate: a number, or a schedule (its traced value is then 0, unused).
      rates: {name: value} for each name in ``RATES``.
      min_data_in_leaf: at 0 (not traced) the split search does not estimate rows
        (``SplitParams.min_data_in_leaf`` None), so the default's program is unchanged.
      leaf_shrinkage: likewise, at 0 (not traced) ``BoostParams.leaf_shrinkage`` is None.
      max_delta_step: likewise, at 0 (not traced) ``SplitParams.max_delta_step`` is None:
        no leaf value is held.
    """
    check_traced("learning_rate", learning_rate)
    for name, rate in rates.items():
        check_traced(name, rate)
    check_traced("seed", seed)
    penalties = dict(l2=l2, l1=l1, min_split_gain=min_split_gain,
                     min_child_weight=min_child_weight)
    for name, value in {**penalties, "hessian_floor": hessian_floor,
                        "min_data_in_leaf": min_data_in_leaf,
                        "leaf_shrinkage": leaf_shrinkage,
                        "max_delta_step": max_delta_step,
                        "random_strength": random_strength,
                        "bagging_temperature": bagging_temperature}.items():
        check_traced(name, value)
    as_f32 = {name: jnp.asarray(value, jnp.float32) for name, value in penalties.items()}
    if check.is_traced(min_data_in_leaf) or float(min_data_in_leaf) > 0:
        as_f32["min_data_in_leaf"] = jnp.asarray(min_data_in_leaf, jnp.float32)
    if check.is_traced(max_delta_step) or float(max_delta_step) > 0:
        as_f32["max_delta_step"] = jnp.asarray(max_delta_step, jnp.float32)
    rate = jnp.asarray(0.0 if callable(learning_rate) else learning_rate, jnp.float32)
    sampling = SamplingParams(key=seed_key(seed),
                              **{k: jnp.asarray(v, jnp.float32) for k, v in rates.items()},
                              bagging_temperature=jnp.asarray(bagging_temperature, jnp.float32))
    return BoostParams(learning_rate=rate, split=SplitParams(**as_f32),
                       hessian_floor=jnp.asarray(hessian_floor, jnp.float32), sampling=sampling,
                       random_strength=jnp.asarray(random_strength, jnp.float32),
                       leaf_shrinkage=(jnp.asarray(leaf_shrinkage, jnp.float32)
                                       if check.is_traced(leaf_shrinkage)
                                       or float(leaf_shrinkage) > 0 else None))


def score_noise(random_strength) -> bool:
    """Whether candidates are ranked with noise: ``random_strength`` traced (swept) or > 0.
    At 0 the search is the plain one, not one with zero noise (which ranks by the square
    root of the score, and can break ties between gains that round to one root)."""
    return check.is_traced(random_strength) or float(random_strength) > 0


def loss_kind(objective: Objective, group) -> LossKind:
    """How the loss sees rows: one at a time, per query (``group``), or all together."""
    if objective.kind == "dataset":
        if group is not None:
            raise ValueError(f"group= does not apply to loss {objective.name!r}, which couples "
                             "all rows; drop it.")
        return "dataset"
    if objective.kind == "group" or (group is not None and objective.custom):
        if group is None:
            raise ValueError(f"loss {objective.name!r} ranks rows within queries: pass group= "
                             "(one query id per row).")
        return "group"
    if group is not None:
        raise ValueError(f"group= is for ranking losses, but {objective.name!r} is a per-row "
                         "loss; drop group= or use a ranking loss (lambdarank_ndcg, "
                         "pairwise_logistic, listwise_softmax or your own loss(y_q, f_q, mask_q)).")
    return "row"


def outputs(objective: Objective, y, n_outputs, kind: LossKind) -> tuple[int, bool]:
    """(K, whether f_i is a vector) from the objective, the labels and ``n_outputs``."""
    if n_outputs is not None:
        n_outputs = check.check_int(n_outputs, "n_outputs", 1)
    if objective.n_outputs is not None:
        inferred = objective.n_outputs(y)
        if n_outputs is not None and n_outputs != inferred:
            raise ValueError(f"n_outputs={n_outputs} but loss {objective.name!r} reads "
                             f"{inferred} outputs from y; drop n_outputs.")
        if objective.min_classes is not None and inferred < objective.min_classes:
            raise ValueError(f"{objective.name} needs at least {objective.min_classes} "
                             f"classes in y; got only {inferred}.")
        return inferred, True
    if n_outputs is not None and kind != "row":
        raise ValueError(f"n_outputs applies to per-row losses; {objective.name!r} has one score "
                         "per row.")
    return (1, False) if n_outputs is None else (n_outputs, True)


def check_leaf_newton_steps(leaf_newton_steps, objective: Objective) -> int:
    """An int >= 1, and 1 for losses whose leaves are quantiles of the residuals."""
    leaf_newton_steps = check.check_int(leaf_newton_steps, "leaf_newton_steps", 1)
    if leaf_newton_steps > 1 and objective.leaf_quantile is not None:
        raise ValueError(f"leaf_newton_steps={leaf_newton_steps}: loss {objective.name!r} "
                         "sets its leaves to quantiles of the residuals, not by Newton "
                         "steps; leave leaf_newton_steps at 1 for it.")
    return leaf_newton_steps


def check_run(n_trees, depth, n_bins, learning_rate, verbose) -> None:
    """The sizes of a fit, its verbosity, and a learning-rate schedule's values over the
    rounds (a schedule is traced with the round inside the compiled chunk, so a negative
    or NaN rate would otherwise train silently)."""
    check.check_params(n_trees, depth, n_bins)
    if isinstance(verbose, bool):
        verbose = int(verbose)
    check.check_int(verbose, "verbose", 0)
    if callable(learning_rate):
        try:
            rates = np.asarray(jax.vmap(learning_rate)(jnp.arange(n_trees)), np.float64)
        except Exception as error:  # noqa: BLE001 - re-raised with the argument's name
            raise TypeError("learning_rate: a schedule must be a JAX function of the round "
                            "(an int32 array), such as an optax schedule; calling it on "
                            f"rounds 0..{n_trees - 1} failed: {error}") from error
        bad = np.flatnonzero(~(np.isfinite(rates) & (rates >= 0)))
        if rates.shape != (n_trees,) or bad.size:
            where = (f"at round {bad[0]} it is {rates[bad[0]]}" if bad.size
                     else f"it returned shape {rates.shape[1:]} per round")
            raise ValueError(f"learning_rate: the schedule must give one finite rate >= 0 per "
                             f"round; {where}.")


def check_base_score(base_score, n_outputs: int) -> None:
    """base_score: None, or a finite number or K of them (a traced one: its shape only)."""
    if base_score is None:
        return
    if check.is_traced(base_score):
        shape = jnp.shape(base_score)
    else:
        try:
            values = np.asarray(base_score, np.float64)
        except (TypeError, ValueError) as error:
            raise TypeError(f"base_score={base_score!r} must be a number or one number per "
                            f"output ({n_outputs}); it could not be read as numbers.") from error
        if not np.isfinite(values).all():
            raise ValueError(f"base_score={base_score!r} must be finite.")
        shape = values.shape
    if shape not in ((), (1,), (n_outputs,)):
        raise ValueError(f"base_score has shape {shape}; give one number, or one per output "
                         f"(shape ({n_outputs},)).")


def curvature(objective: Objective, hessian, vector_output: bool) -> Curvature:
    """The curvature to use: ``hessian`` if given, else the objective's own."""
    chosen = objective.curvature if hessian is None else hessian
    if chosen not in typing.get_args(Curvature):
        raise ValueError(f"hessian={hessian!r}: use one of "
                         f"{', '.join(typing.get_args(Curvature))}.")
    if chosen == "full" and not vector_output:
        raise ValueError("hessian='full' is for vector-output losses (n_outputs=K); a scalar "
                         "loss's Hessian is already exact.")
    if chosen == "fisher" and objective.fisher is None:
        raise ValueError(f"hessian='fisher' needs the objective's expected Hessian, which "
                         f"{objective.name!r} does not define; pass an Objective with fisher= "
                         "or use 'exact' or 'constant'.")
    return chosen


def one_output_per_tree(multi_strategy, n_outputs: int, chosen_curvature: str) -> bool:
    """Whether each tree is of one output (``BoostConfig.one_output_per_tree``); refuses
    the strategy where every tree is of the one output already, or with the full Hessian,
    whose steps couple the outputs a tree of one output leaves at 0."""
    check_mode(multi_strategy, "multi_strategy", MultiStrategy)
    if multi_strategy != "one_output_per_tree":
        return False
    if n_outputs == 1:
        raise ValueError("multi_strategy='one_output_per_tree' needs a loss of several "
                         "outputs (softmax's classes, n_outputs=K); this loss has one, so "
                         "every tree is of it already. Drop multi_strategy.")
    if chosen_curvature == "full":
        raise ValueError("multi_strategy='one_output_per_tree' sets each tree's leaves for "
                         "one output, and hessian='full' couples the outputs' steps; use "
                         "one of them.")
    return True


def ordered(boosting: Boosting, objective: Objective, kind: LossKind, chosen_curvature: str,
            mesh) -> bool:
    """Whether to boost in order (``core.ordered``); refuses what it does not support."""
    if boosting != "ordered":
        return False
    if mesh is not None:
        raise ValueError("boosting='ordered' needs all rows on one device: each row's ordered "
                         "margin sums the rows before it in one random order. Drop devices= "
                         "or use boosting='plain'.")
    if kind != "row":
        raise ValueError(f"boosting='ordered' is for per-row losses; loss {objective.name!r} "
                         "couples rows (queries or the whole data set), so a row's gradient "
                         "cannot come from the rows before it alone. Use boosting='plain'.")
    if objective.leaf_quantile is not None:
        raise ValueError(f"boosting='ordered' needs Newton leaf values; loss {objective.name!r} "
                         "sets its leaves to quantiles of the residuals. Use boosting='plain', "
                         "or a smooth loss such as 'huber'.")
    if chosen_curvature == "full":
        raise ValueError("boosting='ordered' does not support hessian='full' (a K x K solve "
                         "per row and round); use hessian='exact' or boosting='plain'.")
    return True


def statistic_orders(value, n_trees: int, n_rows: int, boosting: Boosting,
                     distributed: bool) -> int:
    """P, the orders of the rows target statistics are drawn under, each with its own
    margins (``core.statistic_orders``). None picks ``categorical.default_statistic_orders``,
    or 1 with ordered boosting (which has its own order of the rows) or over several
    processes (each holds its own rows' statistics of one order). At most n_trees."""
    if value is None:
        if boosting == "ordered" or distributed:
            return 1
        return categorical.default_statistic_orders(n_rows, n_trees)
    # Round r grows on order r mod P: orders past the n_trees-th would never be used.
    value = min(check.check_int(value, "statistic_orders", 1), n_trees)
    if value > 1 and boosting == "ordered":
        raise ValueError(f"statistic_orders={value} cannot be used with boosting='ordered', "
                         "which draws its own order of the rows; pass statistic_orders=1 (or "
                         "leave it None) for ordered boosting.")
    if value > 1 and distributed:
        raise ValueError(f"statistic_orders={value} cannot be used with distributed=True: "
                         "each process holds its own rows' target statistics of one order. "
                         "Pass statistic_orders=1 (or leave it None).")
    return value


def leaf_budget(max_leaves, grow_policy: GrowPolicy, depth: int) -> int | None:
    """The static ``BoostConfig.max_leaves``: ``max_leaves`` checked (2 to 2**depth), or
    its default, where trees grow leaf by leaf; None for the other policies."""
    if not layout(grow_policy).leaf_wise:
        if max_leaves is not None:
            raise ValueError(f"max_leaves={max_leaves!r} applies to grow_policy='lossguide' "
                             f"(trees grown leaf by leaf); grow_policy={grow_policy!r} grows "
                             "every node of a level. Pass grow_policy='lossguide', or leave "
                             "max_leaves out.")
        return None
    if max_leaves is None:
        return default_max_leaves(depth)
    max_leaves = check.check_int(max_leaves, "max_leaves", 2)
    if max_leaves > 2**depth:
        raise ValueError(f"max_leaves={max_leaves} is more than a tree of depth={depth} can "
                         f"hold ({2**depth} leaves). Pass max_leaves <= {2**depth}, or a "
                         "larger depth.")
    return max_leaves


def sampling_methods(sampling: RowSampling, subsample, colsample_bytree, colsample_bylevel,
                     colsample_bynode, grow_policy: GrowPolicy) -> tuple[str, bool]:
    """The static row-sampling method ("none" when every row is kept) and whether
    features are sampled."""
    check_mode(sampling, "sampling", RowSampling)

    def below_one(rate):
        return check.is_traced(rate) or float(rate) < 1.0

    if layout(grow_policy).finest_colsample != "colsample_bynode" and below_one(
            colsample_bynode):
        raise ValueError("colsample_bynode applies to grow_policy='depthwise' or "
                         "'lossguide': an oblivious level is one split shared by its nodes. "
                         "Use colsample_bylevel, or grow_policy='depthwise'.")
    row_sampling = "none" if sampling == "bernoulli" and not below_one(subsample) else sampling
    return row_sampling, (below_one(colsample_bytree) or below_one(colsample_bylevel)
                          or below_one(colsample_bynode))


def constraints(monotone, interactions, n_features: int) -> dict:
    """Checked constraint arrays for ``BoostParams`` (absent ones stay out)."""
    out = {}
    if monotone is not None:
        if isinstance(monotone, dict):
            directions = np.zeros(n_features, np.int32)
            for feature, direction in monotone.items():
                check.check_int(feature, "monotone_constraints key", 0, n_features - 1)
                if isinstance(direction, bool) or direction not in (-1, 0, 1):
                    raise ValueError(f"monotone_constraints[{feature}]={direction!r} must be "
                                     "-1 (decreasing), 0 (free) or +1 (increasing).")
                directions[feature] = direction
        else:
            directions = np.asarray(monotone)
            if directions.shape != (n_features,):
                raise ValueError(f"monotone_constraints has {directions.size} entries but X has "
                                 f"{n_features} features; give one of -1, 0, +1 per feature, or "
                                 "a dict {feature index: direction}.")
        if not np.isin(directions, (-1, 0, 1)).all():
            raise ValueError("monotone_constraints must hold only -1, 0 and +1; got "
                             f"{sorted(set(np.asarray(directions).tolist()))}.")
        out["monotone"] = jnp.asarray(directions, jnp.int32)
    if interactions is not None:
        if isinstance(interactions, (str, bytes)) or not all(
                isinstance(group, (list, tuple, set)) for group in interactions):
            raise TypeError("interaction_constraints must be a list of lists of feature "
                            "indices, e.g. [[0, 1], [2, 3, 4]].")
        for group in interactions:
            for feature in group:
                check.check_int(feature, "interaction_constraints entry", 0, n_features - 1)
        out["interaction_sets"] = interaction_sets(interactions, n_features)
    return out


def constraints_by_index(monotone, interactions, feature_names):
    """The constraints with column names (a DataFrame's, or fit's ``feature_names``) in
    place of column indices, as XGBoost and scikit-learn take them: the keys of a
    ``monotone_constraints`` dict and the entries of ``interaction_constraints``' lists.

    Raises:
      ValueError: naming a name that is not a column, or any name when X has none.
    """
    def index(name, where: str):
        if not isinstance(name, str):
            return name
        if feature_names is None:
            raise ValueError(f"{where} names the column {name!r}, but X has no column names "
                             "(an array); give column indices, or pass feature_names=[...].")
        if name not in feature_names:
            raise ValueError(f"{where} names {name!r}, which is not a column of X; its "
                             f"columns are {list(feature_names)}.")
        return list(feature_names).index(name)

    if isinstance(monotone, dict):
        monotone = {index(key, "monotone_constraints"): direction
                    for key, direction in monotone.items()}
    if interactions is not None and not isinstance(interactions, (str, bytes)):
        interactions = [[index(feature, "interaction_constraints") for feature in group]
                        if isinstance(group, (list, tuple, set)) else group
                        for group in interactions]
    return monotone, interactions


def encoded_constraints(encoder, monotone, interactions):
    """Constraints on raw columns, restated on the encoded columns they become."""
    if encoder is None:
        return monotone, interactions
    constraints(monotone, interactions, encoder.n_features)  # checks the raw indices
    if monotone is not None:
        directions = (dict(monotone) if isinstance(monotone, dict)
                      else dict(enumerate(np.asarray(monotone).tolist())))
        bad = [j for j, d in directions.items()
               if d != 0 and encoder.columns[j].kind != categorical.NUMERIC]
        if bad:
            raise ValueError(f"monotone_constraints: features {bad} are categorical, whose "
                             "categories have no order; constrain only numeric features.")
        monotone = {encoder.encoded_columns(j)[0]: d for j, d in directions.items() if d != 0}
    if interactions is not None:
        interactions = [sorted({c for j in group for c in encoder.encoded_columns(j)})
                        for group in interactions]
    return monotone, interactions


def check_loss_output(objective: Objective, y, n_outputs: int, vector_output: bool,
                      kind: LossKind) -> None:
    """The loss must map one row (y_i, f_i), or one group (y_q, f_q, mask_q), to a
    scalar; checked by shapes alone (``jax.eval_shape``, nothing runs)."""
    if kind == "row":
        f_shape = (n_outputs,) if vector_output else ()
        args = (jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], jnp.float32), y),
                jax.ShapeDtypeStruct(f_shape, jnp.float32))
        what = f"one row (f_i of shape {f_shape})"
    else:
        size = 4
        args = (jax.tree.map(lambda a: jax.ShapeDtypeStruct((size,) + a.shape[1:], jnp.float32),
                             y),
                jax.ShapeDtypeStruct((size,), jnp.float32), jax.ShapeDtypeStruct((size,), bool))
        what = "one group (y_q, f_q, mask_q)"
    try:
        out = jax.eval_shape(objective.loss, *args)
    except Exception as error:  # noqa: BLE001 - re-raised with context
        raise TypeError(f"loss {objective.name!r} failed on {what}: {error}") from error
    if not hasattr(out, "shape") or out.shape != ():
        shape = getattr(out, "shape", type(out).__name__)
        hint = (" For a vector-output loss pass n_outputs=K."
                if kind == "row" and not vector_output else "")
        raise ValueError(f"loss {objective.name!r} must return a scalar for {what}; it "
                         f"returned shape {shape}.{hint}")
    if not jnp.issubdtype(out.dtype, jnp.floating):
        # An integer or bool loss has no gradient, and a complex one no order to minimise.
        raise TypeError(f"loss {objective.name!r} must return a real float scalar for {what}; "
                        f"it returned dtype {out.dtype}. Compute the loss in floats (no "
                        "rounding to int, no complex intermediates left in the result: take "
                        "jnp.real or jnp.abs).")


def mesh(devices) -> jax.sharding.Mesh | None:
    """A one-axis mesh of the devices rows are split over, or None for one device."""
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices={devices!r}: use None, 'all', or a list of jax devices.")
        devices = jax.local_devices()
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError("devices must be a non-empty list of jax devices (jax.devices()).")
    if len(devices) == 1:
        return None
    return jax.sharding.Mesh(np.array(devices), (ROW_AXIS,))


# devices=None on CPU with several local devices (``jax_num_cpu_devices``): from this many
# rows and up to this many split features, rows are split over every device. Measured on
# both 2-core machine kinds (docs/benchmarks.md, "Every CPU core"): from 50,000 rows of
# 28 features two devices took 10-35% less per tree (softmax too), at 100 features 3%
# less; at 2,000 and 20,000 rows, and wide or multiclass at 20,000, they were level or
# slower.
AUTO_MESH_MIN_ROWS = 50_000
AUTO_MESH_MAX_FEATURES = 64


def automatic_mesh(n_rows: int, n_columns: int, objective: Objective, kind: LossKind,
                   boosting: str, row_sampling: str, grow_policy: GrowPolicy, *,
                   traced: bool, sparse: bool, chunked: bool) -> jax.sharding.Mesh | None:
    """The mesh of every local CPU device that a fit with ``devices=None`` splits its
    rows over, or None for one device: only where several CPU devices exist, the rows
    and features are within ``AUTO_MESH_MIN_ROWS`` and ``AUTO_MESH_MAX_FEATURES``, and
    the fit uses nothing that one device alone does (a loss that couples rows or
    refreshes leaves from residuals, ordered boosting, sparse features summed from their
    entries, rows read from chunks, hyperparameters traced by ``jax.vmap``, leaf-wise
    trees' windows of rows) nor row sampling, whose draws differ by device: so the model
    is one device's up to the float rounding of the summed histograms."""
    devices = jax.local_devices()
    one_device_only = (kind != "row" or objective.leaf_quantile is not None
                       or boosting == "ordered" or traced or sparse or chunked
                       or row_sampling != "none" or layout(grow_policy).leaf_wise)
    if (len(devices) < 2 or jax.default_backend() != "cpu" or one_device_only
            or n_rows < AUTO_MESH_MIN_ROWS or n_columns > AUTO_MESH_MAX_FEATURES):
        return None
    return mesh(devices)


def check_mesh(row_mesh, devices, objective: Objective, kind: LossKind,
               distributed: bool = False) -> None:
    """Losses that couple rows across devices, or sort residuals, train on one device;
    group losses over several processes keep each process's queries on its device."""
    couples_devices = kind == "dataset" or (kind == "group" and not distributed)
    if row_mesh is not None and (couples_devices or objective.leaf_quantile is not None):
        setting = "distributed=True" if distributed else f"devices={devices!r}"
        raise ValueError(f"{setting}: loss {objective.name!r} needs all rows on one "
                         "device (it couples rows across groups or refreshes leaves from "
                         "sorted residuals); fit it on one device.")


def build_config(objective: Objective, *, depth: int, n_bins: int, n_outputs: int,
                 vector_output: bool, learning_rate, row_mesh, chosen_curvature: str,
                 kind: LossKind, row_sampling: str, column_sampling: bool, subsample,
                 n_rows: int, grow_policy: GrowPolicy, is_ordered: bool,
                 max_leaves: int | None = None,
                 bin_groups=None, sparse_group=None, noisy_scores: bool = False,
                 noise_draws: str = "candidate",
                 leaf_newton_steps: int = 1, score_function: str = "l2",
                 split_curvature: str = "hessian",
                 order_statistics: categorical.OrderStatistics | None = None,
                 missing_values: bool = True,
                 one_output_per_tree: bool = False) -> BoostConfig:
    """The static ``BoostConfig`` of a fit whose settings were checked above."""
    # Sampled rounds grow their trees on the drawn rows alone when their number has a
    # bound known now (``core.sampling``); on one device, outside ordered boosting.
    capacity = (None if is_ordered or row_mesh is not None
                else sample_capacity(row_sampling, subsample, n_rows))
    return BoostConfig(loss=objective.loss, depth=depth, n_bins=n_bins, n_outputs=n_outputs,
                       vector_output=vector_output,
                       learning_rate_schedule=learning_rate if callable(learning_rate) else None,
                       axis_name=None if row_mesh is None else ROW_AXIS,
                       curvature=chosen_curvature, fisher=objective.fisher,
                       grouped=kind != "row", leaf_quantile=objective.leaf_quantile,
                       row_sampling=row_sampling, sample_capacity=capacity,
                       column_sampling=column_sampling, grow_policy=grow_policy,
                       max_leaves=max_leaves,
                       ordered=is_ordered, bin_groups=bin_groups, sparse_group=sparse_group,
                       score_noise=noisy_scores, noise_draws=noise_draws,
                       score_function=score_function,
                       split_curvature=split_curvature,
                       missing_values=missing_values,
                       leaf_newton_steps=leaf_newton_steps,
                       statistic_columns=() if order_statistics is None
                       else order_statistics.columns,
                       statistic_orders=1 if order_statistics is None
                       else order_statistics.n_orders,
                       one_output_per_tree=one_output_per_tree)
