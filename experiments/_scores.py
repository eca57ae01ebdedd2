"""Test scores computed on the host in float64 NumPy, so that every library's predictions
are scored by the same code (and no library's own metric decides a comparison)."""

import numpy as np


def auc(y, score) -> float:
    """ROC AUC by the Mann-Whitney U statistic; tied scores get their average rank."""
    _, inverse, counts = np.unique(score, return_inverse=True, return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]
    positive = np.asarray(y) == 1
    n_pos, n_neg = positive.sum(), (~positive).sum()
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def logloss(y, p) -> float:
    """Mean binary log loss of P(y = 1), clipped away from 0 and 1."""
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1 - 1e-15)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))


def rmse(y, prediction) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((np.asarray(prediction, np.float64) - y) ** 2)))


def multi_logloss(y, p) -> float:
    """Mean multiclass log loss of P(y = k), rows of p over the K classes."""
    p = np.clip(np.asarray(p, np.float64), 1e-15, 1.0)
    return float(-np.mean(np.log(p[np.arange(len(y)), np.asarray(y, np.int64)])))


def accuracy(y, p) -> float:
    """Share of rows whose most probable class (the argmax of a row of p) is the label."""
    return float(np.mean(np.argmax(np.asarray(p), axis=1) == np.asarray(y)))
