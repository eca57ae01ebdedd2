"""Categorical defaults: which encoding of categorical columns predicts best, paired over splits.

Run: .venv/bin/python experiments/categorical_defaults.py [--quick] [--set key=value]

Every dataset with categorical columns in ../shared/data (configs/categorical_defaults.toml
says how each is read) is split at random into train and test once per split seed, and on
each split every model is fitted with the same tree budget (trees, depth, learning rate;
defaults otherwise):

* ``jaxgbt one-hot<=S``: ``one_hot_max_size=S`` (one 0/1 column per category up to S
  categories, ordered target statistics above);
* ``jaxgbt ordinal``: the category codes (sorted labels, NaN missing) as plain numbers;
* LightGBM, CatBoost, XGBoost and scikit-learn's HistGradientBoosting with their native
  categorical handling (pandas ``category`` columns; CatBoost ``cat_features``).

A one_hot_max_size that encodes a split exactly as a smaller one did (no column has a
number of categories between the two) gives the same model: it is not fitted again.
Prints per dataset the test metrics' means over the splits and each model's paired
difference to jaxgbt at ``baseline`` with its standard error over the splits, then a
summary; writes every score to results.json.
"""

import statistics

import numpy as np
import pandas as pd
from _anchors import anchor_model, categorical_columns, has_model, thread_limit
from _runner import (
    SHARED_DATA,
    format_table,
    load_config,
    output_dir,
    print_table,
    random_split,
    read_dataset,
    timed,
    write_json,
)
from _scores import accuracy, auc, logloss, multi_logloss, rmse

import jaxgbt

METRICS = {"binary": {"log loss": logloss, "AUC": auc},
           "multiclass": {"log loss": multi_logloss, "accuracy": accuracy},
           "regression": {"RMSE": rmse}}
LOSSES = {"binary": "logistic", "multiclass": "softmax", "regression": "squared_error"}


# Data ----------------------------------------------------------------------------------------


def ordinal(X: pd.DataFrame) -> pd.DataFrame:
    """The categorical columns as float32 codes of their sorted labels, NaN missing."""
    out = X.copy()
    for name in categorical_columns(X):
        codes = X[name].cat.codes.to_numpy().astype(np.float32)
        out[name] = np.where(codes < 0, np.nan, codes).astype(np.float32)
    return out


def encoding_key(X_train: pd.DataFrame, size: int) -> frozenset:
    """The categorical columns that one_hot_max_size=size encodes by target statistics
    (categories seen in training, a missing value counting as one)."""
    return frozenset(name for name in categorical_columns(X_train)
                     if X_train[name].nunique() + X_train[name].isna().any() > size)


# Models --------------------------------------------------------------------------------------


