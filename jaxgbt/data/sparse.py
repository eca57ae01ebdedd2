"""scipy.sparse matrices as X: read, cut and binned column by column, never densified whole.

A sparse X (``csr_matrix``, ``csc_matrix``, ``csr_array``, ``csc_array``, or any other
scipy.sparse format) is read into one column-major (CSC) float32 copy. An entry the
matrix does not store is 0, a value like any other, as in XGBoost and LightGBM; an
explicitly stored NaN is a missing value. Cut points come from each column's stored
values plus its count of implicit zeros (``column_values``), so they equal the cut
points of the same matrix densified; the binned matrix is filled with each column's
bin of 0 and then its stored entries' bins (``binning.apply_bins``). Prediction
densifies rows in blocks of ``PREDICT_BLOCK_ROWS`` (``row_blocks``).

scipy is not a dependency of jaxgbt: it is imported only once an argument's type comes
from ``scipy.sparse``.
"""

import numpy as np

from jaxgbt.core.dtypes import FLOAT_DTYPE

# Rows densified at a time for prediction: 65,536 rows of 2,000 features are 0.5 GB of
# float32, far below a dense copy of a large sparse matrix.
PREDICT_BLOCK_ROWS = 65_536


def is_sparse(X) -> bool:
    """Whether X is a scipy.sparse matrix or array (False, without importing scipy, for
    anything whose type does not come from scipy.sparse)."""
    if not type(X).__module__.startswith("scipy.sparse"):
        return False
    import scipy.sparse  # noqa: PLC0415 - scipy is optional: only for scipy's own types

    return scipy.sparse.issparse(X)


def check_sparse_X(X, name: str = "X"):
    """X as a new canonical CSC matrix of float32 values, read-only, the caller's
    matrix left as it was.

    Canonical: duplicate entries summed (as ``X.toarray()`` would) and row indices
    sorted within each column. Stored NaN stays (a missing value); stored inf is refused.

    Raises:
      TypeError: X does not hold real numbers.
      ValueError: X is not 2-D, has no rows or columns, one row, or an infinite value.
    """
    import scipy.sparse  # noqa: PLC0415 - see is_sparse

    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features); got a sparse array "
                         f"of shape {X.shape}.")
    dtype = np.dtype(X.dtype)
    if not (np.issubdtype(dtype, np.number) or dtype == np.bool_) or np.issubdtype(
            dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers; got a sparse matrix of dtype {dtype}.")
    n_rows, n_features = X.shape
    if n_rows == 0 or n_features == 0:
        raise ValueError(f"{name} is empty (shape {X.shape}); it needs at least one row and "
                         "one feature.")
    if n_rows < 2:
        raise ValueError(f"{name} has {n_rows} row; boosting needs at least 2 rows to split. "
                         "Predict a constant instead, or add rows.")
    # csc_matrix(X) of a CSC X shares its arrays; astype with copy=True never does.
    columns = scipy.sparse.csc_matrix(X).astype(FLOAT_DTYPE, copy=True)
    columns.sum_duplicates()  # also sorts the indices
    infinite = np.isinf(columns.data)
    if infinite.any():
        first = int(np.flatnonzero(infinite)[0])
        column = int(np.searchsorted(columns.indptr, first, side="right") - 1)
        raise ValueError(f"{name} stores {int(infinite.sum())} infinite values (first at row "
                         f"{int(columns.indices[first])}, column {column}). Replace them with "
                         "NaN to mark them missing, or with finite values.")
    for array in (columns.data, columns.indices, columns.indptr):
        array.flags.writeable = False
    return columns


def column_values(X, f: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Column f of a CSC matrix: (rows i32[nnz_f], stored values f32[nnz_f], count of
    implicit zeros), read without a copy."""
    start, stop = X.indptr[f], X.indptr[f + 1]
    return X.indices[start:stop], X.data[start:stop], X.shape[0] - int(stop - start)


def rows(X, selected: np.ndarray):
    """The CSC matrix of the rows ``selected`` (i64[n], increasing) of X."""
    import scipy.sparse  # noqa: PLC0415 - see is_sparse

    return scipy.sparse.csc_matrix(scipy.sparse.csr_matrix(X)[selected])


def row_blocks(X, block_rows: int | None = None):
    """Dense f32[n, F] blocks of at most ``block_rows`` (default ``PREDICT_BLOCK_ROWS``)
    consecutive rows of sparse X, implicit entries as 0, in order."""
    import scipy.sparse  # noqa: PLC0415 - see is_sparse

    block_rows = PREDICT_BLOCK_ROWS if block_rows is None else block_rows
    by_rows = scipy.sparse.csr_matrix(X)
    for start in range(0, X.shape[0], block_rows):
        yield by_rows[start:start + block_rows].toarray().astype(FLOAT_DTYPE, copy=False)


def densified(X) -> np.ndarray:
    """Sparse X as one dense f32[N, F] array (implicit entries 0)."""
    return np.concatenate(list(row_blocks(X)), axis=0)
