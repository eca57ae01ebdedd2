"""First-fit overhead: how long the first fit in a fresh process takes beyond a warm one.

    python experiments/bench_compile.py [--config configs/bench_compile.toml]

Each configuration runs in its own fresh Python process (so nothing is compiled yet):
it fits once, then again on the same data, and reports the first fit's extra seconds
(compilation plus one-off tracing), the number of XLA compilations of the first fit and
their seconds (JAX's compile-duration events), and the warm fit's seconds. With
``persistent_cache = true`` it repeats the measurement with JAX's persistent compilation
cache in a temporary folder, filled by one process beforehand: what every process after
the first on a machine pays. Prints a markdown table (docs/benchmarks.md) and writes
results.json.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one(rows: int, features: int, n_trees: int, depth: int, grow_policy: str) -> dict:
    """Measures one configuration in this process (call it in a fresh one)."""
    import jax
    import numpy as np
    from jax._src import monitoring

    import jaxgbt

    compiles = []
    monitoring.register_event_duration_secs_listener(
        lambda name, seconds, **_: compiles.append(seconds)
        if name == "/jax/core/compile/backend_compile_duration" else None)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, features)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=rows) > 0).astype(np.float32)
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


def fresh_process(arguments: list, cache_dir: str | None) -> dict:
    env = dict(os.environ)
    if cache_dir is not None:
        env.update(JAX_COMPILATION_CACHE_DIR=cache_dir,
                   JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                   JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    out = subprocess.run([sys.executable, __file__, "--one", json.dumps(arguments)], check=True,
                         capture_output=True, text=True, env=env).stdout
    return json.loads(out.splitlines()[-1])


def main(config_path: Path) -> list[dict]:
    cfg = tomllib.loads(config_path.read_text())
    results = []
    print("| grow_policy | depth | cache | first fit s | warm fit s | first-fit overhead s | "
          "XLA compilations | compile s |")
    print("|---|---|---|---|---|---|---|---|")
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
                        print(f"| {policy} | {depth} | {'warm' if cached else 'none'} | "
                              f"{r['first_s']:.2f} | {r['warm_s']:.2f} | {r['overhead_s']:.2f} | "
                              f"{r['n_compiles']} | {r['compile_s']:.2f} |", flush=True)
    out_dir = ROOT / cfg["output_dir"]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(dict(config=cfg, results=results),
                                                     indent=1))
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs/bench_compile.toml")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*json.loads(args.one))))
    else:
        main(args.config)
