"""Scaling, memory and prediction: jaxgbt against XGBoost, LightGBM and CatBoost.

    python experiments/bench_scale.py [--config configs/bench_scale.toml] [--quick]
        [--rows 1000000 2000000 ...] [--set key=value]

On the synthetic HIGGS-like data (experiments/_synthetic.py), with the same trees, depth,
bins, learning rate and l2 for every library (the anchors with `threads` threads), prints
four markdown tables and writes results.json to the config's output_dir:

1. Seconds per tree against rows: the best of `repeats` warm fits, binning included.
   jaxgbt's first fit at each shape (its compile) is timed apart and not counted. The last
   line is each library's t(most rows) / t(fewest rows): 4.0 for 4x the rows is linear.
2. Seconds per tree against depth at `depth_rows` rows (LightGBM: num_leaves = 2**depth,
   max_depth = depth). A (rows, depth) already timed in table 1 is reused, not refitted.
3. Peak RSS of the whole process: each library fits once in a fresh process running this
   script (the hidden --one mode, started through a small process in between, see
   TRAMPOLINE) on data loaded from .npy files, so no data-generation temporaries inflate
   the peak. "baseline" is ru_maxrss after the imports (and, for jaxgbt, the start of the
   XLA CPU client) and the data; "fit peak" is ru_maxrss after the fit (for jaxgbt this
   first fit includes its compile); "held after fit" is the resident set once the model
   is freed minus the resident set before the fit, and "held after malloc_trim" the same
   once glibc has returned its free heap to the system (what the allocator keeps, as
   against what the library keeps). Linux (glibc) only.
4. Prediction of `predict_rows` float rows by a `predict_trees`-tree model: the first call
   (jaxgbt compiles its predict program in it) and the best of `predict_repeats` calls
   after it, with the test AUC as a check that every model learned.

`--quick` applies the config's [quick] table (small sizes, a smoke run); `--rows` replaces
the row counts of table 1 (after --quick). Public jaxgbt API only.
"""

import ctypes
import gc
import importlib
import importlib.metadata
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _runner import load_config, output_dir, print_table, timed, write_json
from _scores import auc
from _synthetic import higgs_like

# jax and the libraries are imported inside functions: a --one process imports only the
# library it measures, so its baseline memory holds nothing else.


def fit_jaxgbt(cfg, X, y, depth, n_trees):
    import jax

    import jaxgbt

    model = jaxgbt.fit("logistic", X, y, n_trees=n_trees, depth=depth, n_bins=cfg["n_bins"],
                       learning_rate=cfg["learning_rate"], l2=cfg["l2"])
    jax.block_until_ready(model.leaf_value)
    return model


def fit_xgboost(cfg, X, y, depth, n_trees):
    import xgboost

    model = xgboost.XGBClassifier(n_estimators=n_trees, max_depth=depth,
                                  learning_rate=cfg["learning_rate"], reg_lambda=cfg["l2"],
                                  max_bin=cfg["n_bins"], tree_method="hist", n_jobs=cfg["threads"])
    return model.fit(X, y)


def fit_lightgbm(cfg, X, y, depth, n_trees):
    import lightgbm

    model = lightgbm.LGBMClassifier(n_estimators=n_trees, max_depth=depth, num_leaves=2 ** depth,
                                    learning_rate=cfg["learning_rate"], reg_lambda=cfg["l2"],
                                    max_bin=cfg["n_bins"] - 1, n_jobs=cfg["threads"], verbose=-1)
    return model.fit(X, y)


def fit_catboost(cfg, X, y, depth, n_trees):
    import catboost

    model = catboost.CatBoostClassifier(iterations=n_trees, depth=depth,
                                        learning_rate=cfg["learning_rate"], l2_leaf_reg=cfg["l2"],
                                        border_count=cfg["n_bins"] - 1,
                                        thread_count=cfg["threads"], verbose=False,
                                        allow_writing_files=False)
    return model.fit(X, y)


FITTERS = {"jaxgbt": fit_jaxgbt, "xgboost": fit_xgboost, "lightgbm": fit_lightgbm,
           "catboost": fit_catboost}


def predict(cfg, name, model, X) -> np.ndarray:
    """Probabilities of the positive class, shape (n_samples,), on the host."""
    if name == "jaxgbt":
        return np.asarray(model.predict(X))  # waits for the device
    if name == "catboost":
        return model.predict_proba(X, thread_count=cfg["threads"])[:, 1]
    return model.predict_proba(X)[:, 1]  # XGBoost and LightGBM keep the fit's n_jobs


