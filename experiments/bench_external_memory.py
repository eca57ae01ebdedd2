"""Fits from Parquet files read in row chunks (external memory) against fits of the same
rows loaded whole: jaxgbt's ``ChunkedData`` and in-memory ``fit``, XGBoost's
``ExtMemQuantileDMatrix`` and ``QuantileDMatrix`` (both fed by one ``xgboost.DataIter``
over the files' row groups).

    python experiments/bench_external_memory.py [--config configs/bench_external_memory.toml]
        [--quick] [--set rows=10_000_000]

The synthetic HIGGS-like rows (experiments/_synthetic.py, 28 float features) are written
once to Parquet files in ``data_dir`` (reused while the config's sizes match). Each mode
runs in a fresh process (started through a small one, see bench_scale.TRAMPOLINE, so
that its peak RSS is its own) and reports: the peak RSS over the process's baseline
(imports, the XLA client, the test rows), the whole fit's seconds (reading, binning,
compiling and the trees), seconds per tree over the trees after the first 16 (jaxgbt
times them between callbacks, which run after each compiled chunk of 16 trees; XGBoost
between its iterations), and the AUC on held-out rows. Public jaxgbt API only.
"""

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _runner import load_config, output_dir, print_table, write_json
from _scores import auc
from _synthetic import higgs_like
from bench_scale import TRAMPOLINE

