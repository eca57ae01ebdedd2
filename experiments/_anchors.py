"""How the experiments call the anchor libraries (LightGBM, XGBoost, CatBoost and
scikit-learn's HistGradientBoosting): each one's estimator for a task, the shared tree
budget in its own parameter names, its native categorical input, and a cap on the
threads of scikit-learn's OpenMP loops.

Tasks: "binary", "multiclass", "regression", "poisson" (counts), "rank" (query groups)
and "survival" (right-censored times, a Cox model). An anchor without a model for a task
(LightGBM and scikit-learn have no Cox model, scikit-learn no ranker) is left out of it.
"""

import contextlib
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

# library -> its top-level module
MODULES = {"lightgbm": "lightgbm", "catboost": "catboost", "xgboost": "xgboost",
           "sklearn-hgb": "sklearn"}

# (library, task) -> (module, estimator class, the parameters that choose the task's loss)
ESTIMATORS: dict[tuple[str, str], tuple[str, str, dict]] = {
    ("lightgbm", "binary"): ("lightgbm", "LGBMClassifier", {}),
    ("lightgbm", "multiclass"): ("lightgbm", "LGBMClassifier", {}),
    ("lightgbm", "regression"): ("lightgbm", "LGBMRegressor", {}),
    ("lightgbm", "poisson"): ("lightgbm", "LGBMRegressor", {"objective": "poisson"}),
    ("lightgbm", "rank"): ("lightgbm", "LGBMRanker", {}),  # lambdarank
    ("catboost", "binary"): ("catboost", "CatBoostClassifier", {}),
    ("catboost", "multiclass"): ("catboost", "CatBoostClassifier", {}),
    ("catboost", "regression"): ("catboost", "CatBoostRegressor", {}),
    ("catboost", "poisson"): ("catboost", "CatBoostRegressor", {"loss_function": "Poisson"}),
    ("catboost", "rank"): ("catboost", "CatBoostRanker", {}),  # YetiRank
    ("catboost", "survival"): ("catboost", "CatBoostRegressor", {"loss_function": "Cox"}),
    ("xgboost", "binary"): ("xgboost", "XGBClassifier", {}),
    ("xgboost", "multiclass"): ("xgboost", "XGBClassifier", {}),
    ("xgboost", "regression"): ("xgboost", "XGBRegressor", {}),
    ("xgboost", "poisson"): ("xgboost", "XGBRegressor", {"objective": "count:poisson"}),
    ("xgboost", "rank"): ("xgboost", "XGBRanker", {}),  # rank:ndcg
    ("xgboost", "survival"): ("xgboost", "XGBRegressor", {"objective": "survival:cox"}),
    ("sklearn-hgb", "binary"): ("sklearn.ensemble", "HistGradientBoostingClassifier", {}),
    ("sklearn-hgb", "multiclass"): ("sklearn.ensemble", "HistGradientBoostingClassifier", {}),
    ("sklearn-hgb", "regression"): ("sklearn.ensemble", "HistGradientBoostingRegressor", {}),
    ("sklearn-hgb", "poisson"): ("sklearn.ensemble", "HistGradientBoostingRegressor",
                                 {"loss": "poisson"}),
}

# library -> the name of its L2 penalty on leaf values
L2_NAMES = {"lightgbm": "reg_lambda", "catboost": "l2_leaf_reg", "xgboost": "reg_lambda",
            "sklearn-hgb": "l2_regularization"}


class Model(NamedTuple):
    """``fit(X, y, group) -> model`` (group: i32[N] query ids of contiguous rows, or None)
    and ``predict(model, X) -> f[N]`` (P(y = 1), values, counts or risks) or ``f[N, K]``
    (class probabilities)."""

    fit: Callable[[Any, Any, Any], Any]
    predict: Callable[[Any, Any], np.ndarray]


def installed(library: str) -> bool:
    """Whether the library's module can be imported."""
    return importlib.util.find_spec(MODULES[library]) is not None


def has_model(library: str, task: str) -> bool:
    """Whether the library is installed and has an estimator for the task."""
    return (library, task) in ESTIMATORS and installed(library)


