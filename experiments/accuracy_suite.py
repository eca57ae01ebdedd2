"""Accuracy suite: jaxgbt at its defaults against XGBoost, LightGBM, CatBoost and
scikit-learn's HistGradientBoosting on every real dataset, with bootstrap intervals.

Run: .venv/bin/python experiments/accuracy_suite.py [--quick] [--set key=value]

Each dataset of configs/accuracy_suite.toml (the real sets under ../shared/data and those
shipped with scikit-learn) is split at random into train and test once per split seed
(whole queries for ranking). On each split every library fits the task's loss with the
same budget (trees, depth, learning rate) and its defaults otherwise: jaxgbt as
``jaxgbt.fit(loss, X, y, n_trees=, depth=, learning_rate=)``, the anchors as
experiments/_anchors.py builds them. Categorical columns go to each library as its users
would pass them (jaxgbt ``categorical_features``, LightGBM ``categorical_feature``,
CatBoost ``cat_features``, XGBoost ``enable_categorical``, scikit-learn
``categorical_features``).

Every prediction is scored by jaxgbt.metrics: RMSE, Poisson deviance, AUC and log loss,
accuracy and multiclass log loss, NDCG@5, Harrell's C-index. A metric's value is its
mean over the split seeds. The best anchor is the one with the best mean; the difference
jaxgbt - best anchor gets a 95% interval from a paired bootstrap over test rows (queries
for ranking): the same resample of each split's test rows scores both models, and the
resampled differences are averaged over the splits. jaxgbt is within noise where the
interval holds 0 or lies on jaxgbt's better side. Prints one markdown table
(docs/accuracy.md) and writes it with every score to results.json.
"""

import os
import time

import numpy as np
import pandas as pd
from _anchors import Model, anchor_model, categorical_columns, has_model, thread_limit
from _runner import (
    SHARED_DATA,
    format_table,
    load_config,
    output_dir,
    random_split,
    read_dataset,
    write_json,
)
from _scores import bootstrap_weights, percentile_interval, resampled_scores

import jaxgbt
from jaxgbt import metrics

# task -> jaxgbt's loss for it
LOSSES = {"binary": "logistic", "multiclass": "softmax", "regression": "squared_error",
          "poisson": "poisson", "rank": "lambdarank_ndcg", "survival": "cox"}
# task -> its test metrics (jaxgbt.metrics names)
METRICS = {"binary": ("auc", "logloss"), "multiclass": ("accuracy", "multi_logloss"),
           "regression": ("rmse",), "poisson": ("poisson_deviance",), "rank": ("ndcg@5",),
           "survival": ("concordance_index",)}
METRIC_TITLES = {"auc": "AUC", "logloss": "log loss", "accuracy": "accuracy",
                 "multi_logloss": "multi log loss", "rmse": "RMSE",
                 "poisson_deviance": "Poisson deviance", "ndcg@5": "NDCG@5",
                 "concordance_index": "C-index"}
ANCHOR_TITLES = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost",
                 "sklearn-hgb": "sklearn HGB"}


def jaxgbt_model(task: str, cfg: dict, cat_names: list[str]) -> Model:
    """jaxgbt with its defaults but the budget; the categorical columns named."""
    def fit(X, y, group=None):
        return jaxgbt.fit(LOSSES[task], X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"],
                          categorical_features=cat_names or None, group=group)

    return Model(fit, lambda model, X: np.asarray(model.predict(X)))


def models(task: str, X: pd.DataFrame, cfg: dict) -> dict[str, Model]:
    """jaxgbt, then each anchor of ``cfg["anchors"]`` that is installed and has the task."""
    cat_names = categorical_columns(X)
    out = {"jaxgbt": jaxgbt_model(task, cfg, cat_names)}
    for library in cfg["anchors"]:
        if has_model(library, task):
            out[library] = anchor_model(library, task, cfg, cat_names)
    return out


def subsample(X: pd.DataFrame, y: np.ndarray, group, max_rows: int, seed: int):
    """At most ``max_rows`` rows drawn at random (0: all), in their order; whole queries
    where there are queries (as many as fit in max_rows)."""
    if not max_rows or len(y) <= max_rows:
        return X, y, group
    if group is None:
        keep = np.sort(np.random.default_rng(seed).choice(len(y), max_rows, replace=False))
    else:
        order = np.random.default_rng(seed).permutation(np.unique(group))
        sizes = np.bincount(group)[order]
        keep = np.flatnonzero(np.isin(group, order[np.cumsum(sizes) <= max_rows]))
    return (X.iloc[keep].reset_index(drop=True), y[keep],
            None if group is None else group[keep])


def run_split(task: str, data, seed: int, cfg: dict) -> dict:
    """One split: {"fit_s": {library: seconds}, metric: {library: f64[R] resampled scores,
    the first the test set itself}}."""
    X, y, group = data
    train, test = random_split(len(y), seed, cfg["test_fraction"], group)
    test_group = None if group is None else group[test]
    # Resamples drawn from a stream of their own, (seed, 1), not the split's.
    weights = bootstrap_weights(len(test), cfg["n_resamples"], (seed, 1), test_group)
    out = {"fit_s": {}, **{metric: {} for metric in METRICS[task]}}
    with thread_limit(cfg["threads"]):
        for library, model in models(task, X, cfg).items():
            start = time.perf_counter()
            fitted = model.fit(X.iloc[train], y[train],
                               None if group is None else group[train])
            out["fit_s"][library] = time.perf_counter() - start
            prediction = model.predict(fitted, X.iloc[test])
            for metric in METRICS[task]:
                out[metric][library] = resampled_scores(metric, y[test], prediction, weights,
                                                        test_group)
    return out


