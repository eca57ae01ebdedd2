"""Ordered target statistics with CatBoost's margins per permutation, emulated: do they beat
one-hot columns where one permutation does not?

    python experiments/ordered_statistics_folds.py [--quick] [--set key=value]

``jaxgbt.fit(statistic_orders=...)`` now does this in the engine (``core.statistic_orders``);
this emulation measured it first. With one order, a row's statistic is the smoothed mean
label of the rows of its category before it, so it never holds the row's own label, and
the rows early in the order get noisy values. CatBoost keeps
several orders ("folds"), each with its own statistics *and its own margins*: a tree is
chosen on one fold's gradients, and every fold's margins are then updated with the tree
applied to that fold's statistics. This script emulates that with public calls: a chain of
one-tree ``jaxgbt.fit(..., init_model=model)`` fits, the t-th on the numeric columns plus the
statistics of order t mod P (a new order per tree for P = 0), whose starting margins are the
earlier trees applied to those statistics, as a fold's are. Per split seed (the accuracy
suite's splits of ``configs/accuracy_suite.toml``) it fits:

- one-hot: ``jaxgbt.fit`` with the categorical columns one-hot (jaxgbt's default for
  columns of up to 64 categories);
- one order: one fit on the statistics of one order (the statistics jaxgbt computes for
  larger columns; computed here in float64, prior the mean label, weight 1); columns of
  at most ``one_hot_max_size`` categories (0: none) stay one-hot here and below;
- P orders: the chain above, for each P of ``permutations``.

Test rows get the statistics over all training rows in every case. Every fit uses the
suite's budget and ``random_strength`` (0 by default: one-tree fits would restart the
noise's decay at every tree). Prints one table of the test metric's mean over the splits
per dataset (and how many splits each beats one-hot on) and writes results.json.
"""

import time

import numpy as np
import pandas as pd
from _anchors import categorical_columns
from _runner import load_config, output_dir, print_table, random_split, read_dataset, write_json

import jaxgbt
from jaxgbt import metrics
from jaxgbt.data import categorical

LOSSES = {"regression": ("squared_error", "rmse"), "binary": ("logistic", "logloss"),
          "poisson": ("poisson", "poisson_deviance"), "multiclass": ("softmax", "multi_logloss")}


def codes(train: pd.Series, test: pd.Series) -> tuple[np.ndarray, np.ndarray, int]:
    """(i64[N_train] codes, i64[N_test] codes with -1 for labels training never saw, C),
    missing values a category of their own."""
    train = train.astype(object).where(train.notna(), "NA").astype(str)
    test = test.astype(object).where(test.notna(), "NA").astype(str)
    labels = {label: i for i, label in enumerate(sorted(set(train)))}
    return (train.map(labels).to_numpy(), test.map(lambda v: labels.get(v, -1)).to_numpy(),
            len(labels))


def ordered_statistics(code: np.ndarray, y: np.ndarray, order: np.ndarray, prior
                       ) -> np.ndarray:
    """f64[N] (f64[N, M] for targets y f64[N, M] and priors f64[M]): each row's (sum of y
    + prior) / (count + 1) over the rows of its category placed before it in ``order``
    (a permutation of the rows)."""
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    by_category = np.lexsort((rank, code))
    sorted_code, sorted_y = code[by_category], y[by_category]
    before = np.cumsum(sorted_y, axis=0) - sorted_y
    starts = np.flatnonzero(np.r_[True, sorted_code[1:] != sorted_code[:-1]])
    first = np.repeat(starts, np.diff(np.r_[starts, code.size]))
    count = np.arange(code.size) - first + 1.0
    out = np.empty(y.shape)
    out[by_category] = (before - before[first] + prior) / (count if y.ndim == 1
                                                           else count[:, None])
    return out


