"""One process of the 2-process fits in tests/test_distributed.py (not a test module).

Run as ``python tests/distributed_worker.py OUT_DIR`` by ``jaxgbt launch`` or by the test,
with the JAXGBT_* environment variables of ``jaxgbt.distributed``. Each case fits on this
process's rows (an uneven split of the same data) and saves the model's raw predictions
on all rows to OUT_DIR/<case>_<process>.npy; the test compares them with one process's
fit on all rows (``CASES`` there and here share their settings).
"""

import os
import sys
from pathlib import Path

import jax
import numpy as np

import jaxgbt
from jaxgbt import datasets
from jaxgbt.data.distributed import merged_thresholds

# Rows of process 0; process 1 gets the rest (uneven on purpose).
SPLIT = 180
N_ROWS = 600
# The process whose id this variable holds exits at once (the test of a dying process).
DIE_ENV = "JAXGBT_TEST_DIE"
SMALL = dict(n_trees=8, depth=3, n_bins=32)


def data():
    """The first N_ROWS of LightGBM's binary example: X f32[600, 28], y f32[600], and
    weights, eval rows and a 3-class label derived from them."""
    X, y, _, _ = datasets.load_lightgbm_binary()
    X, y = X[:N_ROWS].astype(np.float32), y[:N_ROWS].astype(np.float32)
    weight = (1.0 + (np.arange(N_ROWS) % 4) / 2).astype(np.float32)  # sums exactly
    classes = (np.digitize(X[:, 0], np.quantile(X[:, 0], [1 / 3, 2 / 3]))).astype(np.float32)
    return X, y, weight, classes


def cases(X, y, weight, classes, rows, eval_rows):
    """{name: fit keyword arguments} on the given rows (all rows: one process)."""
    return {
        "plain": dict(loss="logistic", X=X[rows], y=y[rows], **SMALL),
        "weighted_eval": dict(loss="logistic", X=X[rows], y=y[rows],
                              sample_weight=weight[rows], n_trees=40, depth=3, n_bins=32,
                              learning_rate=0.5,
                              eval_set=[(X[eval_rows], y[eval_rows])],
                              early_stopping_rounds=3),
        "softmax": dict(loss="softmax", X=X[rows], y=classes[rows], **SMALL),
        "sampled": dict(loss="logistic", X=X[rows], y=y[rows], subsample=0.5,
                        colsample_bytree=0.7, **SMALL),
        "depthwise_huber": dict(loss="huber@1.0", X=X[rows], y=X[rows, 1],
                                 grow_policy="depthwise", **SMALL),
    }


def main(out: Path) -> None:
    jaxgbt.distributed.initialize()
    X, y, weight, classes = data()
    train, held_out = np.arange(N_ROWS - 100), np.arange(N_ROWS - 100, N_ROWS)
    first = jax.process_index() == 0
    rows = train[:SPLIT] if first else train[SPLIT:]
    eval_rows = held_out[:30] if first else held_out[30:]
    if os.environ.get(DIE_ENV) == str(jax.process_index()):
        os._exit(3)  # dies without a word, as a killed process does
    with_missing = X[rows].copy()
    with_missing[::7, 2] = np.nan
    np.save(out / f"cuts_{jax.process_index()}.npy",
            merged_thresholds(with_missing, weight[rows], 32))
    for name, kwargs in cases(X, y, weight, classes, rows, eval_rows).items():
        model = jaxgbt.fit(kwargs.pop("loss"), kwargs.pop("X"), kwargs.pop("y"),
                           distributed=True, **kwargs)
        np.save(out / f"{name}_{jax.process_index()}.npy", np.asarray(model.predict_raw(X)))
        print(f"process {jax.process_index()}: {name} done, {model.n_trees} trees", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
