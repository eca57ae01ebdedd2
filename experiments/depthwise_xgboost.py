"""Depthwise trees next to XGBoost at equal depth, and oblivious trees next to CatBoost.

Run: .venv/bin/python experiments/depthwise_xgboost.py [--config configs/depthwise_xgboost.toml]
     [--set key=value]

``grow_policy="depthwise"`` grows XGBoost's kind of tree (each node its own split, level
by level); XGBoost gets the same trees, depth, learning rate, L2 and min_child_weight
(``tree_method="hist"``, ``grow_policy="depthwise"``). The oblivious rows show what the
policy changes on each dataset. Data and metrics are those of ``experiments/anchors.py``
(LightGBM's binary example; CPS1988 log wage). Prints one markdown table per dataset
(docs/training.md) and writes them to results.json.
"""

import importlib.util

import numpy as np
from _runner import format_table, load_config, timed
from anchors import METRICS, run_datasets

import jaxgbt


def fitters(task: str, cfg) -> dict:
    """name -> fit(X, y) returning predict(X) -> probabilities or values."""
    T, D, rate, l2, mcw, seed = (cfg[k] for k in ("n_trees", "depth", "learning_rate", "l2",
                                                  "min_child_weight", "seed"))
    loss = "logistic" if task == "binary" else "squared_error"

    def jaxgbt_fit(policy):
        def fit(X, y):
            model = jaxgbt.fit(loss, X, y, n_trees=T, depth=D, learning_rate=rate, l2=l2,
                               min_child_weight=mcw, seed=seed, grow_policy=policy)
            return lambda X: np.asarray(model.predict(X))
        return fit

    out = {"jaxgbt depthwise": jaxgbt_fit("depthwise"),
           "jaxgbt oblivious": jaxgbt_fit("oblivious")}
    if importlib.util.find_spec("xgboost"):
        import xgboost

        cls = xgboost.XGBClassifier if task == "binary" else xgboost.XGBRegressor
        params = dict(n_estimators=T, max_depth=D, learning_rate=rate, reg_lambda=l2,
                      min_child_weight=mcw, tree_method="hist", grow_policy="depthwise",
                      max_bin=cfg["max_bin"], n_jobs=cfg["threads"], random_state=seed)

        def xgb_fit(X, y, cls=cls, params=params):
            model = cls(**params).fit(X, y)
            return ((lambda X: model.predict_proba(X)[:, 1]) if task == "binary"
                    else model.predict)

        out["xgboost depthwise"] = xgb_fit
    if importlib.util.find_spec("catboost"):
        import catboost

        cls = catboost.CatBoostClassifier if task == "binary" else catboost.CatBoostRegressor
        params = dict(iterations=T, depth=D, learning_rate=rate, l2_leaf_reg=l2,
                      border_count=cfg["max_bin"] - 1, grow_policy="SymmetricTree",
                      thread_count=cfg["threads"], random_seed=seed, verbose=0,
                      allow_writing_files=False)

        def cat_fit(X, y, cls=cls, params=params):
            model = cls(**params).fit(X, y)
            return ((lambda X: model.predict_proba(X)[:, 1]) if task == "binary"
                    else model.predict)

        out["catboost symmetric"] = cat_fit
    return out


def run_dataset(task: str, data, cfg) -> list[dict]:
    X_train, y_train, X_test, y_test = data
    rows = []
    for name, fit in fitters(task, cfg).items():
        predict, seconds = timed(fit, X_train, y_train)
        prediction = predict(X_test)
        rows.append(dict(library=name, fit_s=seconds,
                         **{m: f(y_test, prediction) for m, f in METRICS[task].items()}))
    return rows


def markdown(task: str, rows: list[dict]) -> str:
    names = list(METRICS[task])
    anchor = next((r[names[0]] for r in rows if r["library"] == "xgboost depthwise"), None)
    return format_table(rows, [
        ("model", "library", ""), *((n, n, ".4f") for n in names),
        (f"{names[0]} vs XGBoost", lambda r: None if anchor is None else r[names[0]] / anchor - 1,
         "+.2%"),
        ("first fit s", "fit_s", ".2f")])


def main(cfg: dict) -> dict:
    return run_datasets(cfg, run_dataset, markdown)


if __name__ == "__main__":
    main(load_config("depthwise_xgboost", doc=__doc__))