def log(message: str) -> None:
    """Progress on stderr, so that stdout holds only the tables."""
    print(message, file=sys.stderr, flush=True)


def available(cfg) -> list[str]:
    """jaxgbt, then the configured anchors that are installed."""
    names = ["jaxgbt"]
    for name in cfg["anchors"]:
        if importlib.util.find_spec(name) is None:
            print(f"{name} is not installed; skipped")
        else:
            names.append(name)
    return names


def versions(libraries) -> dict[str, str]:
    packages = ["numpy", "jax", "jaxlib", *libraries]
    return {name: importlib.metadata.version(name) for name in packages}


# 1 and 2: seconds per tree


def seconds_per_tree(cfg, name, X, y, depth, n_trees) -> dict:
    """The best of `repeats` warm fits, divided by n_trees; jaxgbt first fits once to
    compile, and that fit's seconds are kept apart as first_fit_s."""
    first_fit_s = None
    if name == "jaxgbt":
        _, first_fit_s = timed(FITTERS[name], cfg, X, y, depth, n_trees)
    best_fit_s = min(timed(FITTERS[name], cfg, X, y, depth, n_trees)[1]
                     for _ in range(cfg["repeats"]))
    log(f"{name}: {len(X):,} rows, depth {depth}: {best_fit_s / n_trees:.4f} s/tree")
    return dict(per_tree_s=best_fit_s / n_trees, best_fit_s=best_fit_s, first_fit_s=first_fit_s)


def time_all(cfg, libraries, X, y, depth) -> dict:
    return {name: seconds_per_tree(cfg, name, X, y, depth, cfg["n_trees"]) for name in libraries}


def scaling_in_rows(cfg, libraries) -> dict:
    """{rows: {library: timing}} at the config's depth and n_trees."""
    by_rows = {}
    for n_rows in cfg["rows"]:
        X, y = higgs_like(n_rows, cfg["seed"])
        by_rows[n_rows] = time_all(cfg, libraries, X, y, cfg["depth"])
        del X, y
    return by_rows


def scaling_in_depth(cfg, libraries, by_rows) -> dict:
    """{depth: {library: timing}} at depth_rows rows; reuses table 1's row at its depth."""
    by_depth, data = {}, None
    for depth in cfg["depths"]:
        if depth == cfg["depth"] and cfg["depth_rows"] in by_rows:
            by_depth[depth] = by_rows[cfg["depth_rows"]]
            continue
        if data is None:
            data = higgs_like(cfg["depth_rows"], cfg["seed"])
        by_depth[depth] = time_all(cfg, libraries, *data, depth)
    return by_depth


def timing_row(label, timings, libraries) -> dict:
    """One table row: seconds per tree per library, then jaxgbt / the fastest anchor."""
    per_tree = {name: timings[name]["per_tree_s"] for name in libraries}
    fastest = min([per_tree[name] for name in libraries[1:]], default=float("nan"))
    return dict(label=label, **per_tree, ratio=per_tree["jaxgbt"] / fastest)


def timing_columns(first_column, libraries) -> list:
    return [(first_column, "label", ""), *((name, name, ".4f") for name in libraries),
            ("jaxgbt / fastest anchor", "ratio", ".2f")]


def print_rows_table(cfg, libraries, by_rows) -> None:
    print(f"\nSeconds per tree against rows: depth {cfg['depth']}, {cfg['n_trees']} trees, "
          f"{cfg['n_bins']} bins, best of {cfg['repeats']} warm fits")
    rows = [timing_row(f"{n_rows:,}", timings, libraries) for n_rows, timings in by_rows.items()]
    fewest, most = min(by_rows), max(by_rows)
    # Growth from the fewest rows to the most: a ratio, shown with 2 decimals, not 4.
    rows.append(dict(label=f"t({most:,}) / t({fewest:,})", **{
        name: f"{by_rows[most][name]['per_tree_s'] / by_rows[fewest][name]['per_tree_s']:.2f}"
        for name in libraries}))
    print_table(rows, timing_columns("rows", libraries))


def print_depth_table(cfg, libraries, by_depth) -> None:
    print(f"\nSeconds per tree against depth: {cfg['depth_rows']:,} rows, {cfg['n_trees']} trees, "
          f"{cfg['n_bins']} bins, best of {cfg['repeats']} warm fits")
    print_table([timing_row(str(depth), timings, libraries)
                 for depth, timings in by_depth.items()], timing_columns("depth", libraries))


