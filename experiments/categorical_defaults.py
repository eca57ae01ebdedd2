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

import contextlib
import importlib
import importlib.util
import statistics

import numpy as np
import pandas as pd
from _runner import (
    SHARED_DATA,
    format_table,
    load_config,
    output_dir,
    print_table,
    timed,
    write_json,
)
from _scores import accuracy, auc, logloss, multi_logloss, rmse

import jaxgbt

METRICS = {"binary": {"log loss": logloss, "AUC": auc},
           "multiclass": {"log loss": multi_logloss, "accuracy": accuracy},
           "regression": {"RMSE": rmse}}
LOSSES = {"binary": "logistic", "multiclass": "softmax", "regression": "squared_error"}
# library -> (module, classifier class, regressor class)
ANCHORS = {"lightgbm": ("lightgbm", "LGBMClassifier", "LGBMRegressor"),
           "catboost": ("catboost", "CatBoostClassifier", "CatBoostRegressor"),
           "xgboost": ("xgboost", "XGBClassifier", "XGBRegressor"),
           "sklearn-hgb": ("sklearn.ensemble", "HistGradientBoostingClassifier",
                           "HistGradientBoostingRegressor")}


# Data ----------------------------------------------------------------------------------------


def load_dataset(spec: dict) -> tuple[pd.DataFrame, np.ndarray] | None:
    """(X with its categorical columns as pandas ``category`` of strings, numeric label y),
    or None when a file is missing."""
    paths = [SHARED_DATA / name for name in spec["files"]]
    if not all(path.exists() for path in paths):
        return None
    header = dict(header=None, names=spec["columns"]) if "columns" in spec else {}
    frame = pd.concat([pd.read_csv(path, skipinitialspace=True, **header) for path in paths],
                      ignore_index=True)
    label = frame.pop(spec["target"])
    frame = frame.drop(columns=spec.get("drop", []))
    for name in frame.columns:
        if name in spec.get("categorical", []) or not pd.api.types.is_numeric_dtype(frame[name]):
            values = frame[name].astype(object).where(frame[name].notna(), None)
            frame[name] = pd.Categorical([None if v is None else str(v) for v in values])
        else:
            frame[name] = frame[name].astype(np.float32)
    if spec["task"] == "binary":
        y = (label.astype(str) == spec["positive"]).to_numpy(np.float32)
    elif spec["task"] == "multiclass":
        y = np.unique(label.astype(str), return_inverse=True)[1].astype(np.int32)
    else:
        y = label.to_numpy(np.float64)
        y = np.log(y) if spec.get("log_target") else y
    return frame, y


def categorical_columns(X: pd.DataFrame) -> list[str]:
    return [name for name in X.columns if isinstance(X[name].dtype, pd.CategoricalDtype)]


def ordinal(X: pd.DataFrame) -> pd.DataFrame:
    """The categorical columns as float32 codes of their sorted labels, NaN missing."""
    out = X.copy()
    for name in categorical_columns(X):
        codes = X[name].cat.codes.to_numpy().astype(np.float32)
        out[name] = np.where(codes < 0, np.nan, codes).astype(np.float32)
    return out


def with_string_categories(X: pd.DataFrame) -> pd.DataFrame:
    """CatBoost's input: categorical columns as strings, missing as the string "NA"."""
    out = X.copy()
    for name in categorical_columns(X):
        out[name] = X[name].astype(object).where(X[name].notna(), "NA").astype(str)
    return out


def split(n_rows: int, seed: int, test_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(train rows, test rows) of one random split."""
    order = np.random.default_rng(seed).permutation(n_rows)
    test, train = np.split(order, [round(test_fraction * n_rows)])
    return np.sort(train), np.sort(test)


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


def anchor_model(library: str, task: str, cat_names: list[str], cfg: dict):
    """(fit, predict) of an anchor at its defaults but the tree budget, native categoricals."""
    module, classifier, regressor = ANCHORS[library]
    cls = getattr(importlib.import_module(module), regressor if task == "regression"
                  else classifier)
    T, D, rate, jobs, seed = (cfg[k] for k in ("n_trees", "depth", "learning_rate", "threads",
                                               "seed"))
    params = {"lightgbm": dict(n_estimators=T, max_depth=D, num_leaves=2**D, learning_rate=rate,
                               n_jobs=jobs, random_state=seed, verbose=-1),
              "catboost": dict(iterations=T, depth=D, learning_rate=rate, thread_count=jobs,
                               random_seed=seed, verbose=0, allow_writing_files=False,
                               cat_features=cat_names),
              "xgboost": dict(n_estimators=T, max_depth=D, learning_rate=rate, n_jobs=jobs,
                              tree_method="hist", enable_categorical=True, random_state=seed),
              "sklearn-hgb": dict(max_iter=T, max_depth=D, max_leaf_nodes=2**D,
                                  learning_rate=rate, early_stopping=False, random_state=seed,
                                  categorical_features="from_dtype")}[library]
    read = with_string_categories if library == "catboost" else (lambda X: X)

    def predict(model, X):
        if task == "regression":
            return model.predict(read(X))
        p = model.predict_proba(read(X))
        return p[:, 1] if task == "binary" else p
    return (lambda X, y: cls(**params).fit(read(X), y)), predict


def models(task: str, X: pd.DataFrame, cfg: dict) -> dict:
    """name -> (fit, predict, one_hot_max_size or None, reads ordinal codes)."""
    out = {f"jaxgbt one-hot<={size}": (*jaxgbt_model(task, cfg, one_hot_max_size=size), size)
           for size in cfg["one_hot_sizes"]}
    out["jaxgbt ordinal"] = (*jaxgbt_model(task, cfg), None)
    for library in cfg["anchors"]:
        if importlib.util.find_spec(ANCHORS[library][0].split(".")[0]) is not None:
            out[library] = (*anchor_model(library, task, categorical_columns(X), cfg), None)
    return out


# Measuring -----------------------------------------------------------------------------------


def run_dataset(spec: dict, X: pd.DataFrame, y: np.ndarray, cfg: dict) -> dict:
    """{model: [{metric: score, "fit_s": seconds or None} per split seed]}."""
    task, scores = spec["task"], {}
    X_ordinal = ordinal(X)
    limit = contextlib.nullcontext()
    if importlib.util.find_spec("threadpoolctl"):  # scikit-learn's OpenMP threads
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=cfg["threads"])
    with limit:
        for seed in cfg["split_seeds"]:
            train, test = split(len(y), seed, cfg["test_fraction"])
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
    train, _ = split(len(y), cfg["split_seeds"][0], cfg["test_fraction"])
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
        data = load_dataset(spec)
        if data is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped")
            continue
        X, y = data
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
