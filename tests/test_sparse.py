"""scipy.sparse X: the same cut points, binned matrix, model and predictions as the
same matrix densified (jaxgbt.data.sparse, data.binning)."""

import jax
import numpy as np
import pytest
from numpy.testing import assert_array_equal

import jaxgbt
from jaxgbt import datasets
from jaxgbt.data import binning, sparse
from jaxgbt.data.validation import check_X

scipy_sparse = pytest.importorskip("scipy.sparse")

FIT = dict(n_trees=6, depth=3, n_bins=32, learning_rate=0.3)


@pytest.fixture(scope="module")
def rank_data():
    """LightGBM's lambdarank example: 3005 x 300 LibSVM rows, 68% of entries 0 (real
    data with many zeros), relevance 0..4 as a regression label; and its test rows."""
    (X, y, _), (X_test, _, _) = datasets.load_lightgbm_rank()
    return X, y.astype(np.float32), X_test


@pytest.fixture(scope="module")
def dense_model(rank_data):
    X, y, _ = rank_data
    return jaxgbt.fit("squared_error", X, y, **FIT)


def _assert_same_model(a, b):
    leaves_a, leaves_b = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b, strict=True):
        assert_array_equal(np.asarray(x), np.asarray(y))


def _with_nan(X: np.ndarray) -> np.ndarray:
    """X with some stored entries (and some zeros) made missing."""
    X = X.copy()
    rng = np.random.default_rng(3)
    X[rng.random(X.shape) < 0.02] = np.nan
    return X


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("nan", [False, True])
def test_cut_points_equal_the_dense_ones(rank_data, weighted, nan):
    X = rank_data[0][:, :60]
    X = _with_nan(X) if nan else X
    weight = np.random.default_rng(1).uniform(0.1, 3.0, X.shape[0]) if weighted else None
    # Explicit NaN entries are stored; the zeros are implicit.
    matrix = scipy_sparse.csr_matrix(np.where(np.isnan(X), np.nan, X))
    for n_bins in (4, 16, 256):
        assert_array_equal(binning.compute_thresholds(check_X(matrix), n_bins, weight),
                           binning.compute_thresholds(X, n_bins, weight))


def test_cut_points_on_a_row_sample_equal_the_dense_ones(rank_data, monkeypatch):
    X = _with_nan(rank_data[0][:, :40])
    monkeypatch.setattr(binning, "MAX_BINNING_ROWS", 1000)
    assert_array_equal(binning.compute_thresholds(check_X(scipy_sparse.csc_matrix(X)), 64,
                                                  seed=5),
                       binning.compute_thresholds(X, 64, seed=5))


def test_stored_zeros_negative_values_and_empty_columns():
    X = np.zeros((50, 4), np.float32)
    X[::3, 0] = -np.arange(17, dtype=np.float32)  # negatives below the implicit zeros
    X[::7, 1] = np.nan  # only NaN stored: no values besides 0
    matrix = scipy_sparse.csc_array(X)
    matrix.data[:2] = 0.0  # stored zeros count as zeros
    X = matrix.toarray()
    thresholds = binning.compute_thresholds(check_X(matrix), 16)
    assert_array_equal(thresholds, binning.compute_thresholds(X, 16))
    assert_array_equal(binning.apply_bins(check_X(matrix), thresholds),
                       binning.apply_bins(X, thresholds))


def test_binned_matrix_equals_the_dense_one(rank_data):
    X = _with_nan(rank_data[0])
    thresholds = binning.compute_thresholds(X, 64)
    assert_array_equal(binning.apply_bins(check_X(scipy_sparse.csr_array(X)), thresholds),
                       binning.apply_bins(X, thresholds))


@pytest.mark.parametrize("kind", ["csr_matrix", "csc_matrix", "csr_array", "csc_array"])
def test_fit_equals_the_dense_fit_bitwise(rank_data, dense_model, kind):
    X, y, X_test = rank_data
    matrix = getattr(scipy_sparse, kind)(X)
    model = jaxgbt.fit("squared_error", matrix, y, **FIT)
    _assert_same_model(model, dense_model)
    assert_array_equal(np.asarray(model.predict(getattr(scipy_sparse, kind)(X_test))),
                       np.asarray(dense_model.predict(X_test)))