# 3: peak memory, one fresh process per library


def peak_rss_kib() -> int:
    """The process's peak resident set so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def current_rss_kib() -> int:
    """The process's resident set now, from /proc/self/statm (pages)."""
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * resource.getpagesize() // 1024


def vm_hwm_kib() -> int:
    """The address space's peak resident set (VmHWM), a check on ru_maxrss."""
    with open("/proc/self/status") as file:
        return next(int(line.split()[1]) for line in file if line.startswith("VmHWM:"))


def start_library(name) -> None:
    """Imports the library; for jaxgbt also starts the XLA CPU client (jax.devices())."""
    if name == "jaxgbt":
        import jax

        import jaxgbt  # noqa: F401

        jax.devices()
    else:
        importlib.import_module(name)


def memory_one(cfg, name, data_dir) -> dict:
    """Runs in a fresh process: one fit on the saved data, and the RSS around it (KiB)."""
    start_library(name)
    X, y = np.load(Path(data_dir) / "X.npy"), np.load(Path(data_dir) / "y.npy")
    baseline_kib, before_kib = peak_rss_kib(), current_rss_kib()
    model = FITTERS[name](cfg, X, y, cfg["depth"], cfg["n_trees"])
    peak_kib = peak_rss_kib()
    del model
    gc.collect()
    after_kib = current_rss_kib()
    ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc hands its free heap back to the system
    return dict(baseline_kib=baseline_kib, peak_kib=peak_kib, before_fit_kib=before_kib,
                after_fit_kib=after_kib, after_trim_kib=current_rss_kib(),
                vm_hwm_kib=vm_hwm_kib(), live_jax_bytes=live_jax_bytes(name))


def live_jax_bytes(name) -> int | None:
    """Bytes of the JAX arrays still alive (for jaxgbt, once its model is freed)."""
    if name != "jaxgbt":
        return None
    import jax

    return sum(array.nbytes for array in jax.live_arrays())


