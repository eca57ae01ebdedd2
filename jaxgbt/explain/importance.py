"""Feature importance from the split arrays of a fitted model.

The functions take the model's arrays rather than a ``Booster`` (this package sits below
``jaxgbt.model``), and work on host NumPy copies: importance is a small summary read by
people, computed once.
"""

from collections.abc import Sequence
from typing import Literal

import numpy as np

ImportanceKind = Literal["split", "gain"]
IMPORTANCE_KINDS: tuple[str, ...] = ("split", "gain")


def check_kind(kind: str) -> None:
    if kind not in IMPORTANCE_KINDS:
        raise ValueError(f"importance kind {kind!r} is not one of {IMPORTANCE_KINDS}: 'split' "
                         "counts the splits on each feature, 'gain' sums their training gain, "
                         "'cover' sums the Hessian of the rows they split.")


def split_importance(feature: np.ndarray, split_gain: np.ndarray, weight: np.ndarray | None,
                     raw_column: Sequence[int], n_features: int) -> np.ndarray:
    """f64[..., F]: per raw column, the sum over splits of ``weight`` (1 when None).

    Args:
      feature: i32[..., T, M], the split column of each split entry (an encoded column
        when the model has categorical encoders).
      split_gain: f32[..., T, M]; entries with gain 0 are pass-through splits (every row
        goes left) and count for nothing.
      weight: f[..., T, M] per split entry (its gain or cover), or None to count splits.
      raw_column: for each split column, the raw column of X it comes from (length
        F_enc; an identity for models without encoders).
      n_features: F, raw columns.
    Leading axes (stacked models) are kept.
    """
    feature = np.asarray(feature)
    used = np.asarray(split_gain) > 0
    values = used.astype(np.float64) if weight is None else np.where(
        used, np.asarray(weight, np.float64), 0.0)
    column = np.asarray(raw_column, np.int64)[feature]  # [..., T, M]
    lead = feature.shape[:-2]
    flat_column = column.reshape(-1, column.shape[-2] * column.shape[-1])
    flat_values = values.reshape(flat_column.shape)
    out = np.stack([np.bincount(c, weights=v, minlength=n_features)
                    for c, v in zip(flat_column, flat_values, strict=True)])
    return out.reshape(lead + (n_features,))
