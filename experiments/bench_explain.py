"""Seconds to explain rows: TreeSHAP values and interaction values, jaxgbt against
XGBoost, LightGBM and CatBoost on models of the same size, in the same run.

    python experiments/bench_explain.py [--config configs/bench_explain.toml] [--quick]
        [--set key=value]

Each library fits n_trees trees of depth `depth` on `train_rows` HIGGS-like rows (28
features), then explains `rows` rows with `threads` threads: XGBoost
``predict(pred_contribs=True)`` / ``pred_interactions=True``, LightGBM
``predict(pred_contrib=True)`` (it has no interaction values), CatBoost
``get_feature_importance(type="ShapValues")`` / ``"ShapInteractionValues"``, jaxgbt
``shap_values`` / ``shap_interaction_values`` (oblivious and depthwise models). jaxgbt's
time is the best of `repeats` warm calls (its compile time apart; a depthwise model on at
most `depthwise_rows` rows); an anchor explains at most `anchor_rows` (interactions:
`anchor_interaction_rows`) rows; a time on fewer rows is scaled to the full count
(marked "scaled"). The last column is the ratio of the fastest anchor's time
to each library's.
"""

import os

import numpy as np
from _runner import load_config, print_table, timed
from _synthetic import higgs_like

import jaxgbt


def _jaxgbt(cfg, X, y, policy):
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       learning_rate=cfg["learning_rate"], grow_policy=policy)

    def explain(rows, interactions):
        fn = model.shap_interaction_values if interactions else model.shap_values
        return np.asarray(fn(rows))

    return explain


def _xgboost(cfg, X, y):
    import xgboost

    booster = xgboost.train({"max_depth": cfg["depth"], "eta": cfg["learning_rate"],
                             "objective": "binary:logistic", "nthread": cfg["threads"],
                             "tree_method": "hist"}, xgboost.DMatrix(X, label=y),
                            num_boost_round=cfg["n_trees"])

    def explain(rows, interactions):
        data = xgboost.DMatrix(rows, nthread=cfg["threads"])
        return booster.predict(data, **{"pred_interactions" if interactions
                                        else "pred_contribs": True})

    return explain


def _lightgbm(cfg, X, y):
    import lightgbm

    model = lightgbm.train({"objective": "binary", "max_depth": cfg["depth"],
                            "num_leaves": 2 ** cfg["depth"], "learning_rate": cfg["learning_rate"],
                            "num_threads": cfg["threads"], "verbose": -1},
                           lightgbm.Dataset(X, label=y), num_boost_round=cfg["n_trees"])

    def explain(rows, interactions):
        if interactions:
            return None  # LightGBM has no SHAP interaction values
        return model.predict(rows, pred_contrib=True, num_threads=cfg["threads"])

    return explain


def _catboost(cfg, X, y):
    import catboost

    model = catboost.CatBoostClassifier(iterations=cfg["n_trees"], depth=cfg["depth"],
                                        learning_rate=cfg["learning_rate"],
                                        thread_count=cfg["threads"], verbose=False,
                                        allow_writing_files=False)
    model.fit(X, y)

    def explain(rows, interactions):
        kind = "ShapInteractionValues" if interactions else "ShapValues"
        return model.get_feature_importance(catboost.Pool(rows), type=kind,
                                            thread_count=cfg["threads"])

    return explain


def measure(cfg, X_explain, explainers, interactions):
    """One table's rows: per library, the seconds to explain the rows."""
    results = []
    n_rows = X_explain.shape[0]
    for name, explain in explainers.items():
        if name.startswith("jaxgbt"):
            part = X_explain[:min(cfg["depthwise_rows"], n_rows)] if "depthwise" in name \
                else X_explain
            _, cold = timed(explain, part, interactions)
            warm = min(timed(explain, part, interactions)[1] for _ in range(cfg["repeats"]))
            results.append(dict(library=name, timed_rows=part.shape[0],
                                seconds=warm * n_rows / part.shape[0],
                                compile_s=max(cold - warm, 0.0),
                                note="scaled" if part.shape[0] < n_rows else ""))
            continue
        cap = cfg["anchor_interaction_rows" if interactions else "anchor_rows"]
        part = X_explain[:min(cap, n_rows)]
        out, seconds = timed(explain, part, interactions)
        if out is None:
            continue
        scaled = part.shape[0] < n_rows
        results.append(dict(library=name, timed_rows=part.shape[0],
                            seconds=seconds * n_rows / part.shape[0], compile_s=None,
                            note="scaled" if scaled else ""))
    fastest = min((r["seconds"] for r in results if not r["library"].startswith("jaxgbt")),
                  default=float("nan"))
    for r in results:
        r["speedup"] = fastest / r["seconds"]
    return results


def main(cfg: dict) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", str(cfg["threads"]))
    n_max = max(cfg["rows"])
    X, y = higgs_like(cfg["train_rows"] + n_max, cfg["seed"])
    X_train, y_train, X_rest = X[:cfg["train_rows"]], y[:cfg["train_rows"]], X[cfg["train_rows"]:]
    makers = {"xgboost": _xgboost, "lightgbm": _lightgbm, "catboost": _catboost}
    explainers = {f"jaxgbt ({policy})": _jaxgbt(cfg, X_train, y_train, policy)
                  for policy in cfg["jaxgbt_variants"]}
    for name in cfg["anchors"]:
        try:
            explainers[name] = makers[name](cfg, X_train, y_train)
        except ImportError:
            print(f"{name} is not installed; skipped")
    columns = [("library", "library", ""), ("rows timed", "timed_rows", ","),
               ("seconds", "seconds", ".3f"), ("", "note", ""),
               ("compile s", "compile_s", ".2f"), ("fastest anchor / this", "speedup", ".1f")]
    for n_rows in cfg["rows"]:
        for interactions in (False, True):
            what = "interaction values" if interactions else "SHAP values"
            print(f"\n{what}, {n_rows:,} rows, {cfg['n_trees']} trees of depth {cfg['depth']}, "
                  f"{X.shape[1]} features, {cfg['threads']} threads", flush=True)
            print_table(measure(cfg, X_rest[:n_rows], explainers, interactions), columns)


if __name__ == "__main__":
    main(load_config("bench_explain", doc=__doc__))
