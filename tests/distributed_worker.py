"""One process of the 2-process fits in tests/test_distributed.py (not a test module).

Run as ``python tests/distributed_worker.py OUT_DIR`` by ``jaxgbt launch`` or by the test,
with the JAXGBT_* environment variables of ``jaxgbt.distributed``. Each case fits on this
process's rows (an uneven split of the same data) and saves the model's raw predictions
on all rows to OUT_DIR/<case>_<process>.npy; the test compares them with one process's
fit on all rows (``CASES`` there and here share their settings). After them,
``checkpointed`` stops a fit after a checkpoint and resumes it, and ``continued`` goes on
from the "plain" model with per-row starting margins.
"""

import os
import sys
from pathlib import Path

import jax
import numpy as np

import jaxgbt
import jaxgbt.fitting
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
# The checkpointed fit: two chunks of 16 rounds, stopped after the first.
CHECKPOINTED = dict(SMALL, n_trees=24)


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
                                 grow_policy="depthwise",
                                 # CatBoost's search, the default for few rows of
                                 # values in one process (spec.search_defaults), as
                                 # the processes take it when it is passed
                                 split_curvature="weight", score_function="cosine",
                                 l2=3.0, **SMALL),
        "categorical": dict(loss="logistic", X=with_categories(X)[rows], y=y[rows],
                            categorical_features=[0, 2], one_hot_max_size=4,
                            # processes share one order of the target statistics
                            statistic_orders=1,
                            # and search as Newton: CatBoost's search is the default on
                            # few rows of one process only (spec.search_defaults)
                            split_curvature="hessian", score_function="l2", l2=1.0,
                            eval_set=[(with_categories(X)[eval_rows], y[eval_rows])],
                            **SMALL),
        "lambdarank": dict(loss="lambdarank_ndcg", X=X[rows], y=relevance(X)[rows],
                           group=rows // QUERY_ROWS, n_trees=30, depth=3, n_bins=32,
                           eval_set=[dict(X=X[eval_rows], y=relevance(X)[eval_rows],
                                          group=eval_rows // QUERY_ROWS)],
                           early_stopping_rounds=3),
    }


def margins(X):
    """f32[N]: per-row starting margins of the continued case, from one column."""
    return (0.3 * X[:, 5] - 0.2).astype(np.float32)


def checkpointed(out: Path, X, y, rows) -> None:
    """A fit stopped by a callback right after its checkpoint at round 16, run again
    (it resumes there), and the same fit uninterrupted: their raw predictions on all rows
    to OUT/checkpoint_<process>.npy, the round each resumed from to
    resumed_<process>.txt, and the error of a fit whose rows differ in process 1 only to
    other_data_<process>.txt. Each process passes a path of its own: only process 0's is
    read or written."""
    me = jax.process_index()
    path = out / f"fit_{me}.ckpt"
    whole = jaxgbt.fit("logistic", X[rows], y[rows], distributed=True, **CHECKPOINTED)
    kwargs = dict(CHECKPOINTED, distributed=True, checkpoint_path=path, checkpoint_every=16)
    jaxgbt.fit("logistic", X[rows], y[rows], callbacks=[lambda state: state.round == 15],
               **kwargs)
    resumed_from, train = [], jaxgbt.fitting.train

    def spied_train(*args, resume=None, **train_kwargs):  # which round the fit resumed at
        resumed_from.append(0 if resume is None else resume.rounds_done)
        return train(*args, resume=resume, **train_kwargs)

    jaxgbt.fitting.train = spied_train
    try:
        resumed = jaxgbt.fit("logistic", X[rows], y[rows], **kwargs)
    finally:
        jaxgbt.fitting.train = train
    np.save(out / f"checkpoint_{me}.npy",
            np.stack([np.asarray(m.predict_raw(X)) for m in (whole, resumed)]))
    (out / f"resumed_{me}.txt").write_text(str(resumed_from[0]))
    other = y[rows].copy()
    if me == 1:
        other[0] = 1 - other[0]  # one label of process 1: the digests of process 0 agree
    try:
        jaxgbt.fit("logistic", X[rows], other, **kwargs)
    except ValueError as error:
        (out / f"other_data_{me}.txt").write_text(str(error))


def continued(out: Path, X, y, rows, eval_rows, plain: jaxgbt.Booster) -> None:
    """The "plain" model (the same on every process) continued with per-row starting
    margins (``margins``) and a validation set with its own: raw predictions on all rows
    from margins(X) to OUT/continued_<process>.npy, the history to history_<process>.npy,
    and the plain model to plain.jgbt (process 0) for the one-process twin."""
    model = jaxgbt.fit("logistic", X[rows], y[rows], distributed=True, init_model=plain,
                       base_margin=margins(X)[rows],
                       eval_set=[(X[eval_rows], y[eval_rows])],
                       eval_base_margin=[margins(X)[eval_rows]], **SMALL)
    np.save(out / f"continued_{jax.process_index()}.npy",
            np.asarray(model.predict_raw(X, base_margin=margins(X))))
    np.save(out / f"history_{jax.process_index()}.npy",
            np.asarray(model.history["valid_0:logloss"]))
    if jax.process_index() == 0:
        plain.save(out / "plain.jgbt")


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
    models = {}
    for name, kwargs in cases(X, y, weight, classes, rows, eval_rows).items():
        if wanted and name not in wanted.split(","):
            continue
        model = models[name] = jaxgbt.fit(kwargs.pop("loss"), kwargs.pop("X"),
                                          kwargs.pop("y"), distributed=True, **kwargs)
        everything = with_categories(X) if name == "categorical" else X
        np.save(out / f"{name}_{jax.process_index()}.npy",
                np.asarray(model.predict_raw(everything)))
        print(f"process {jax.process_index()}: {name} done, {model.n_trees} trees", flush=True)
    if not wanted or "checkpointed" in wanted:
        checkpointed(out, X, y, rows)
    if "plain" in models and (not wanted or "continued" in wanted):
        continued(out, X, y, rows, eval_rows, models["plain"])
    if not wanted or "split_query" in wanted:  # query 0 has rows in every process
        try:
            jaxgbt.fit("lambdarank_ndcg", X[rows], relevance(X)[rows], distributed=True,
                       group=np.zeros(len(rows), np.int64), **SMALL)
        except ValueError as error:
            (out / f"split_query_{jax.process_index()}.txt").write_text(str(error))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
