"""Feature importance from the split arrays of a fitted model.

The functions take the model's arrays rather than a ``Booster`` (this package sits below
``jaxgbt.model``), and work on host NumPy copies: importance is a small summary read by
people, computed once.
"""

from collections.abc import Sequence
from typing import Literal

import numpy as np

from jaxgbt.core.layout import Layout

ImportanceKind = Literal["split", "gain", "cover"]
IMPORTANCE_KINDS: tuple[str, ...] = ("split", "gain", "cover")

MSG_NO_COVER = (
    "{what} needs the trees' covers (the training Hessian reaching each leaf), and this "
    "model has none: it was loaded from a file written before covers were stored. Refit "
    "the model (or continue from the same data) with this version of jaxgbt and save it "
    "again; 'split' and 'gain' importance work without covers.")


def require_cover(cover, what: str):
    """``cover``, or a ValueError saying that ``what`` needs it when it is None."""
    if cover is None:
        raise ValueError(MSG_NO_COVER.format(what=what))
    return cover


def check_kind(kind: str) -> None:
    if kind not in IMPORTANCE_KINDS:
        raise ValueError(f"importance kind {kind!r} is not one of {IMPORTANCE_KINDS}: 'split' "
                         "counts the splits on each feature, 'gain' sums their training gain, "
                         "'cover' sums the Hessian of the rows they split.")


def split_cover(cover: np.ndarray, layout: Layout, depth: int) -> np.ndarray:
    """f64[..., T, M]: the cover of each split entry, the sum of its node's leaves.

    Args:
      cover: f[..., T, L], the leaves' covers.
      layout: where the split entries sit (one per level, or one per node in heap order).
      depth: D.
    An oblivious level's one entry covers every leaf; node j of a depthwise level d
    covers leaves j * 2**(D - d) to (j + 1) * 2**(D - d) - 1.
    """
    cover = np.asarray(cover, np.float64)
    lead, n_leaves = cover.shape[:-1], cover.shape[-1]
    levels = []
    for level in range(depth):
        entries = layout.level_splits(level)
        n_entries = entries.stop - entries.start
        levels.append(cover.reshape(lead + (n_entries, n_leaves // n_entries)).sum(-1))
    return np.concatenate(levels, axis=-1)


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
