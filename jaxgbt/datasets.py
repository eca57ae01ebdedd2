"""Small real datasets bundled with jaxgbt, for examples, tests and benchmarks.

The files live in ``jaxgbt/_data`` and are read with ``importlib.resources``, so they
work from an installed wheel as well as from a checkout. Origins and licenses are in
``jaxgbt/_data/NOTICE.md``.
"""

import gzip
from importlib import resources

import numpy as np


def _read_lightgbm_tsv(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X f32[N, F], y f64[N]) from a gzipped tab-separated file, label in column 0."""
    with resources.files("jaxgbt").joinpath("_data", name).open("rb") as raw:
        with gzip.open(raw, "rt", encoding="ascii") as text:
            table = np.loadtxt(text, delimiter="\t", dtype=np.float64, ndmin=2)
    return table[:, 1:].astype(np.float32), table[:, 0]


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
