"""Synthetic HIGGS-like data shared by the benchmarks: 28 float features (some taking
only 3 values, as in HIGGS), a binary target from a nonlinear score, 2% NaN."""

import numpy as np


def higgs_like(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 28)).astype(np.float32)
    X[:, 21:24] = rng.integers(0, 3, size=(n_rows, 3))  # three-valued, like HIGGS' b-tags
    X[:, 5:10] = np.exp(X[:, 5:10] / 2)  # skewed, positive
    score = (X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2 - np.log(X[:, 5])
             + 0.7 * (X[:, 21] - 1) * X[:, 4] + 0.3 * X[:, 10:20].sum(axis=1) / 3 - 0.5)
    y = (rng.random(n_rows) < 1 / (1 + np.exp(-score))).astype(np.float32)
    X[rng.random(X.shape) < 0.02] = np.nan
    return X, y