N_FEATURES = 28
NAMES = [f"f{j}" for j in range(N_FEATURES)]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def parquet_files(cfg) -> list[str]:
    """The training files (written unless those of the same sizes are there)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(cfg["data_dir"])
    folder.mkdir(parents=True, exist_ok=True)
    sizes = dict(rows=cfg["rows"], rows_per_file=cfg["rows_per_file"],
                 row_group_rows=cfg["row_group_rows"], seed=cfg["seed"])
    stamp = folder / "sizes.json"
    n_files = -(-cfg["rows"] // cfg["rows_per_file"])
    paths = [str(folder / f"train-{i:03d}.parquet") for i in range(n_files)]
    if stamp.exists() and json.loads(stamp.read_text()) == sizes:
        return paths
    for i, path in enumerate(paths):
        n = min(cfg["rows_per_file"], cfg["rows"] - i * cfg["rows_per_file"])
        X, y = higgs_like(n, seed=cfg["seed"] + 1 + i)
        table = pa.table({**{name: X[:, j] for j, name in enumerate(NAMES)}, "label": y})
        pq.write_table(table, path, row_group_size=cfg["row_group_rows"])
        log(f"wrote {path} ({n:,} rows)")
    stamp.write_text(json.dumps(sizes))
    return paths


def row_groups(paths):
    """(X f32[n, F], y f32[n]) per row group of each file."""
    import pyarrow.parquet as pq

    for path in paths:
        file = pq.ParquetFile(path)
        for group in range(file.num_row_groups):
            table = file.read_row_group(group)
            X = np.empty((table.num_rows, N_FEATURES), np.float32, order="F")
            for j, name in enumerate(NAMES):
                X[:, j] = table.column(name).to_numpy()
            yield X, table.column("label").to_numpy()


def loaded_whole(paths, n_rows: int):
    """All rows in one f32[N, F] matrix (and y), filled row group by row group."""
    X = np.empty((n_rows, N_FEATURES), np.float32)
    y = np.empty(n_rows, np.float32)
    start = 0
    for X_part, y_part in row_groups(paths):
        X[start:start + len(y_part)] = X_part
        y[start:start + len(y_part)] = y_part
        start += len(y_part)
    return X, y


def fit_jaxgbt(cfg, paths, chunked: bool):
    import jax

    import jaxgbt

    times = {}

    def record(state):
        times[state.round] = time.perf_counter()

    source = (jaxgbt.ChunkedData.from_parquet(paths, label="label", columns=NAMES) if chunked
              else None)
    start = time.perf_counter()
    X, y = (source, None) if chunked else loaded_whole(paths, cfg["rows"])
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       n_bins=cfg["n_bins"], learning_rate=cfg["learning_rate"], l2=cfg["l2"],
                       callbacks=[record])
    jax.block_until_ready(model.leaf_value)
    fit_s = time.perf_counter() - start
    last = cfg["n_trees"] - 1
    return (lambda X_test: np.asarray(model.predict(X_test))), fit_s, (
        (times[last] - times[15]) / (last - 15))


def fit_xgboost(cfg, paths, external: bool):
    import xgboost

    class RowGroups(xgboost.DataIter):
        def __init__(self, cache_prefix):
            self._batches = None
            super().__init__(cache_prefix=cache_prefix)

        def next(self, input_data) -> bool:
            batch = next(self._batches, None)
            if batch is None:
                return False
            input_data(data=batch[0], label=batch[1])
            return True

        def reset(self) -> None:
            self._batches = row_groups(paths)

    ticks = []

    class Timer(xgboost.callback.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log) -> bool:
            ticks.append(time.perf_counter())
            return False

    with tempfile.TemporaryDirectory(dir=cfg["data_dir"]) as cache:
        start = time.perf_counter()
        rows = RowGroups(os.path.join(cache, "cache") if external else None)
        rows.reset()
        kind = xgboost.ExtMemQuantileDMatrix if external else xgboost.QuantileDMatrix
        data = kind(rows, max_bin=cfg["n_bins"], nthread=cfg["threads"])
        params = dict(objective="binary:logistic", tree_method="hist", max_depth=cfg["depth"],
                      eta=cfg["learning_rate"], reg_lambda=cfg["l2"], max_bin=cfg["n_bins"],
                      nthread=cfg["threads"])
        booster = xgboost.train(params, data, num_boost_round=cfg["n_trees"],
                                callbacks=[Timer()])
        fit_s = time.perf_counter() - start
    last = cfg["n_trees"] - 1
    return (lambda X_test: booster.inplace_predict(X_test)), fit_s, (
        (ticks[last] - ticks[15]) / (last - 15))


def measure_one(cfg, mode: str, paths) -> dict:
    """One fit in this (fresh) process: peak RSS over the baseline, seconds, test AUC."""
    X_test, y_test = higgs_like(cfg["test_rows"], seed=cfg["seed"])
    if mode.startswith("jaxgbt"):
        import jax.numpy as jnp

        jnp.zeros(1).block_until_ready()  # the XLA client started, in the baseline
        fitter = lambda: fit_jaxgbt(cfg, paths, chunked=mode == "jaxgbt chunked")  # noqa: E731
    else:
        import xgboost  # noqa: F401

        fitter = lambda: fit_xgboost(cfg, paths, external="external" in mode)  # noqa: E731
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    predict, fit_s, s_per_tree = fitter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return dict(mode=mode, baseline_mib=baseline / 1024, peak_over_baseline_mib=(
        peak - baseline) / 1024, fit_s=fit_s, s_per_tree=s_per_tree,
        test_auc=auc(y_test, predict(X_test)))


def fresh_process(cfg, mode: str, paths) -> dict:
    argument = json.dumps(dict(cfg=cfg, mode=mode, paths=paths))
    command = [sys.executable, "-c", TRAMPOLINE, sys.executable, __file__, "--one", argument]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} process failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    log(f"{mode}: {result}")
    return result


def main(cfg) -> None:
    paths = parquet_files(cfg)
    print(f"{cfg['rows']:,} rows x {N_FEATURES} features in {len(paths)} Parquet files, "
          f"row groups of {cfg['row_group_rows']:,}; {cfg['n_trees']} trees of depth "
          f"{cfg['depth']}, {cfg['n_bins']} bins; {os.cpu_count()} CPUs")
    rows = [fresh_process(cfg, mode, paths) for mode in cfg["modes"]]
    print_table(rows, [("mode", "mode", ""), ("peak RSS over baseline MiB",
                                              "peak_over_baseline_mib", ".0f"),
                       ("fit s", "fit_s", ".1f"), ("s/tree", "s_per_tree", ".3f"),
                       ("test AUC", "test_auc", ".4f")])
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, rows=rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:  # a measuring process started by fresh_process
        one = json.loads(sys.argv[2])
        print(json.dumps(measure_one(one["cfg"], one["mode"], one["paths"])))
    else:
        main(load_config("bench_external_memory", doc=__doc__))
