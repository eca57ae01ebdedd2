"""Seconds of ``fit_forest`` against ``fit`` with as many boosted trees of the same size.

    python experiments/forest_time.py [--config configs/forest_time.toml] [--quick]

Random Gaussian X (``rows`` x F) with a label from its first two columns. Each case
runs in a fresh process with the persistent compilation cache off, so that the first
call compiles everything ("cold"); the second call, with another seed, reuses it
("warm"). The boosted model is ``fit`` with ``n_trees`` rounds of the forest's depth,
bins, Poisson bootstrap and feature fraction (multi_squared_error on one-hot labels for
classification, as the forest grows them). Prints a markdown table and writes
results.json. Public jaxgbt API only.
"""

import os

# Off before jaxgbt is first imported (``_runner`` imports it), here and in the spawned
# processes, which inherit the environment: a cached program would hide its compile.
os.environ["JAXGBT_COMPILATION_CACHE"] = "0"

import time  # noqa: E402

import numpy as np  # noqa: E402
from _runner import (  # noqa: E402
    in_fresh_process,
    load_config,
    output_dir,
    print_table,
    write_json,
)

COLUMNS = [("model", "model", ""), ("task", "task", ""), ("policy", "policy", ""),
           ("F", "features", "d"), ("cold s", "cold", ".2f"), ("warm s", "warm", ".2f"),
           ("warm ms/tree", "per_tree_ms", ".1f")]


def measure(model: str, task: str, policy: str, n_features: int, cfg: dict) -> dict:
    import jax

    import jaxgbt

    rng = np.random.default_rng(0)
    X = rng.normal(size=(cfg["rows"], n_features)).astype(np.float32)
    signal = X[:, 0] + X[:, 1]
    y = (signal > 0).astype(np.int32) if task == "classification" else (
        signal + rng.normal(size=cfg["rows"])).astype(np.float32)
    common = dict(n_trees=cfg["n_trees"], depth=cfg["depth"], n_bins=cfg["n_bins"],
                  grow_policy=policy)
    fraction = np.sqrt(n_features) / n_features if task == "classification" else 1.0
    colsample = "colsample_bynode" if policy == "depthwise" else "colsample_bylevel"

    def fit(seed: int):
        if model == "forest":
            return jaxgbt.fit_forest(X, y, task=task, seed=seed, **common).model
        labels = np.eye(2, dtype=np.float32)[y] if task == "classification" else y
        loss = "multi_squared_error" if task == "classification" else "squared_error"
        return jaxgbt.fit(loss, X, labels, seed=seed, learning_rate=1.0, l2=1e-3,
                          sampling="poisson", subsample=1.0, **{colsample: fraction},
                          **common)

    seconds = []
    for seed in (0, 1):
        start = time.perf_counter()
        jax.block_until_ready(fit(seed).leaf_value)
        seconds.append(time.perf_counter() - start)
    return dict(model=model, task=task, policy=policy, features=n_features,
                cold=seconds[0], warm=seconds[1], per_tree_ms=1000 * seconds[1] / cfg["n_trees"])


def main(cfg: dict) -> list[dict]:
    rows = []
    for task in cfg["tasks"]:
        for policy in cfg["grow_policies"]:
            for n_features in cfg["features"]:
                for model in ("forest", "boosted"):
                    rows.append(in_fresh_process(measure, model, task, policy, n_features,
                                                 cfg))
    print_table(rows, COLUMNS)
    return rows


if __name__ == "__main__":
    config = load_config("forest_time", doc=__doc__)
    write_json(output_dir(config) / "results.json", main(config))
