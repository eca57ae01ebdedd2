"""experiments/ordered_statistics_folds.py: its ordered statistics against a plain float64
loop, and the emulation's premise, that chained one-tree fits on one frame are one fit."""

import numpy as np
import pandas as pd
import pytest
from conftest import experiment_modules


@pytest.fixture(scope="module")
def folds():
    with experiment_modules("ordered_statistics_folds") as (module,):
        yield module


def test_ordered_statistics_use_only_the_rows_before_in_the_order(folds):
    rng = np.random.default_rng(0)
    code = rng.integers(0, 5, 300)
    y = rng.normal(size=300)
    order = rng.permutation(300)
    expected = np.empty(300)
    sums, counts = np.zeros(5), np.zeros(5)
    for i in order:
        expected[i] = (sums[code[i]] + 0.3) / (counts[code[i]] + 1.0)
        sums[code[i]] += y[i]
        counts[code[i]] += 1
    np.testing.assert_allclose(folds.ordered_statistics(code, y, order, 0.3), expected,
                               rtol=1e-12)
    # several targets at once (one per class for softmax): each column as on its own
    both = folds.ordered_statistics(code, np.stack([y, 2 * y], axis=1), order,
                                    np.array([0.3, 0.6]))
    np.testing.assert_allclose(both[:, 0], expected, rtol=1e-12)
    np.testing.assert_allclose(both[:, 1], 2 * expected, rtol=1e-12)


def test_test_rows_get_the_all_rows_statistic_and_unseen_labels_the_prior(folds):
    X = pd.DataFrame({"x": np.arange(8, dtype=np.float32),
                      "c": pd.Categorical(["a", "b", "a", None, "b", "a", "z", "b"])})
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0])
    train, test = np.arange(6), np.array([6, 7])
    test_frame, train_frame = folds.split_frames(X, y, train, test)
    prior = y[:6].mean()
    # "z" never seen: the prior; "b": rows 1 and 4 of the training rows
    np.testing.assert_allclose(test_frame["c_0"], [prior, (0.0 + prior) / 3])
    np.testing.assert_array_equal(test_frame["x"], [6.0, 7.0])
    first = train_frame(np.arange(6))["c_0"].to_numpy()  # in row order: "a" rows see earlier "a"
    np.testing.assert_allclose(first[[0, 2, 5]], [prior, (1 + prior) / 2, (2 + prior) / 3])


def test_one_tree_fits_chained_on_one_frame_are_the_plain_fit():
    import jaxgbt

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=200) > 0).astype(np.float32)
    settings = dict(depth=3, learning_rate=0.3, random_strength=0.0)
    chained = None
    for _ in range(4):
        chained = jaxgbt.fit("logistic", X, y, n_trees=1, init_model=chained, **settings)
    plain = jaxgbt.fit("logistic", X, y, n_trees=4, **settings)
    np.testing.assert_allclose(chained.predict_raw(X), plain.predict_raw(X), rtol=1e-6,
                               atol=1e-6)
