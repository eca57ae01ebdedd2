"""Quickstart: jaxgbt on LightGBM's binary example, next to every installed anchor.

Run: .venv/bin/python experiments/quickstart.py [--config configs/quickstart.toml] [--set key=value]
Fits jaxgbt and each importable anchor (CatBoost, LightGBM, XGBoost, scikit-learn HGB) with the
same trees, depth, learning rate and L2; prints test AUC, log loss and fit seconds; saves,
reloads and checks the jaxgbt model; plots test log loss per round. Public jaxgbt API only.
The anchors get as many threads as jaxgbt uses (XLA's CPU thread pool takes every core the
process may run on), and a note says when the machine's load makes the timings unreliable.
"""

import contextlib
import importlib.util
import logging
import os
from pathlib import Path

import numpy as np
from _runner import format_table, load_config, output_dir, timed, write_json
from _scores import auc, logloss

import jaxgbt
from jaxgbt.datasets import load_lightgbm_binary

log = logging.getLogger("quickstart")
COLUMNS = [("library", "library", ""), ("test AUC", "auc", ".4f"), ("logloss", "logloss", ".4f"),
           ("fit s", "fit_s", ".2f"), ("note", "note", "")]


def scores(library: str, y, p, fit_s: float, note: str = "") -> dict:
    p = np.asarray(p)  # P(y = 1)
    return dict(library=library, auc=auc(y, p), logloss=logloss(y, p), fit_s=fit_s, note=note)


def cores() -> int:
    """The cores this process may run on: XLA's CPU client sizes its thread pool to them
    (jaxgbt fits on the one CPU device XLA exposes by default, using that whole pool)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def load_average() -> float | None:
    """The 1-minute load average, or None where the system has none (Windows)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def load_note(loads: list, n_cores: int) -> str | None:
    """A warning when the load average, read before and after the fits, exceeded the
    cores: other processes then shared them, and the fit seconds measure the contention
    as much as the libraries."""
    seen = [load for load in loads if load is not None]
    if not seen or max(seen) <= n_cores:
        return None
    return (f"note: load average up to {max(seen):.1f} on {n_cores} cores during this run: "
            "other processes were using the CPUs, so the fit seconds above are unreliable; "
            "rerun on an idle machine to compare speed")


def fit_jaxgbt(cfg, X, y):
    return jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                      learning_rate=cfg["learning_rate"], l2=cfg["l2"], seed=cfg["seed"])


def anchor_models(cfg) -> dict:
    """name -> (estimator, staged(model, X) -> P(y=1) per round) for installed libraries."""
    T, D, rate, l2, jobs, seed = map(cfg.get, ("n_trees", "depth", "learning_rate", "l2",
                                              "threads", "seed"))
    anchors = {}
    if importlib.util.find_spec("catboost"):
        from catboost import CatBoostClassifier
        anchors["catboost"] = (CatBoostClassifier(
            iterations=T, depth=D, learning_rate=rate, l2_leaf_reg=l2, grow_policy="SymmetricTree",
            border_count=255, thread_count=jobs, random_seed=seed, verbose=0,
            allow_writing_files=False),
            lambda m, X: [p[:, 1] for p in m.staged_predict_proba(X)])
    if importlib.util.find_spec("lightgbm"):
        from lightgbm import LGBMClassifier
        anchors["lightgbm"] = (LGBMClassifier(
            n_estimators=T, max_depth=D, num_leaves=2**D, learning_rate=rate, reg_lambda=l2,
            n_jobs=jobs, random_state=seed, verbose=-1),
            lambda m, X: [m.predict_proba(X, num_iteration=k)[:, 1] for k in range(1, T + 1)])
    if importlib.util.find_spec("xgboost"):
        from xgboost import XGBClassifier
        anchors["xgboost"] = (XGBClassifier(
            n_estimators=T, max_depth=D, learning_rate=rate, reg_lambda=l2, tree_method="hist",
            n_jobs=jobs, random_state=seed),
            lambda m, X: [m.predict_proba(X, iteration_range=(0, k))[:, 1]
                          for k in range(1, T + 1)])
    if importlib.util.find_spec("sklearn"):
        from sklearn.ensemble import HistGradientBoostingClassifier
        anchors["sklearn-hgb"] = (HistGradientBoostingClassifier(
            max_iter=T, max_depth=D, max_leaf_nodes=2**D, learning_rate=rate,
            l2_regularization=l2, early_stopping=False, random_state=seed),
            lambda m, X: [p[:, 1] for p in m.staged_predict_proba(X)])
    return anchors


