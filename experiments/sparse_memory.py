"""Peak memory of a fit on a scipy.sparse one-hot matrix against the same matrix dense.

    python experiments/sparse_memory.py [--config configs/sparse_memory.toml] [--quick]

X is the one-hot encoding of ``categorical_columns`` random columns of ``levels``
levels each (exactly one 1 per column and row), built as a CSR matrix; the dense input
is ``X.toarray()`` in float32. Each input is fitted in a fresh process, whose peak
resident memory (``resource.getrusage``) is read before the fit (the input built) and
after it. Prints a markdown table (docs/benchmarks.md) and writes results.json. Public
jaxgbt API only.
"""

import resource
import sys
import time

import numpy as np
from _runner import in_fresh_process, load_config, output_dir, print_table, write_json

COLUMNS = [("X", "input", ""), ("rows", "rows", ",d"), ("features", "features", ",d"),
           ("input MB", "input_mb", ",.0f"), ("peak before fit MB", "before_mb", ",.0f"),
           ("peak after fit MB", "after_mb", ",.0f"), ("fit adds MB", "added_mb", ",.0f"),
           ("fit s", "seconds", ".1f")]


def _peak_mb() -> float:
    # ru_maxrss is in kilobytes on Linux, in bytes on macOS.
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def one_hot(rows: int, columns: int, levels: int, seed: int = 0):
    """(CSR f32[rows, columns * levels], y f32[rows]): one-hot random categories and a
    label that depends on a few of them."""
    import scipy.sparse

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, levels, (rows, columns))
    indices = (codes + levels * np.arange(columns)).ravel()
    X = scipy.sparse.csr_matrix(
        (np.ones(indices.size, np.float32), indices, np.arange(0, indices.size + 1, columns)),
        shape=(rows, columns * levels))
    score = (codes[:, 0] < levels // 2).astype(np.float32) + (codes[:, 1] % 3 == 0)
    y = (score + rng.normal(0, 0.5, rows) > 1).astype(np.float32)
    return X, y


def measure(input_kind: str, cfg: dict) -> dict:
    """One fit in this (fresh) process, and its numbers."""
    import jaxgbt

    X, y = one_hot(cfg["rows"], cfg["categorical_columns"], cfg["levels"])
    if input_kind == "dense":
        X = X.toarray()
        input_bytes = X.nbytes
    else:
        input_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    before = _peak_mb()
    start = time.perf_counter()
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"])
    model.leaf_value.block_until_ready()
    seconds = time.perf_counter() - start
    after = _peak_mb()
    return dict(input=input_kind, rows=X.shape[0], features=X.shape[1],
                input_mb=input_bytes / 2**20, before_mb=before, after_mb=after,
                added_mb=after - before, seconds=seconds)


def main(cfg: dict) -> list[dict]:
    # Each fit in a fresh process: its own peak memory.
    rows = [in_fresh_process(measure, input_kind, cfg) for input_kind in cfg["inputs"]]
    print_table(rows, COLUMNS)
    return rows


if __name__ == "__main__":
    config = load_config("sparse_memory", doc=__doc__)
    write_json(output_dir(config) / "results.json", main(config))
