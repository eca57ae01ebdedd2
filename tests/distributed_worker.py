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

# Rows of process 0; process 1 gets the rest (uneven on purpose). With 4 processes the
# training rows are cut at FOUR_WAY_SPLITS (uneven too).
SPLIT = 180
FOUR_WAY_SPLITS = (60, 200, 330)
# The ranking case's queries: rows i // QUERY_ROWS, so every share above holds whole ones.
QUERY_ROWS = 10
N_ROWS = 600
# The process whose id this variable holds exits at once (the test of a dying process).
DIE_ENV = "JAXGBT_TEST_DIE"
# Comma-separated names of the cases to fit (default: all of them).
CASES_ENV = "JAXGBT_TEST_CASES"
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
        "categorical": dict(loss="logistic", X=with_categories(X)[rows], y=y[rows],
                            categorical_features=[0, 2], one_hot_max_size=4,
                            eval_set=[(with_categories(X)[eval_rows], y[eval_rows])],
                            **SMALL),
        "lambdarank": dict(loss="lambdarank_ndcg", X=X[rows], y=relevance(X)[rows],
                           group=rows // QUERY_ROWS, n_trees=30, depth=3, n_bins=32,
                           eval_set=[dict(X=X[eval_rows], y=relevance(X)[eval_rows],
                                          group=eval_rows // QUERY_ROWS)],
                           early_stopping_rounds=3),
    }


def with_categories(X):
    """X as an object array: column 0 string labels of 12 levels plus one ("rare") only
    in rows 450-459 (none in the first processes' shares), column 2 three integer
    values; the other columns as they are."""
    out = X.astype(object)
    level = np.digitize(X[:, 0], np.quantile(X[:, 0], np.linspace(0, 1, 13)[1:-1]))
    out[:, 0] = [f"c{k}" for k in level]
    out[450:460, 0] = "rare"
    out[:, 2] = np.digitize(X[:, 2], np.quantile(X[:, 2], [1 / 3, 2 / 3])).astype(float)
    return out


def relevance(X):
    """f32[N] graded relevance 0..3 for the ranking case, from two columns."""
    score = X[:, 1] + 0.5 * X[:, 3]
    return np.digitize(score, np.quantile(score, [0.4, 0.7, 0.9])).astype(np.float32)


def shares(n_processes: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each process's training rows and validation rows (uneven shares)."""
    train, held_out = np.arange(N_ROWS - 100), np.arange(N_ROWS - 100, N_ROWS)
    if n_processes == 2:
        return np.split(train, [SPLIT]), np.split(held_out, [30])
    return (np.split(train, FOUR_WAY_SPLITS) if n_processes == 4 else
            np.array_split(train, n_processes)), np.array_split(held_out, n_processes)


def main(out: Path) -> None:
    # When a process is meant to die, the survivor need not wait the default 30 s for it.
    dying = os.environ.get(DIE_ENV) is not None
    jaxgbt.distributed.initialize(**({"heartbeat_timeout_seconds": 5} if dying else {}))
    X, y, weight, classes = data()
    train_shares, eval_shares = shares(jax.process_count())
    rows, eval_rows = train_shares[jax.process_index()], eval_shares[jax.process_index()]
    wanted = os.environ.get(CASES_ENV)
    if os.environ.get(DIE_ENV) == str(jax.process_index()):
        os._exit(3)  # dies without a word, as a killed process does
    with_missing = X[rows].copy()
    with_missing[::7, 2] = np.nan
    np.save(out / f"cuts_{jax.process_index()}.npy",
            merged_thresholds(with_missing, weight[rows], 32))
    # 8 bins: columns of more than 16 x 8 distinct values in a process are sketched.
    np.save(out / f"sketched_cuts_{jax.process_index()}.npy",
            merged_thresholds(with_missing, weight[rows], 8))
    for name, kwargs in cases(X, y, weight, classes, rows, eval_rows).items():
        if wanted and name not in wanted.split(","):
            continue
        model = jaxgbt.fit(kwargs.pop("loss"), kwargs.pop("X"), kwargs.pop("y"),
                           distributed=True, **kwargs)
        everything = with_categories(X) if name == "categorical" else X
        np.save(out / f"{name}_{jax.process_index()}.npy",
                np.asarray(model.predict_raw(everything)))
        print(f"process {jax.process_index()}: {name} done, {model.n_trees} trees", flush=True)
    if not wanted or "split_query" in wanted:  # query 0 has rows in every process
        try:
            jaxgbt.fit("lambdarank_ndcg", X[rows], relevance(X)[rows], distributed=True,
                       group=np.zeros(len(rows), np.int64), **SMALL)
        except ValueError as error:
            (out / f"split_query_{jax.process_index()}.txt").write_text(str(error))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