def split_frames(X: pd.DataFrame, y: np.ndarray, train, test, n_classes: int = 0,
                 one_hot_max_size: int = 0):
    """(the test rows' frame, a function order -> the training rows' frame): numeric
    columns as they are, categorical columns as target statistics: one column of the
    mean label, or with ``n_classes`` one per class of its frequency (as jaxgbt's
    statistics for ``softmax``). Categorical columns of at most ``one_hot_max_size``
    categories in the training rows (missing counted as one) stay categorical, for
    jaxgbt to one-hot."""
    categorical = [c for c in categorical_columns(X)
                   if X[c].iloc[train].astype(object).fillna("NA").nunique() > one_hot_max_size]
    numeric = [c for c in X.columns if c not in categorical]
    targets = (np.eye(n_classes)[y[train]] if n_classes
               else y[train].astype(np.float64)[:, None])  # [N, M]
    prior = targets.mean(axis=0)
    encoded = {c: codes(X[c].iloc[train], X[c].iloc[test]) for c in categorical}

    def named(c: str, values: np.ndarray) -> dict:
        return {f"{c}_{m}": values[:, m] for m in range(values.shape[1])}

    test_columns = {}
    for c, (train_code, test_code, n) in encoded.items():
        sums = np.stack([np.bincount(train_code, targets[:, m], n)
                         for m in range(targets.shape[1])], axis=1)
        table = (sums + prior) / (np.bincount(train_code, minlength=n) + 1.0)[:, None]
        test_columns |= named(c, np.where((test_code >= 0)[:, None],
                                          table[np.maximum(test_code, 0)], prior))
    test_frame = pd.concat([X[numeric].iloc[test].reset_index(drop=True),
                            pd.DataFrame(test_columns)], axis=1)

    def train_frame(order: np.ndarray) -> pd.DataFrame:
        columns = {}
        for c, (train_code, _, _) in encoded.items():
            columns |= named(c, ordered_statistics(train_code, targets, order, prior))
        return pd.concat([X[numeric].iloc[train].reset_index(drop=True),
                          pd.DataFrame(columns)], axis=1)

    return test_frame, train_frame


def run_split(X, y, task: str, seed: int, cfg: dict) -> dict[str, float]:
    loss, metric = LOSSES[task]
    score = getattr(metrics, metric)
    train, test = random_split(len(y), seed, cfg["test_fraction"])
    test_frame, train_frame = split_frames(X, y, train, test,
                                           int(y.max()) + 1 if task == "multiclass" else 0,
                                           cfg["one_hot_max_size"])
    # Categorical columns left to jaxgbt are one-hot in every fit (below 5,000 rows its
    # default would encode those of more than two categories by its own statistics).
    settings = dict(depth=cfg["depth"], learning_rate=cfg["learning_rate"],
                    random_strength=cfg["random_strength"],
                    one_hot_max_size=categorical.ONE_HOT_MAX_SIZE)
    rng = np.random.default_rng(seed)
    out = {}
    model = jaxgbt.fit(loss, X.iloc[train], y[train], n_trees=cfg["n_trees"], **settings)
    out["one-hot"] = float(score(y[test], np.asarray(model.predict(X.iloc[test]))))
    model = jaxgbt.fit(loss, train_frame(rng.permutation(train.size)), y[train],
                       n_trees=cfg["n_trees"], **settings)
    out["one order"] = float(score(y[test], np.asarray(model.predict(test_frame))))
    for n_orders in cfg["permutations"]:
        frames = [train_frame(rng.permutation(train.size)) for _ in range(n_orders)]
        model = None
        for t in range(cfg["n_trees"]):
            frame = frames[t % n_orders] if n_orders else train_frame(rng.permutation(train.size))
            model = jaxgbt.fit(loss, frame, y[train], n_trees=1, init_model=model, **settings)
        out[order_label(n_orders)] = float(score(y[test], np.asarray(model.predict(test_frame))))
    return out


def order_label(n_orders: int) -> str:
    return "a new order per tree" if n_orders == 0 else f"{n_orders} orders"


def main(cfg: dict) -> list[dict]:
    suite = load_config("accuracy_suite", argv=[])
    rows, labels = [], ["one-hot", "one order", *map(order_label, cfg["permutations"])]
    for name in cfg["datasets"]:
        spec = suite["data"][name]
        data = read_dataset(spec)
        if data is None or spec["task"] not in LOSSES:
            print(f"{name}: skipped (no files, or a task this script does not fit)")
            continue
        X, y, _ = data
        start = time.perf_counter()
        splits = [run_split(X, y, spec["task"], seed, cfg) for seed in cfg["split_seeds"]]
        row = dict(dataset=name, metric=LOSSES[spec["task"]][1], seconds=time.perf_counter()
                   - start, splits=splits)
        for label in labels:
            values = np.array([s[label] for s in splits])
            row[label] = values.mean()
            row[f"{label} better"] = int(np.sum(values < np.array([s["one-hot"]
                                                                   for s in splits])))
        rows.append(row)
        print(f"  {name}: {row['seconds']:.0f} s", flush=True)
    n = len(cfg["split_seeds"])
    columns = [("dataset", "dataset", ""), ("metric (lower is better)", "metric", "")]
    for label in labels:
        columns.append((label, lambda r, k=label: (f"{r[k]:.4f}" if k == "one-hot" else
                                                   f"{r[k]:.4f} ({r[k + ' better']}/{n})"), ""))
    print(f"\nMean over {n} splits; (k/{n}): splits where it beats one-hot")
    print_table(rows, columns)
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, rows=rows))
    return rows


if __name__ == "__main__":
    main(load_config("ordered_statistics_folds", doc=__doc__))
