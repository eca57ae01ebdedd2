"""Wide data: seconds per tree against XGBoost, LightGBM and CatBoost, by rows x features.

    python experiments/bench_wide.py [--config configs/bench_wide.toml] [--quick]
        [--set rows=[2000] --set features=[20,180]]

For every (rows, features, task, data kind) cell: jaxgbt's first fit (compilation
included: every cell is a new shape, and the persistent compilation cache is off) and
its best warm fit, and each anchor's best fit, all with the same trees, depth, bins and
threads; the ratio of jaxgbt's warm time to the fastest anchor. Data kinds: "float"
(normal features, the target from ten of them), "binary" (0/1 columns, each 1 with
probability 0.1, as bag-of-words data) and "onehot" (categorical columns of 20 levels,
one-hot: one 1 per 20 columns and row). ``jaxgbt_settings`` (a TOML table) adds
``jaxgbt.fit`` keywords, e.g. ``--set 'jaxgbt_settings={score_function="cosine"}'``.
Prints a markdown table and writes results.json.
"""

import os

os.environ.setdefault("JAXGBT_COMPILATION_CACHE", "0")  # first fits must compile

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _runner import (  # noqa: E402
    load_config,
    output_dir,
    print_table,
    processor,
    timed,
    write_json,
)

import jaxgbt  # noqa: E402

# Levels of each categorical column of the "onehot" kind.
ONEHOT_LEVELS = 20


def make_data(n_rows: int, n_features: int, task: str, kind: str, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "binary":
        X = (rng.random((n_rows, n_features)) < 0.1).astype(np.float32)
    elif kind == "onehot":  # categorical columns of ONEHOT_LEVELS levels, one-hot
        n_categorical = -(-n_features // ONEHOT_LEVELS)
        codes = rng.integers(0, ONEHOT_LEVELS, (n_rows, n_categorical))
        hot = np.arange(n_categorical) * ONEHOT_LEVELS + codes  # [N, C]: each 1's column
        rows = np.broadcast_to(np.arange(n_rows)[:, None], hot.shape)
        inside = hot < n_features
        X = np.zeros((n_rows, n_features), np.float32)
        X[rows[inside], hot[inside]] = 1.0
    else:
        X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    used = min(10, n_features)
    score = X[:, :used] @ rng.normal(size=used) + 0.5 * rng.normal(size=n_rows)
    if task == "binary":
        return X, (score > np.median(score)).astype(np.float32)
    return X, np.searchsorted(np.quantile(score, [1 / 3, 2 / 3]), score).astype(np.float32)


def fit_jaxgbt(cfg, X, y, task):
    model = jaxgbt.fit("logistic" if task == "binary" else "softmax", X, y,
                       n_trees=cfg["n_trees"], depth=cfg["depth"], n_bins=cfg["n_bins"],
                       learning_rate=cfg["learning_rate"], **cfg["jaxgbt_settings"])
    jax.block_until_ready(model.leaf_value)


def fit_xgboost(cfg, X, y, task):
    import xgboost

    xgboost.XGBClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"], max_bin=cfg["n_bins"],
                          tree_method="hist", n_jobs=cfg["threads"]).fit(X, y)


def fit_lightgbm(cfg, X, y, task):
    import lightgbm

    lightgbm.LGBMClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                            num_leaves=2 ** cfg["depth"] - 1, learning_rate=cfg["learning_rate"],
                            max_bin=cfg["n_bins"] - 1, n_jobs=cfg["threads"],
                            verbose=-1).fit(X, y)


def fit_catboost(cfg, X, y, task):
    import catboost

    catboost.CatBoostClassifier(iterations=cfg["n_trees"], depth=cfg["depth"],
                                learning_rate=cfg["learning_rate"],
                                border_count=cfg["n_bins"] - 1, thread_count=cfg["threads"],
                                verbose=False, allow_writing_files=False).fit(X, y)


ANCHORS = {"xgboost": fit_xgboost, "lightgbm": fit_lightgbm, "catboost": fit_catboost}


def bench_cell(cfg, n_rows, n_features, task, kind) -> dict:
    X, y = make_data(n_rows, n_features, task, kind, cfg["seed"])
    trees = cfg["n_trees"] * (1 if task == "binary" else 3)  # anchors grow a tree per class
    _, first = timed(fit_jaxgbt, cfg, X, y, task)
    warm = min(timed(fit_jaxgbt, cfg, X, y, task)[1] for _ in range(cfg["repeats"]))
    row = dict(rows=n_rows, features=n_features, task=task, kind=kind, jaxgbt_first_s=first,
               jaxgbt_warm_s=warm, jaxgbt_s_per_tree=warm / cfg["n_trees"])
    anchor_times = {}
    for name in cfg["anchors"]:
        try:
            anchor_times[name] = min(timed(ANCHORS[name], cfg, X, y, task)[1]
                                     for _ in range(cfg["repeats"]))
        except ImportError:
            print(f"{name} is not installed; skipped")
    row.update({f"{name}_s": s for name, s in anchor_times.items()})
    if anchor_times:
        fastest = min(anchor_times, key=anchor_times.get)
        row.update(fastest=fastest, warm_ratio=warm / anchor_times[fastest],
                   first_ratio=first / anchor_times[fastest])
    row["anchor_trees"] = trees
    row["processor"] = processor()
    return row


COLUMNS = [("rows", "rows", ","), ("F", "features", "d"), ("task", "task", ""),
           ("data", "kind", ""), ("jaxgbt first s", "jaxgbt_first_s", ".2f"),
           ("jaxgbt warm s", "jaxgbt_warm_s", ".2f"), ("xgboost s", "xgboost_s", ".2f"),
           ("lightgbm s", "lightgbm_s", ".2f"), ("catboost s", "catboost_s", ".2f"),
           ("warm / fastest", "warm_ratio", ".2f"), ("first / fastest", "first_ratio", ".2f")]


def main(cfg: dict) -> list[dict]:
    results = []
    for kind in cfg["kinds"]:
        for task in cfg["tasks"]:
            for n_rows in cfg["rows"]:
                for n_features in cfg["features"]:
                    results.append(bench_cell(cfg, n_rows, n_features, task, kind))
                    print(results[-1], flush=True)
    print(f"\n{cfg['n_trees']} trees of depth {cfg['depth']}, {cfg['n_bins']} bins, "
          f"{cfg['threads']} threads, {jax.device_count()} {jax.default_backend()} device(s), "
          f"{processor()}")
    print_table(results, COLUMNS)
    write_json(output_dir(cfg) / "results.json", results)
    return results


if __name__ == "__main__":
    main(load_config("bench_wide", doc=__doc__))