def jaxgbt_model(task: str, cfg: dict, **kwargs):
    """(fit(X, y) -> model, predict(model, X) -> probabilities or values)."""
    def fit(X, y):
        return jaxgbt.fit(LOSSES[task], X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"], seed=cfg["seed"], **kwargs)
    return fit, lambda model, X: np.asarray(model.predict(X))


def models(task: str, X: pd.DataFrame, cfg: dict) -> dict:
    """name -> (fit, predict, one_hot_max_size or None, reads ordinal codes)."""
    out = {f"jaxgbt one-hot<={size}": (*jaxgbt_model(task, cfg, one_hot_max_size=size), size)
           for size in cfg["one_hot_sizes"]}
    out["jaxgbt ordinal"] = (*jaxgbt_model(task, cfg), None)
    for library in cfg["anchors"]:
        if has_model(library, task):
            out[library] = (*anchor_model(library, task, cfg, categorical_columns(X)), None)
    return out


# Measuring -----------------------------------------------------------------------------------


def run_dataset(spec: dict, X: pd.DataFrame, y: np.ndarray, cfg: dict) -> dict:
    """{model: [{metric: score, "fit_s": seconds or None} per split seed]}."""
    task, scores = spec["task"], {}
    X_ordinal = ordinal(X)
    with thread_limit(cfg["threads"]):
        for seed in cfg["split_seeds"]:
            train, test = random_split(len(y), seed, cfg["test_fraction"])
            fitted = {}  # encoding key -> the scores of the model that encoded the split so
            for name, (fit, predict, size) in models(task, X, cfg).items():
                data = X_ordinal if name == "jaxgbt ordinal" else X
                key = None if size is None else encoding_key(data.iloc[train], size)
                if key in fitted:
                    scores.setdefault(name, []).append({**fitted[key], "fit_s": None})
                    continue
                model, fit_s = timed(fit, data.iloc[train], y[train])
                prediction = predict(model, data.iloc[test])
                row = {metric: score(y[test], prediction)
                       for metric, score in METRICS[task].items()}
                scores.setdefault(name, []).append({**row, "fit_s": fit_s})
                if key is not None:
                    fitted[key] = row
            print(f"  split {seed}: " + ", ".join(
                f"{name} {runs[-1][next(iter(METRICS[task]))]:.4f}"
                for name, runs in scores.items()), flush=True)
    return scores


def time_jaxgbt(spec: dict, X: pd.DataFrame, y: np.ndarray, cfg: dict) -> list[dict]:
    """Fit seconds of jaxgbt on the first split for each encoding of it (each
    one_hot_max_size giving a new one, and ordinal): the median of ``timing_repeats`` fits
    after one that compiles, and the width of the matrix the trees split on."""
    train, _ = random_split(len(y), cfg["split_seeds"][0], cfg["test_fraction"])
    rows, seen = [], set()
    for name, (fit, _, size) in models(spec["task"], X, {**cfg, "anchors": []}).items():
        data = (ordinal(X) if size is None else X).iloc[train]
        key = None if size is None else encoding_key(data, size)
        if key in seen:
            continue
        seen.add(key)
        model, first_s = timed(fit, data, y[train])
        seconds = [timed(fit, data, y[train])[1] for _ in range(cfg["timing_repeats"])]
        width = model.encoder.n_encoded if model.encoder is not None else X.shape[1]
        rows.append(dict(model=name, columns=width, first_fit_s=first_s,
                         fit_s=statistics.median(seconds)))
    return rows


def summary(task: str, scores: dict, baseline: str) -> list[dict]:
    """Per model: each metric's mean over the splits, its paired difference to ``baseline``
    (mean and standard error over the splits) and the median fit seconds after the first
    split (which compiles jaxgbt's program)."""
    rows = []
    for name, runs in scores.items():
        row = {"model": name}
        for metric in METRICS[task]:
            values = np.array([run[metric] for run in runs])
            difference = values - np.array([run[metric] for run in scores[baseline]])
            row[metric] = values.mean()
            row[f"{metric} diff"] = difference.mean()
            row[f"{metric} se"] = (difference.std(ddof=1) / np.sqrt(difference.size)
                                   if difference.size > 1 else float("nan"))
        seconds = [run["fit_s"] for run in runs[1:] or runs if run["fit_s"] is not None]
        row["fit_s"] = statistics.median(seconds) if seconds else None
        rows.append(row)
    return rows


def table(task: str, rows: list[dict], baseline: str) -> str:
    columns = [("model", "model", "")]
    for metric in METRICS[task]:
        columns += [(f"test {metric}", metric, ".4f"),
                    (f"diff to {baseline}", f"{metric} diff", "+.4f"),
                    ("+- se", f"{metric} se", ".4f")]
    return format_table(rows, [*columns, ("fit s", "fit_s", ".2f")])


def beyond_noise(row: dict, metric: str, higher_is_better: bool) -> str:
    """'better', 'worse' or 'tie': the difference against twice its standard error."""
    difference, se = row[f"{metric} diff"], row[f"{metric} se"]
    if not np.isfinite(se) or abs(difference) <= 2 * se:
        return "tie"
    return "better" if (difference > 0) == higher_is_better else "worse"


def main(cfg: dict) -> dict:
    baseline = f"jaxgbt one-hot<={cfg['baseline']}"
    results, verdicts = {}, []
    for name in cfg["datasets"]:
        spec = cfg["data"][name]
        data = read_dataset(spec)
        if data is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped")
            continue
        X, y, _ = data
        levels = {c: int(X[c].nunique()) for c in categorical_columns(X)}
        scores = run_dataset(spec, X, y, cfg)
        rows = summary(spec["task"], scores, baseline)
        results[name] = dict(levels=levels, scores=scores, summary=rows)
        print(f"\n{name} ({spec['task']}; {len(y)} rows, {X.shape[1]} features; categories "
              f"per categorical column: {levels})\n", flush=True)
        print(table(spec["task"], rows, baseline), flush=True)
        metric = next(iter(METRICS[spec["task"]]))  # log loss or RMSE: lower is better
        if name in cfg["timing_datasets"]:
            results[name]["timing"] = time_jaxgbt(spec, X, y, cfg)
            print(f"\n{name}: jaxgbt fit seconds on split {cfg['split_seeds'][0]} "
                  f"(median of {cfg['timing_repeats']} after the first)\n", flush=True)
            print_table(results[name]["timing"], [
                ("model", "model", ""), ("encoded columns", "columns", "d"),
                ("first fit s (compiles)", "first_fit_s", ".2f"), ("fit s", "fit_s", ".2f")])
        verdicts.append({"dataset": name, **{row["model"]: (
            f"{row[f'{metric} diff']:+.4f} ({beyond_noise(row, metric, False)})")
            for row in rows if row["model"] != baseline}})
    print(f"\nPaired difference of the first metric (log loss or RMSE) to {baseline}, "
          "mean over splits (tie: within 2 standard errors)\n")
    if verdicts:
        names = [k for k in verdicts[0] if k != "dataset"]
        print_table(verdicts, [("dataset", "dataset", ""), *((n, n, "") for n in names)])
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, results=results))
    return results


if __name__ == "__main__":
    main(load_config("categorical_defaults", doc=__doc__))
