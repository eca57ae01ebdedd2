"""Training rows padded to a bucket of row counts, so that fits on data of nearby sizes
(data that grows, folds of unequal size) run one compiled training program.

A fit's rows are padded on the host to ``bucket_rows(N)`` with copies of its last row at
weight 0. Such a row adds +-0 to every histogram, leaf and cover sum (in the same order:
the padding comes last), is never drawn by row sampling (draws need weight above 0, and
the real rows' draws are the first N of a longer draw, which JAX's partitionable
threefry makes the same), comes after every real row in ordered boosting's order, and
is cut from the margins returned. Models are the same bit for bit. Where that does not
hold the rows are left as they are: GOSS (its top fraction counts rows), group and
dataset losses (rows coupled through their groups), rows over devices (each device's
share would change), traced arrays (``fit_many``, ``cv``: one program for all models
already), and over ``MAX_PADDED_ROWS`` rows.
"""

import jax
import numpy as np

from jaxgbt.core.config import BoostConfig, bucketed
from jaxgbt.core.histogram import CPU_ROWS_PER_BLOCK
from jaxgbt.core.round import TrainData
from jaxgbt.core.tracing import is_traced

# Row counts are padded to 256 at least, then to a quarter step between powers of two
# (2**k times 1.25, 1.5, 1.75, 2): above 256 rows at most a fifth of a fit's rows are
# padding, and the row counts from 1,000 to 2,000 share 5 programs. Below 256 rows a
# tree costs microseconds more for the padding while each new program costs about a
# second to compile, so every fit that small shares one row count.
MIN_BUCKET_ROWS = 256
STEPS_PER_DOUBLING = 4

# Larger fits keep their rows: every tree pays for the padding (up to a fifth more rows
# in each histogram) while a compilation (about 2.5 s at depth 6 on 2 cores, whatever
# N) is a small part of such a fit: 200 trees take about 1.6 s at 65,536 rows, 5 s at
# 200,000. Above ``histogram.CPU_ROWS_PER_BLOCK`` rows padding would not even be exact:
# histograms sum rows in blocks whose bounds depend on N.
MAX_PADDED_ROWS = min(2**16, CPU_ROWS_PER_BLOCK)


def bucket_rows(n_rows: int) -> int:
    """The padded row count of a fit on ``n_rows`` rows (at least ``n_rows``)."""
    return bucketed(n_rows, MIN_BUCKET_ROWS, STEPS_PER_DOUBLING)


def padded_row_count(config: BoostConfig, data: TrainData, raw, mesh) -> int:
    """N padded to its bucket where padding leaves the model unchanged (see the module
    docstring), else N. ``data`` and ``raw`` may hold ``jax.ShapeDtypeStruct``."""
    n_rows = data.weight.shape[0]
    if (mesh is not None or config.grouped or config.row_sampling == "goss"
            or n_rows > MAX_PADDED_ROWS
            or any(is_traced(leaf) for leaf in jax.tree.leaves((data, raw)))):
        return n_rows
    return bucket_rows(n_rows)


def pad_rows(tree, n_padded: int, *, rows_axis: int = 0, fill=None):
    """Every array of ``tree`` with its rows (axis ``rows_axis``) extended to
    ``n_padded``: copies of the last row, or ``fill``. Arrays are padded on the host
    (on the device, each new row count would compile a padding program);
    ``jax.ShapeDtypeStruct`` leaves get the padded shape."""

    def pad(leaf):
        n_rows = leaf.shape[rows_axis]
        if n_rows == n_padded:
            return leaf
        shape = list(leaf.shape)
        shape[rows_axis] = n_padded
        if isinstance(leaf, jax.ShapeDtypeStruct):
            return jax.ShapeDtypeStruct(tuple(shape), leaf.dtype)
        values = np.asarray(leaf)
        widths = [(0, 0)] * values.ndim
        widths[rows_axis] = (0, n_padded - n_rows)
        padded = (np.pad(values, widths, mode="edge") if fill is None
                  else np.pad(values, widths, constant_values=fill))
        return jax.device_put(padded)

    return jax.tree.map(pad, tree)


def padded_data(data: TrainData, n_padded: int) -> TrainData:
    """``data`` with ``n_padded`` rows: the last row's bins and labels repeated at weight
    0, the padding last in ordered boosting's order (sparse entries name real rows
    only, and padding rows weigh nothing; bundles of sparse features are padded as the
    bins). Not for group losses."""
    n_rows = data.weight.shape[0]
    if n_padded == n_rows:
        return data
    order = data.order
    if order is not None:  # after every real row: they precede none of them
        order = (jax.ShapeDtypeStruct((n_padded,), order.dtype)
                 if isinstance(order, jax.ShapeDtypeStruct)
                 else jax.device_put(np.concatenate([np.asarray(order), np.arange(
                     n_rows, n_padded, dtype=np.asarray(order).dtype)])))
    entries = data.entries
    if entries is not None and entries.bundles is not None:  # bundles are by row
        entries = entries._replace(bundles=pad_rows(entries.bundles, n_padded, rows_axis=1))
    return data._replace(
        bins=None if data.bins is None else pad_rows(data.bins, n_padded, rows_axis=1),
        y=pad_rows(data.y, n_padded), weight=pad_rows(data.weight, n_padded, fill=0.0),
        order=order, entries=entries)


def real_rows(margins, n_rows: int):
    """The first ``n_rows`` rows of margins (or a pair of them), sliced on the host."""
    def cut(array):
        if array.shape[0] == n_rows:
            return array
        if is_traced(array):
            return array[:n_rows]
        return jax.device_put(np.asarray(array)[:n_rows])

    return jax.tree.map(cut, margins)
