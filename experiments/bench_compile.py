"""First-fit overhead: how long the first fit in a fresh process takes beyond a warm one.

    python experiments/bench_compile.py [--config configs/bench_compile.toml] [--set key=value]

Each configuration runs in its own fresh Python process (so nothing is compiled yet):
it fits once, then again on the same data, and reports the first fit's extra seconds
(compilation plus one-off tracing), the number of XLA compilations of the first fit and
their seconds (JAX's compile-duration events), and the warm fit's seconds. With
``persistent_cache = true`` it repeats the measurement with the persistent compilation
cache ``import jaxgbt`` turns on (the programs it keeps, ``jaxgbt.engine.cache``) in a
temporary folder, filled by one process beforehand: what every process after the first
on a machine pays. With ``calls``, it also times the first call of each named
entry point in a fresh process (``fit_many``, ``cv``, ``fit_auto``, indexing the stacked
models of a ``fit_many``, a model's ``expected_value``; ``small_fits``: 12 fits of 10
trees on small data sets of 30 to 250 rows and 5 columns of varied kinds, whatever
``rows`` and ``features`` say), with the compilations inside it. Prints markdown tables
(docs/benchmarks.md) and writes results.json.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from _runner import load_config, output_dir, print_table, processor, write_json

COLUMNS = [("grow_policy", "grow_policy", ""), ("depth", "depth", "d"),
           ("cache", lambda r: "warm" if r["cache"] else "none", ""),
           ("first fit s", "first_s", ".2f"), ("warm fit s", "warm_s", ".2f"),
           ("first-fit overhead s", "overhead_s", ".2f"), ("XLA compilations", "n_compiles", "d"),
           ("compile s", "compile_s", ".2f")]


def _listened_data(rows: int, features: int):
    """(a list that grows by the seconds of each XLA compilation from now on, X f32[rows,
    features], y f32[rows]): the synthetic binary data every measurement fits."""
    import numpy as np
    from jax._src import monitoring

    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, seconds, **_: compiles.append(seconds)
        if name == "/jax/core/compile/backend_compile_duration" else None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=rows) > 0).astype(np.float32)
    return compiles, X, y


def one(rows: int, features: int, n_trees: int, depth: int, grow_policy: str) -> dict:
    """Measures one configuration in this process (call it in a fresh one)."""
    import jax

    import jaxgbt

    compiles, X, y = _listened_data(rows, features)
    seconds, first_compiles = [], []
    for _ in range(2):
        start = time.perf_counter()
        model = jaxgbt.fit("logistic", X, y, n_trees=n_trees, depth=depth,
                           grow_policy=grow_policy)
        jax.block_until_ready(model.leaf_value)
        seconds.append(time.perf_counter() - start)
        first_compiles = first_compiles or list(compiles)
    return dict(first_s=seconds[0], warm_s=seconds[1], overhead_s=seconds[0] - seconds[1],
                n_compiles=len(first_compiles), compile_s=sum(first_compiles))


CALL_COLUMNS = [("first call", "call", ""), ("s", "call_s", ".2f"),
                ("XLA compilations", "n_compiles", "d"), ("compile s", "compile_s", ".2f")]


def _small_sets(n_sets: int = 12, n_features: int = 5, seed: int = 0) -> list:
    """(X, y) of ``n_sets`` small binary problems, as scikit-learn's estimator checks and
    the folds of small data make: 30 to 250 rows, each column 0/1, 3- to 6-valued or
    continuous at random."""
    import numpy as np

    rng = np.random.default_rng(seed)
    sets = []
    for _ in range(n_sets):
        n = int(rng.integers(30, 251))
        X = rng.normal(size=(n, n_features)).astype(np.float32)
        for j, kind in enumerate(rng.integers(0, 3, n_features)):
            if kind < 2:
                X[:, j] = rng.integers(0, 2 if kind == 0 else int(rng.integers(3, 7)), n)
        sets.append((X, (X[:, 0] + rng.normal(size=n) > 0).astype(np.float32)))
    return sets


def one_call(rows: int, features: int, n_trees: int, call: str) -> dict:
    """Times the first call of ``call`` in this process (call it in a fresh one); what it
    needs first (a fit for ``expected_value``, a sweep for ``members``) is not timed."""
    import jax

    import jaxgbt

    compiles, X, y = _listened_data(rows, features)
    rates = {"learning_rate": [0.03, 0.1, 0.3]}
    before = {"members": lambda: jaxgbt.fit_many("logistic", X, y, params=rates,
                                                 n_trees=n_trees),
              "expected_value": lambda: jaxgbt.fit("logistic", X, y, n_trees=n_trees)}
    made = before.get(call, lambda: None)()
    timed = {"fit_many": lambda: jaxgbt.fit_many("logistic", X, y, params=rates,
                                                 n_trees=n_trees),
             "cv": lambda: jaxgbt.cv("logistic", X, y, n_folds=5, n_trees=n_trees).models,
             "fit_auto": lambda: jaxgbt.fit_auto("logistic", X, y, max_trees=n_trees,
                                                 n_folds=3),
             "members": lambda: [made[i] for i in range(3)],
             "small_fits": lambda: [jaxgbt.fit("logistic", X_small, y_small, n_trees=10,
                                               depth=3).leaf_value
                                    for X_small, y_small in _small_sets()],
             "expected_value": lambda: made.expected_value}[call]
    compiles.clear()
    start = time.perf_counter()
    jax.block_until_ready(timed())
    return dict(call_s=time.perf_counter() - start, n_compiles=len(compiles),
                compile_s=sum(compiles))


def fresh_process(arguments: list, cache_dir: str | None) -> dict:
    env = dict(os.environ, JAXGBT_COMPILATION_CACHE="0")  # no cache unless asked below
    if cache_dir is not None:
        # jaxgbt's own cache as a user gets it (the programs it keeps: engine.cache), in
        # a directory of this run's; a cache the environment configured would replace it.
        env.update(JAXGBT_COMPILATION_CACHE="1", JAXGBT_CACHE_DIR=cache_dir)
        for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                     "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"):
            env.pop(name, None)
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(arguments)], check=True,
                         capture_output=True, text=True, env=env).stdout
    return json.loads(out.splitlines()[-1])


def main(cfg: dict) -> list[dict]:
    results = []
    print(f"processor: {processor()}")
    print_table([], COLUMNS)  # the rows follow as each process reports
    caches = [False, True] if cfg.get("persistent_cache") else [False]
    for cached in caches:
        with tempfile.TemporaryDirectory() as cache_dir:
            for policy in cfg["grow_policies"]:
                for depth in cfg["depths"]:
                    arguments = [cfg["rows"], cfg["features"], cfg["n_trees"], depth, policy]
                    if cached:
                        fresh_process(arguments, cache_dir)  # fills the cache
                    for repeat in range(cfg["repeats"]):
                        r = dict(fresh_process(arguments, cache_dir if cached else None),
                                 grow_policy=policy, depth=depth, repeat=repeat, cache=cached)
                        results.append(r)
                        print_table([r], COLUMNS, header=False)
    calls = []
    if cfg.get("calls"):
        print()
        print_table([], CALL_COLUMNS)
    for call in cfg.get("calls", []):
        for repeat in range(cfg["repeats"]):
            r = dict(fresh_process([cfg["rows"], cfg["features"], cfg["call_trees"], call],
                                   None), call=call, repeat=repeat)
            calls.append(r)
            print_table([r], CALL_COLUMNS, header=False)
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, processor=processor(),
                                                      results=results, calls=calls))
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:  # a measuring process started by fresh_process
        arguments = json.loads(sys.argv[2])
        measure = one_call if len(arguments) == 4 else one
        print(json.dumps(measure(*arguments)))
    else:
        main(load_config("bench_compile", doc=__doc__))