def fit_anchor(estimator, X, y, threads: int):
    """Fits under an OpenMP cap (scikit-learn's HGB has no n_jobs; threadpoolctl is its dep)."""
    limit = contextlib.nullcontext()
    if importlib.util.find_spec("threadpoolctl"):
        from threadpoolctl import threadpool_limits
        limit = threadpool_limits(limits=threads)
    with limit:
        return timed(estimator.fit, X, y)


def check_roundtrip(model, X, path: Path) -> None:
    model.save(path)
    before, after = np.asarray(model.predict_raw(X)), np.asarray(jaxgbt.load(path).predict_raw(X))
    if not np.array_equal(before, after):
        raise AssertionError(f"{path}: reloaded model predicts differently, by up to "
                             f"{np.abs(before - after).max():.3g}")
    log.info("saved %s; reloaded predictions identical on %d test rows", path, len(X))


def plot_curves(curves: dict, path: Path) -> None:
    if importlib.util.find_spec("matplotlib") is None:
        log.info("matplotlib is not installed: skipping %s", path)
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for name, curve in curves.items():
        axes.plot(np.arange(1, len(curve) + 1), curve, label=name, lw=2 if name == "jaxgbt" else 1)
    axes.set(xlabel="boosting round", ylabel="test log loss", title="LightGBM binary example")
    axes.legend()
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    log.info("saved %s", path)


def main(cfg: dict) -> list[dict]:
    out = output_dir(cfg)
    n_cores = cores()
    cfg = dict(cfg, threads=cfg["threads"] or n_cores)  # 0: as many as jaxgbt uses
    log.info("jaxgbt: XLA's CPU thread pool on %d cores; anchors: %d threads", n_cores,
             cfg["threads"])
    loads = [load_average()]
    X_train, y_train, X_test, y_test = load_lightgbm_binary()

    model, seconds = timed(fit_jaxgbt, cfg, X_train, y_train)
    _, warm_seconds = timed(fit_jaxgbt, cfg, X_train, y_train)
    note = f"incl. compile; {warm_seconds:.2f} s compiled"
    rows = [scores("jaxgbt", y_test, model.predict(X_test), seconds, note)]
    margins = np.asarray(model.staged_predict_raw(X_test), np.float64)  # [T, N]
    curves = {"jaxgbt": [logloss(y_test, 1 / (1 + np.exp(-m))) for m in margins]}
    check_roundtrip(model, X_test, out / "model.jgbt")

    for name, (estimator, staged) in anchor_models(cfg).items():
        fitted, seconds = fit_anchor(estimator, X_train, y_train, cfg["threads"])
        rows.append(scores(name, y_test, fitted.predict_proba(X_test)[:, 1], seconds))
        curves[name] = [logloss(y_test, q) for q in staged(fitted, X_test)]

    loads.append(load_average())
    log.info(format_table(rows, COLUMNS))
    note = load_note(loads, n_cores)
    if note:
        log.warning(note)
    write_json(out / "results.json", dict(config=cfg, results=rows, cores=n_cores,
                                          load_average=loads, note=note))
    plot_curves(curves, out / "learning_curve.png")
    return rows


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s")  # other libraries' loggers stay at WARNING
    log.setLevel(logging.INFO)
    main(load_config("quickstart", doc=__doc__))
