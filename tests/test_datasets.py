"""jaxgbt.datasets: the bundled data read back with the documented shapes and labels."""

import numpy as np
import pytest

from jaxgbt import datasets


def test_lightgbm_binary_and_multiclass():
    for load, classes in ((datasets.load_lightgbm_binary, [0, 1]),
                          (datasets.load_lightgbm_multiclass, [0, 1, 2, 3, 4])):
        X_train, y_train, X_test, y_test = load()
        assert (X_train.shape, X_test.shape) == ((7000, 28), (500, 28))
        assert X_train.dtype == np.float32 and y_train.dtype == np.float64
        assert np.unique(y_train).tolist() == classes and np.isfinite(X_train).all()


def test_lightgbm_rank_has_contiguous_queries():
    (X, y, group), (X_test, y_test, group_test) = datasets.load_lightgbm_rank()
    assert X.shape == (3005, 300) and X_test.shape == (768, 300)
    assert np.unique(y).tolist() == [0, 1, 2, 3, 4]
    assert (np.diff(group) >= 0).all() and group.max() + 1 == 201 and group_test.max() + 1 == 50
    assert np.bincount(group).sum() == 3005


def test_adult_frames():
    pytest.importorskip("pandas")
    train, test = datasets.load_adult()
    assert train.shape == (22792, 15) and test.shape == (9769, 15)
    assert sorted(train["income"].unique()) == ["<=50K", ">50K"]
    assert train["workclass"].isna().sum() == 1257  # missing fields read as NaN