def summary_rows(name: str, spec: dict, data, splits: list[dict], cfg: dict) -> list[dict]:
    """One table row per metric: each library's mean over the splits, the best anchor, the
    difference jaxgbt - best anchor and its 95% paired bootstrap interval, the verdict."""
    X, y, _ = data
    task, rows = spec["task"], []
    n_cat = len(categorical_columns(X))
    shape = f"{len(y)} x {X.shape[1]}" + (f" ({n_cat} categorical)" if n_cat else "")
    for metric in METRICS[task]:
        higher = metrics.higher_is_better(metric)
        libraries = splits[0][metric]
        mean = {lib: np.mean([split[metric][lib] for split in splits], axis=0)
                for lib in libraries}  # f64[R] each: resamples averaged over the splits
        anchors = [lib for lib in libraries if lib != "jaxgbt"]
        row = dict(dataset=name, task=task, shape=shape, metric=METRIC_TITLES[metric],
                   higher_is_better=higher, **{lib: mean[lib][0] for lib in libraries})
        if anchors:
            best = (max if higher else min)(anchors, key=lambda lib: mean[lib][0])
            difference = mean["jaxgbt"] - mean[best]
            low, high = percentile_interval(difference[1:], cfg["confidence"])
            better = low > 0 if higher else high < 0
            worse = high < 0 if higher else low > 0
            row.update(best_anchor=best, difference=difference[0], ci_low=low, ci_high=high,
                       verdict="win" if better else "loss" if worse else "tie")
        rows.append(row)
    return rows


def table(rows: list[dict], anchors: list[str], confidence: float, digits: int = 4) -> str:
    """The markdown table of ``summary_rows`` rows."""
    def score(key):
        return lambda row: None if row.get(key) is None else f"{row[key]:.{digits}f}"

    def difference(row):
        if "difference" not in row:
            return None
        return (f"{row['difference']:+.{digits}f} "
                f"[{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]")

    def within(row):
        if "verdict" not in row:
            return None
        return {"win": "yes (better)", "tie": "yes", "loss": "no"}[row["verdict"]]

    return format_table(rows, [
        ("dataset", "dataset", ""), ("task", "task", ""), ("rows x features", "shape", ""),
        ("metric", lambda r: f"{r['metric']} ({'higher' if r['higher_is_better'] else 'lower'}"
                             " is better)", ""),
        ("jaxgbt", score("jaxgbt"), ""),
        *((ANCHOR_TITLES[a], score(a), "") for a in anchors),
        ("best anchor", lambda r: ANCHOR_TITLES.get(r.get("best_anchor")), ""),
        (f"jaxgbt - best [{confidence:.0%} CI]", difference, ""),
        ("within noise?", within, "")])


def run_dataset(name: str, spec: dict, cfg: dict):
    """(data, the splits' scores and fit seconds, table rows), or None without its files."""
    data = read_dataset(spec)
    if data is None:
        return None
    data = subsample(*data, spec.get("max_rows", cfg["max_rows"]), cfg["seed"])
    splits = []
    for seed in cfg["split_seeds"]:
        start = time.perf_counter()
        splits.append(run_split(spec["task"], data, seed, cfg))
        first = METRICS[spec["task"]][0]
        print(f"  {name} split {seed} ({time.perf_counter() - start:.0f} s): "
              + ", ".join(f"{lib} {scores[0]:.4f}" for lib, scores in splits[-1][first].items()),
              flush=True)
    return data, splits, summary_rows(name, spec, data, splits, cfg)


def main(cfg: dict) -> dict:
    rows, results, started = [], {}, time.perf_counter()
    for name in cfg["datasets"]:
        spec = cfg["data"][name]
        outcome = run_dataset(name, spec, cfg)
        if outcome is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped", flush=True)
            continue
        (X, y, _), splits, dataset_rows = outcome
        rows += dataset_rows
        results[name] = dict(
            task=spec["task"], rows=len(y), features=X.shape[1],
            categorical=categorical_columns(X), summary=dataset_rows,
            splits=[dict(seed=seed, fit_s=split["fit_s"],
                         scores={metric: {lib: values[0] for lib, values in split[metric].items()}
                                 for metric in METRICS[spec["task"]]})
                    for seed, split in zip(cfg["split_seeds"], splits, strict=True)])
    markdown = table(rows, cfg["anchors"], cfg["confidence"])
    load = os.getloadavg()[0]
    print(f"\n{markdown}\n\n({len(cfg['split_seeds'])} split seeds, {cfg['n_trees']} trees, "
          f"{cfg['n_resamples']} bootstrap resamples; {time.perf_counter() - started:.0f} s, "
          f"load average {load:.1f} at the end)", flush=True)
    write_json(output_dir(cfg) / "results.json",
               dict(config=cfg, table=markdown, results=results))
    return dict(table=markdown, rows=rows, results=results)


if __name__ == "__main__":
    # OpenMP threads that wait by sleeping, read when LightGBM, XGBoost and scikit-learn
    # load (lazily, after this): on cores shared with other work, spinning waits made their
    # 2-thread fits up to 10 times slower. Scores do not depend on it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    main(load_config("accuracy_suite", doc=__doc__))