# Linux keeps the larger of ru_maxrss and the old address space's peak across exec, so a
# process started straight from this (large) one would report this one's peak as its own.
# A small Python process in between starts the measured one from a fresh address space.
TRAMPOLINE = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def fresh_process(cfg, name, data_dir, label=None, env=None) -> dict:
    argument = json.dumps(dict(cfg=cfg, name=name, data_dir=str(data_dir)))
    command = [sys.executable, "-c", TRAMPOLINE, sys.executable, __file__, "--one", argument]
    done = subprocess.run(command, capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})
    if done.returncode != 0:
        raise RuntimeError(f"the {name} process failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.splitlines()[-1])
    log(f"{label or name}: baseline {result['baseline_kib'] / 1024:.0f} MiB, "
        f"fit peak {result['peak_kib'] / 1024:.0f} MiB")
    return result


CACHED = "jaxgbt (compilation cache warm)"


def peak_memory(cfg, libraries) -> dict:
    """{library: RSS numbers} for one fit on memory_rows rows, each in a fresh process.

    jaxgbt is measured twice: as a first process on the machine (its fit compiles), and
    with JAX's persistent compilation cache filled by an earlier process (the fit loads
    the compiled programs instead), which is what every later process pays.
    """
    X, y = higgs_like(cfg["memory_rows"], cfg["seed"])
    with tempfile.TemporaryDirectory() as data_dir:
        np.save(Path(data_dir) / "X.npy", X)
        np.save(Path(data_dir) / "y.npy", y)
        del X, y
        results = {name: fresh_process(cfg, name, data_dir) for name in libraries}
        if "jaxgbt" in libraries:
            cache = {"JAX_COMPILATION_CACHE_DIR": str(Path(data_dir) / "jax_cache"),
                     "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                     "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
            fresh_process(cfg, "jaxgbt", data_dir, "jaxgbt (filling the cache)", cache)
            results[CACHED] = fresh_process(cfg, "jaxgbt", data_dir, CACHED, cache)
        return results


def print_memory_table(cfg, by_library) -> None:
    print(f"\nPeak RSS of a fresh process: one fit on {cfg['memory_rows']:,} rows, depth "
          f"{cfg['depth']}, {cfg['n_trees']} trees (MiB)")
    print_table([dict(r, library=name) for name, r in by_library.items()], [
        ("library", "library", ""),
        ("baseline (imports + data)", lambda r: r["baseline_kib"] / 1024, ".0f"),
        ("fit peak", lambda r: r["peak_kib"] / 1024, ".0f"),
        ("fit peak - baseline", lambda r: (r["peak_kib"] - r["baseline_kib"]) / 1024, ".0f"),
        ("held after fit (model freed)",
         lambda r: (r["after_fit_kib"] - r["before_fit_kib"]) / 1024, ".0f"),
        ("held after malloc_trim",
         lambda r: (r["after_trim_kib"] - r["before_fit_kib"]) / 1024, ".0f")])
    jaxgbt = by_library["jaxgbt"]
    print(f"\njaxgbt: {jaxgbt['live_jax_bytes'] / 2**20:.1f} MiB of JAX arrays alive after the "
          "model is freed")
    if "lightgbm" in by_library:
        lightgbm = by_library["lightgbm"]
        print(f"jaxgbt fit peak / LightGBM fit peak: "
              f"{jaxgbt['peak_kib'] / lightgbm['peak_kib']:.2f}")
        if CACHED in by_library:
            print(f"{CACHED} fit peak / LightGBM fit peak: "
                  f"{by_library[CACHED]['peak_kib'] / lightgbm['peak_kib']:.2f}")


# 4: prediction


def time_predictions(cfg, name, model, X, y) -> dict:
    """The first call, then the best of predict_repeats calls; the test AUC."""
    score, first_s = timed(predict, cfg, name, model, X)
    warm_s = min(timed(predict, cfg, name, model, X)[1] for _ in range(cfg["predict_repeats"]))
    log(f"{name}: predict {len(X):,} rows: first {first_s:.3f} s, warm {warm_s:.3f} s")
    return dict(first_call_s=first_s, warm_s=warm_s, test_auc=auc(y, score))


def prediction(cfg, libraries) -> dict:
    """{library: prediction timings} for a predict_trees-tree model of predict_depth."""
    n_train = cfg["predict_train_rows"]
    X, y = higgs_like(n_train + cfg["predict_rows"], cfg["seed"])
    results = {}
    for name in libraries:
        model = FITTERS[name](cfg, X[:n_train], y[:n_train], cfg["predict_depth"],
                              cfg["predict_trees"])
        results[name] = time_predictions(cfg, name, model, X[n_train:], y[n_train:])
        del model
    return results


def print_prediction_table(cfg, by_library) -> None:
    print(f"\nPredicting {cfg['predict_rows']:,} rows (float features): {cfg['predict_trees']} "
          f"trees of depth {cfg['predict_depth']}, warm = best of {cfg['predict_repeats']} "
          "calls after the first")
    catboost = by_library.get("catboost", {}).get("warm_s", float("nan"))
    print_table([dict(r, library=name) for name, r in by_library.items()], [
        ("library", "library", ""), ("first call s", "first_call_s", ".3f"),
        ("warm s", "warm_s", ".3f"), ("test AUC", "test_auc", ".4f"),
        ("warm / CatBoost warm", lambda r: r["warm_s"] / catboost, ".2f")])


# main


def save(cfg, results) -> None:
    write_json(output_dir(cfg) / "results.json", results)


def main(cfg) -> dict:
    start = time.perf_counter()
    libraries = available(cfg)
    results = dict(config=cfg, versions=versions(libraries), cpus=os.cpu_count())
    print(f"{os.cpu_count()} CPUs; "
          + ", ".join(f"{name} {version}" for name, version in results["versions"].items()))
    results["rows"] = scaling_in_rows(cfg, libraries)
    print_rows_table(cfg, libraries, results["rows"])
    save(cfg, results)
    results["depth"] = scaling_in_depth(cfg, libraries, results["rows"])
    print_depth_table(cfg, libraries, results["depth"])
    save(cfg, results)
    results["memory"] = peak_memory(cfg, libraries)
    print_memory_table(cfg, results["memory"])
    save(cfg, results)
    results["prediction"] = prediction(cfg, libraries)
    print_prediction_table(cfg, results["prediction"])
    results["total_s"] = time.perf_counter() - start
    save(cfg, results)
    print(f"\nTotal {results['total_s']:.0f} s; results in {cfg['output_dir']}/results.json")
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:  # a measuring process started by fresh_process
        one = json.loads(sys.argv[2])
        print(json.dumps(memory_one(one["cfg"], one["name"], one["data_dir"])))
    else:
        main(load_config("bench_scale", doc=__doc__, overrides={
            "rows": dict(type=int, nargs="+", help="row counts of the rows table")}))