def test_stored_nan_is_missing(rank_data):
    X, y, _ = rank_data
    X = _with_nan(X[:500])
    dense = jaxgbt.fit("squared_error", X, y[:500], **FIT)
    model = jaxgbt.fit("squared_error", scipy_sparse.csr_matrix(X), y[:500], **FIT)
    _assert_same_model(model, dense)
    assert_array_equal(np.asarray(model.predict_raw(scipy_sparse.csr_matrix(X))),
                       np.asarray(dense.predict_raw(X)))


def test_predict_goes_by_row_blocks(rank_data, dense_model, monkeypatch):
    _, _, X_test = rank_data
    monkeypatch.setattr(sparse, "PREDICT_BLOCK_ROWS", 100)  # 768 rows: 8 blocks
    matrix = scipy_sparse.csr_matrix(X_test)
    # Each block is predicted as a dense batch of its size would be (a batch's compiled
    # program may sum the trees in another order, 1 ulp apart from another size's).
    by_blocks = np.concatenate([np.asarray(dense_model.predict(X_test[start:start + 100]))
                                for start in range(0, X_test.shape[0], 100)])
    assert_array_equal(np.asarray(dense_model.predict(matrix)), by_blocks)
    np.testing.assert_allclose(by_blocks, np.asarray(dense_model.predict(X_test)), rtol=1e-6)
    assert_array_equal(np.asarray(dense_model.leaf_index(matrix)),
                       np.asarray(dense_model.leaf_index(X_test)))


def test_eval_set_and_init_model_take_sparse_rows(rank_data, dense_model):
    X, y, _ = rank_data
    matrix = scipy_sparse.csr_matrix(X)
    dense = jaxgbt.fit("squared_error", X, y, **FIT, eval_set=[(X, y)], init_model=dense_model)
    model = jaxgbt.fit("squared_error", matrix, y, **FIT, eval_set=[(matrix, y)],
                       init_model=dense_model)
    _assert_same_model(model, dense)


def test_the_callers_matrix_is_not_modified(rank_data):
    X, y, _ = rank_data
    matrix = scipy_sparse.csr_matrix(X[:300])
    matrix.data[0] = np.nan
    before = [a.copy() for a in (matrix.data, matrix.indices, matrix.indptr)]
    checked = check_X(matrix)
    assert not checked.data.flags.writeable
    jaxgbt.fit("squared_error", matrix, y[:300], **FIT)
    for old, new in zip(before, (matrix.data, matrix.indices, matrix.indptr), strict=True):
        assert_array_equal(old, new)
    assert matrix.data.flags.writeable


def test_bad_sparse_input_is_refused_by_name():
    X = scipy_sparse.random(20, 3, density=0.5, format="csr", random_state=0,
                            dtype=np.float32)
    y = np.arange(20, dtype=np.float32)
    infinite = X.copy()
    infinite.data[0] = np.inf
    with pytest.raises(ValueError, match="X stores 1 infinite values"):
        jaxgbt.fit("squared_error", infinite, y, n_trees=2)
    with pytest.raises(ValueError, match="categorical_features.*scipy.sparse"):
        jaxgbt.fit("squared_error", X, y, n_trees=2, categorical_features=[0])
    with pytest.raises(ValueError, match="eval_set\\[0\\] X stores"):
        jaxgbt.fit("squared_error", X, y, n_trees=2, eval_set=[(infinite, y)])
    model = jaxgbt.fit("squared_error", X.toarray(), y, n_trees=2)
    with pytest.raises(ValueError, match="X has 4 features but the model was trained on 3"):
        model.predict(scipy_sparse.csr_matrix((5, 4), dtype=np.float32))


def test_only_scipy_types_are_taken_for_sparse():
    assert not sparse.is_sparse(np.zeros((2, 2)))
    assert not sparse.is_sparse([[0.0]])
    assert sparse.is_sparse(scipy_sparse.coo_array(np.eye(3)))


def test_sklearn_estimator_takes_sparse_X(rank_data):
    from jaxgbt.sklearn import JaxGBTRegressor

    X, y, X_test = rank_data
    estimator = JaxGBTRegressor(**FIT)
    assert estimator.__sklearn_tags__().input_tags.sparse
    estimator.fit(scipy_sparse.csr_matrix(X.astype(np.float64)), y)
    dense = JaxGBTRegressor(**FIT).fit(X, y)
    assert_array_equal(estimator.predict(scipy_sparse.csc_matrix(X_test)),
                       dense.predict(X_test))