def budget_params(library: str, cfg: dict) -> dict:
    """The tree budget of ``cfg`` (n_trees, depth, learning_rate, threads, seed) in the
    library's parameter names; everything else stays at the library's default, except
    that leaves are capped at 2**depth (LightGBM's num_leaves and scikit-learn's
    max_leaf_nodes default to 31) and scikit-learn's early stopping is off (its default
    turns it on above 10,000 rows), so that every library grows the same number of trees
    of the same size."""
    T, D, rate, jobs, seed = (cfg[k] for k in ("n_trees", "depth", "learning_rate", "threads",
                                               "seed"))
    return {"lightgbm": dict(n_estimators=T, max_depth=D, num_leaves=2**D, learning_rate=rate,
                             n_jobs=jobs, random_state=seed, verbose=-1),
            "catboost": dict(iterations=T, depth=D, learning_rate=rate, thread_count=jobs,
                             random_seed=seed, verbose=0, allow_writing_files=False),
            "xgboost": dict(n_estimators=T, max_depth=D, learning_rate=rate, tree_method="hist",
                            n_jobs=jobs, random_state=seed),
            "sklearn-hgb": dict(max_iter=T, max_depth=D, max_leaf_nodes=2**D, learning_rate=rate,
                                early_stopping=False, random_state=seed)}[library]


def estimator_class(library: str, task: str):
    module, name, _ = ESTIMATORS[library, task]
    return getattr(importlib.import_module(module), name)


# Categorical columns -----------------------------------------------------------------------


def categorical_columns(X) -> list[str]:
    """The names of a DataFrame's pandas ``category`` columns ([] for an array)."""
    if not isinstance(X, pd.DataFrame):
        return []
    return [name for name in X.columns if isinstance(X[name].dtype, pd.CategoricalDtype)]


def with_string_categories(X):
    """CatBoost's input: categorical columns as strings, missing as the string "NA"."""
    out = X.copy()
    for name in categorical_columns(X):
        out[name] = X[name].astype(object).where(X[name].notna(), "NA").astype(str)
    return out


def native_categorical_params(library: str, cat_names: list[str]) -> dict:
    """Constructor parameters that make the library read the ``category`` columns as
    categories: CatBoost's cat_features, XGBoost's enable_categorical, scikit-learn's
    categorical_features; LightGBM takes its categorical_feature in ``fit``."""
    if not cat_names:
        return {}
    return {"lightgbm": {}, "catboost": dict(cat_features=cat_names),
            "xgboost": dict(enable_categorical=True),
            "sklearn-hgb": dict(categorical_features="from_dtype")}[library]


# Models -------------------------------------------------------------------------------------


def anchor_model(library: str, task: str, cfg: dict, cat_names: list[str] = (),
                 **params) -> Model:
    """The library's estimator for the task at its defaults but the tree budget
    (``budget_params``), the task's loss, native categoricals for ``cat_names`` and
    ``params``.

    A survival label is f[N, 2] (time, event 1 or censored 0); CatBoost's and XGBoost's
    Cox models read it as one signed time (negative where censored) and predict a risk
    (higher is an earlier event). A ranker gets the query ids in each one's form (LightGBM
    query sizes, XGBoost qid, CatBoost group_id).
    """
    cls = estimator_class(library, task)
    cat_names = list(cat_names)
    kwargs = {**budget_params(library, cfg), **ESTIMATORS[library, task][2],
              **native_categorical_params(library, cat_names), **params}
    read = with_string_categories if library == "catboost" and cat_names else (lambda X: X)

    def fit(X, y, group=None):
        fit_args = {}
        if library == "lightgbm" and cat_names:
            fit_args["categorical_feature"] = cat_names
        if task == "survival":
            y = np.where(y[:, 1] > 0, y[:, 0], -y[:, 0])
        if task == "rank":
            fit_args.update({"lightgbm": {"group": query_sizes(group)}, "xgboost": {"qid": group},
                             "catboost": {"group_id": group}}[library])
        return cls(**kwargs).fit(read(X), y, **fit_args)

    def predict(model, X):
        if task in ("binary", "multiclass"):
            p = np.asarray(model.predict_proba(read(X)))
            return p[:, 1] if task == "binary" else p
        return np.asarray(model.predict(read(X)))

    return Model(fit, predict)


def query_sizes(group) -> np.ndarray:
    """i64[Q]: the number of rows of each run of equal query ids, in order."""
    group = np.asarray(group)
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True])
    return np.diff(starts)


def thread_limit(threads: int):
    """A context capping scikit-learn's OpenMP threads at ``threads`` (the other anchors
    take n_jobs / thread_count); a no-op without threadpoolctl."""
    if importlib.util.find_spec("threadpoolctl") is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=threads)
