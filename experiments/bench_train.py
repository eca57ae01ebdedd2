"""Seconds per tree: jaxgbt against XGBoost, LightGBM and CatBoost in the same run.

    python experiments/bench_train.py [--config configs/bench_train.toml] [--rows 200000]
        [--subsample 0.5] [--set key=value]

Prints, per row count: compile seconds (first fit minus the best warm fit), seconds per
tree of the best of `repeats` warm fits (binning included, as the anchors' times include
theirs; the anchors also get the best of `repeats`), test AUC, and the ratio to the
fastest anchor. With `subsample` below 1 every library keeps each row with that
probability in every round (jaxgbt `subsample`, XGBoost `subsample`, LightGBM
`bagging_fraction` with `bagging_freq = 1`, CatBoost's Bernoulli bootstrap).
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _runner import load_config, print_table, processor, timed
from _scores import auc
from _synthetic import higgs_like  # noqa: E402

import jaxgbt  # noqa: E402


def fit_jaxgbt(cfg, X, y, devices):
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       n_bins=cfg["n_bins"], learning_rate=cfg["learning_rate"], l2=cfg["l2"],
                       subsample=cfg["subsample"], devices=devices,
                       **cfg.get("jaxgbt_settings", {}))
    jax.block_until_ready(model.leaf_value)
    return lambda X_: np.asarray(model.predict(X_))


def fit_xgboost(cfg, X, y):
    import xgboost

    model = xgboost.XGBClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                                  learning_rate=cfg["learning_rate"], reg_lambda=cfg["l2"],
                                  max_bin=cfg["n_bins"], tree_method="hist", n_jobs=cfg["threads"],
                                  subsample=cfg["subsample"])
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def fit_lightgbm(cfg, X, y):
    import lightgbm

    model = lightgbm.LGBMClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                                    num_leaves=2 ** cfg["depth"] - 1,
                                    learning_rate=cfg["learning_rate"], reg_lambda=cfg["l2"],
                                    max_bin=cfg["n_bins"] - 1, n_jobs=cfg["threads"], verbose=-1,
                                    subsample=cfg["subsample"],
                                    subsample_freq=1 if cfg["subsample"] < 1 else 0)
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def fit_catboost(cfg, X, y):
    import catboost

    model = catboost.CatBoostClassifier(iterations=cfg["n_trees"], depth=cfg["depth"],
                                        learning_rate=cfg["learning_rate"], l2_leaf_reg=cfg["l2"],
                                        border_count=cfg["n_bins"] - 1,
                                        thread_count=cfg["threads"], verbose=False,
                                        allow_writing_files=False,
                                        **(dict(bootstrap_type="Bernoulli",
                                                subsample=cfg["subsample"])
                                           if cfg["subsample"] < 1 else {}))
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def best_of(repeats, fn, *args):
    """The result and the least seconds of `repeats` runs (this VM's timings are noisy)."""
    runs = [timed(fn, *args) for _ in range(repeats)]
    return runs[-1][0], min(seconds for _, seconds in runs)


def bench_rows(cfg, n_rows):
    X, y = higgs_like(n_rows + cfg["test_rows"], cfg["seed"])
    X_train, y_train, X_test, y_test = X[:n_rows], y[:n_rows], X[n_rows:], y[n_rows:]
    results = []
    for variant in cfg["jaxgbt_variants"]:
        devices = {"one-device": jax.devices()[:1], "all-devices": "all",
                   "default": None}[variant]
        _, cold = timed(fit_jaxgbt, cfg, X_train, y_train, devices)
        predict, warm = best_of(cfg["repeats"], fit_jaxgbt, cfg, X_train, y_train, devices)
        results.append(dict(library=f"jaxgbt ({variant})", per_tree=warm / cfg["n_trees"],
                            compile_s=cold - warm, auc=auc(y_test, predict(X_test))))
    fitters = {"xgboost": fit_xgboost, "lightgbm": fit_lightgbm, "catboost": fit_catboost}
    for name in cfg["anchors"]:
        try:
            predict, seconds = best_of(cfg["repeats"], fitters[name], cfg, X_train, y_train)
        except ImportError:
            print(f"{name} is not installed; skipped")
            continue
        results.append(dict(library=name, per_tree=seconds / cfg["n_trees"], compile_s=None,
                            auc=auc(y_test, predict(X_test))))
    return results


def print_results(cfg, n_rows, results):
    anchors = [r["per_tree"] for r in results if not r["library"].startswith("jaxgbt")]
    fastest = min(anchors, default=float("nan"))
    subsample = "" if cfg["subsample"] == 1 else f", subsample {cfg['subsample']}"
    print(f"\n{n_rows:,} rows, {jax.device_count()} {jax.default_backend()} device(s)"
          f"{subsample}")
    print_table(results, [("library", "library", ""), ("s/tree", "per_tree", ".4f"),
                          ("compile s", "compile_s", ".2f"), ("test AUC", "auc", ".4f"),
                          ("ratio to fastest anchor", lambda r: r["per_tree"] / fastest, ".2f")])


def main(cfg: dict) -> None:
    cfg.setdefault("subsample", 1.0)
    print(f"processor: {processor()}")
    for n_rows in cfg["rows"]:
        print_results(cfg, n_rows, bench_rows(cfg, n_rows))


if __name__ == "__main__":
    main(load_config("bench_train", doc=__doc__, overrides={
        "rows": dict(type=int, nargs="+", help="replace the config's row counts"),
        "subsample": dict(type=float, help="replace the config's subsample")}))
