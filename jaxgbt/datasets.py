"""Small real datasets bundled with jaxgbt, for examples, tests and benchmarks.

The files live in ``jaxgbt/_data`` and are read with ``importlib.resources``, so they
work from an installed wheel as well as from a checkout. Origins and licenses are in
``jaxgbt/_data/NOTICE.md``.
"""

import gzip
from importlib import resources

import numpy as np


def _lines(name: str) -> list[str]:
    """The lines of a gzipped text file of ``jaxgbt/_data``."""
    with resources.files("jaxgbt").joinpath("_data", name).open("rb") as raw:
        with gzip.open(raw, "rt", encoding="ascii") as text:
            return text.read().splitlines()


def _read_lightgbm_tsv(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X f32[N, F], y f64[N]) from a gzipped tab-separated file, label in column 0."""
    table = np.loadtxt(_lines(name), delimiter="\t", dtype=np.float64, ndmin=2)
    return table[:, 1:].astype(np.float32), table[:, 0]


def _read_libsvm(name: str, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(X f32[N, F], y f64[N]) from a gzipped LibSVM file: ``label index:value ...``,
    indices from 1, an absent index is 0."""
    lines = _lines(name)
    X = np.zeros((len(lines), n_features), np.float32)
    y = np.empty(len(lines), np.float64)
    for row, line in enumerate(lines):
        label, *pairs = line.split()
        y[row] = float(label)
        for pair in pairs:
            index, value = pair.split(":")
            X[row, int(index) - 1] = float(value)
    return X, y


def load_lightgbm_binary() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """LightGBM's binary-classification example (microsoft/LightGBM, MIT).

    28 float features of HIGGS-style physics events, no missing values, label 0/1.
    The features are written with 3 decimals, so float32 holds them as well as
    float64 would, and every library given these arrays sees the same values.

    Returns:
      X_train: ndarray of shape (7000, 28), dtype float32.
      y_train: ndarray of shape (7000,), dtype float64, values 0.0 / 1.0.
      X_test: ndarray of shape (500, 28), dtype float32.
      y_test: ndarray of shape (500,), dtype float64, values 0.0 / 1.0.
    """
    X_train, y_train = _read_lightgbm_tsv("lightgbm_binary.train.gz")
    X_test, y_test = _read_lightgbm_tsv("lightgbm_binary.test.gz")
    return X_train, y_train, X_test, y_test


def load_lightgbm_multiclass() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """LightGBM's multiclass example (microsoft/LightGBM, MIT): 5 classes.

    28 float features (the repository does not name their source), no missing values.

    Returns:
      X_train: ndarray of shape (7000, 28), dtype float32.
      y_train: ndarray of shape (7000,), dtype float64, classes 0.0 .. 4.0.
      X_test: ndarray of shape (500, 28), dtype float32.
      y_test: ndarray of shape (500,), dtype float64.
    """
    X_train, y_train = _read_lightgbm_tsv("lightgbm_multiclass.train.gz")
    X_test, y_test = _read_lightgbm_tsv("lightgbm_multiclass.test.gz")
    return X_train, y_train, X_test, y_test


def load_lightgbm_rank() -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """LightGBM's lambdarank example (microsoft/LightGBM, MIT): graded relevance 0..4
    of documents for queries, 300 sparse features (absent = 0).

    Returns:
      (X_train, y_train, group_train), (X_test, y_test, group_test): X f32[N, 300], y
      f64[N] relevance, group i64[N] the query id of each row (a query's rows are
      contiguous; ``np.bincount(group)`` gives LightGBM's query sizes). Train: 3005 rows
      in 201 queries; test: 768 rows in 50 queries.
    """
    parts = []
    for split in ("train", "test"):
        X, y = _read_libsvm(f"lightgbm_rank.{split}.gz", 300)
        sizes = np.array(_lines(f"lightgbm_rank.{split}.query.gz"), np.int64)
        parts.append((X, y, np.repeat(np.arange(sizes.size), sizes)))
    return tuple(parts)


def load_adult():
    """Adult (census income; UCI, via google/yggdrasil-decision-forests, Apache-2.0).

    A 70/30 split of UCI's ``adult.data``: 6 numeric columns (age, fnlwgt,
    education_num, capital_gain, capital_loss, hours_per_week), 8 text categorical
    columns (workclass, education, marital_status, occupation, relationship, race, sex,
    native_country; missing values in workclass, occupation and native_country) and the
    label ``income`` (``"<=50K"`` or ``">50K"``). Needs pandas.

    Returns:
      (train, test): pandas DataFrames of 22792 and 9769 rows, 15 columns each, as
      ``pandas.read_csv`` reads the files (missing categories as NaN).
    """
    try:
        import pandas as pd
    except ImportError as error:
        raise ImportError("load_adult returns pandas DataFrames: pip install pandas") from error
    frames = []
    for split in ("train", "test"):
        with resources.files("jaxgbt").joinpath("_data", f"adult_{split}.csv.gz").open(
                "rb") as raw:
            frames.append(pd.read_csv(raw, compression="gzip"))
    return tuple(frames)
