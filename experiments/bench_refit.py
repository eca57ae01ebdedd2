"""Fits on data whose row count changes, in one process: what recompiling costs.

    python experiments/bench_refit.py [--config configs/bench_refit.toml] [--set key=value]

Two sequences of logistic fits on synthetic rows (`features` normal columns), each run in
a fresh process: "growing", one fit per entry of `growing_rows` (a model refitted as data
arrive), and "folds", five fits each leaving out one of five folds of unequal sizes
(`fold_sizes`, a hand-written cross-validation as scikit-learn's ``cross_val_score``
runs it; ``jaxgbt.cv`` fits all folds at once and compiles once). For each sequence and
growth policy: the seconds of the first fit, the median and total of the later ones, and
the XLA compilations of the later fits (JAX's compile-duration events). Prints a markdown
table (docs/benchmarks.md) and writes results.json.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from _runner import load_config, output_dir, print_table, write_json

COLUMNS = [("sequence", "sequence", ""), ("grow_policy", "grow_policy", ""),
           ("fits", "n_fits", "d"), ("first fit s", "first_s", ".2f"),
           ("later fits: median s", "median_s", ".2f"), ("later fits: total s", "total_s", ".2f"),
           ("later fits: XLA compilations", "n_compiles", "d"),
           ("later fits: compile s", "compile_s", ".2f")]


def one(row_counts: list, features: int, n_trees: int, depth: int, grow_policy: str) -> dict:
    """Fits once per row count in this process (call it in a fresh one)."""
    import jax
    import numpy as np
    from jax._src import monitoring

    import jaxgbt

    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, seconds, **_: compiles.append(seconds)
        if name == "/jax/core/compile/backend_compile_duration" else None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(max(row_counts), features)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=X.shape[0]) > 0).astype(np.float32)
    seconds, first_compiles = [], 0
    for n_rows in row_counts:
        start = time.perf_counter()
        model = jaxgbt.fit("logistic", X[:n_rows], y[:n_rows], n_trees=n_trees, depth=depth,
                           grow_policy=grow_policy)
        jax.block_until_ready(model.leaf_value)
        seconds.append(time.perf_counter() - start)
        first_compiles = first_compiles or len(compiles)
    later = compiles[first_compiles:]
    return dict(n_fits=len(row_counts), first_s=seconds[0],
                median_s=statistics.median(seconds[1:]), total_s=sum(seconds[1:]),
                n_compiles=len(later), compile_s=sum(later))


def main(config: dict) -> None:
    folds = config["fold_sizes"]
    sequences = {"growing": config["growing_rows"],
                 "folds": [sum(folds) - size for size in folds]}
    env = dict(os.environ, JAXGBT_COMPILATION_CACHE="0")  # every compilation counted
    results = []
    for name, row_counts in sequences.items():
        for grow_policy in config["grow_policies"]:
            arguments = [json.dumps(row_counts), str(config["features"]),
                         str(config["n_trees"]), str(config["depth"]), grow_policy]
            out = subprocess.run([sys.executable, __file__, "--one", *arguments], env=env,
                                 check=True, capture_output=True, text=True).stdout
            results.append(dict(sequence=name, grow_policy=grow_policy,
                                **json.loads(out.strip().splitlines()[-1])))
    print(f"fits of {config['n_trees']} trees of depth {config['depth']}, "
          f"{config['features']} features; rows: growing {sequences['growing']}, "
          f"folds {sequences['folds']}")
    print_table(results, COLUMNS)
    write_json(output_dir(config) / "results.json", dict(config=config, results=results))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        row_counts, features, n_trees, depth, grow_policy = sys.argv[2:]
        print(json.dumps(one(json.loads(row_counts), int(features), int(n_trees), int(depth),
                             grow_policy)))
    else:
        main(load_config("bench_refit", doc=__doc__))
