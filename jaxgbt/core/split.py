"""Split gain, and the choice of an oblivious level's split or of each node's own split.

The gain is XGBoost's loss change (Chen & Guestrin 2016, eq. 7, without the paper's
factor 1/2, as XGBoost and LightGBM compute it) with an L1 term: for gradient and
Hessian sums G, H of a node,

    score(G, H) = T(G)^2 / max(H + l2, 1e-6),  T(G) = sign(G) * max(|G| - l1, 0)
    gain        = score(G_L, H_L) + score(G_R, H_R) - score(G, H)

summed over outputs. With ``max_delta_step`` d (XGBoost's and LightGBM's), a leaf's
value w = -T(G) / (H + l2) is held to [-d, d], and its score is the loss change at that
value, -(2 T(G) w + (H + l2) w^2), which is the score above wherever |w| <= d.
An oblivious level applies one (feature, threshold, missing
direction) to every node of the level, so its gain is the sum over nodes; a node whose
left or right child would hold less Hessian than ``min_child_weight``, or (with
``min_data_in_leaf``) fewer rows by LightGBM's estimate from the Hessian
(``rows_per_hessian``), adds nothing.
The level is split only when that sum exceeds ``min_split_gain`` (so
``min_split_gain`` is XGBoost's ``gamma`` and LightGBM's ``min_gain_to_split``);
otherwise it is a pass-through level that sends every row left, so that trees keep a
fixed shape. A negative ``min_split_gain`` (oblivious trees: ``spec.min_split_gain``)
lets a level split at a loss: where most of its nodes are pure, splitting them costs
their leaves' l2 shrinkage more than the few mixed nodes gain, and at -inf every level
splits on its best-ranked candidate that divides rows, as CatBoost's levels do (a gain
of exactly 0 divides none: ``makes_split``). Such a split's recorded gain is
``MADE_SPLIT_MIN_GAIN``, since a gain of 0 marks a pass-through level.
A depthwise tree (``best_node_splits``) picks each node's split from that node's gains
alone, with the same rule per node.

With ``random_strength`` (CatBoost's), the candidates are ranked by a noisy score instead
of their gain (``ScoreNoise``); with ``score_function="cosine"``, by CatBoost's default
score (``cosine_scores``: for each child a value w = T(G) / (H + l2), and the candidate's
score sum(w T(G)) / sqrt(sum(w^2 H)) over every child and output, of the whole level for
an oblivious one). Either way the chosen split's gain stays its own.
"""

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.config import ScoreFunction

# The gain recorded for a split made at a gain <= 0 (a negative ``min_split_gain``): the
# smallest normal float32, so that the split still counts as one wherever a gain > 0
# tells splits from pass-through levels (importance, constraints, files), and adds
# nothing to its feature's gain importance.
MADE_SPLIT_MIN_GAIN = float(np.finfo(np.float32).tiny)

# Floor of the denominator H + l2. With l2 = 0 and a loss whose Hessian vanishes
# (absolute error, a saturated logistic) H + l2 can be 0; the floor keeps leaf values
# and gains finite. It is far below any H that a row of unit weight produces.
MIN_DENOMINATOR = 1e-6


class ScoreNoise(NamedTuple):
    """CatBoost's ``random_strength``: normal noise on the score candidates are ranked by.

    A candidate's noisy score is ``sqrt(S) + scale * e`` where S is the summed score
    T(G)^2 / (H + l2) of the children it makes (the gain plus the parent's score) and e
    a standard normal drawn for it: for squared error (H = rows) sqrt(S) is CatBoost's
    default "Cosine" score, and ``scale`` is in its units (``core.round.noise_scale``).
    With ``by_feature`` (CatBoost's selection), each feature's candidate of the largest
    noisy score is its best, and the features' bests are ranked by their own scores
    plus a fresh draw each (``candidate_ranks``); else every candidate is ranked by its
    noisy score. Candidates whose gain does not exceed ``min_split_gain`` are not
    ranked, so the noise never turns a split level into a pass-through one.

    Attributes:
      key: the level's PRNG key (u32[2]); a candidate's e is drawn from it and the
        candidate's feature index, so it does not depend on how features are blocked.
      scale: f32[], the noise's standard deviation.
      by_feature: bool[] (a traced value, so that it passes ``lax.switch`` operands):
        CatBoost's selection of one draw per candidate, then one per feature; None
        (the default's) for one draw per candidate with nothing else computed.
    """

    key: jax.Array
    scale: jax.Array
    by_feature: jax.Array | None = None


class SplitParams(NamedTuple):
    """Regularisation, as traced f32[] scalars so that they can be swept under vmap.

    ``noise`` is set per level of a round with ``random_strength`` (``ScoreNoise``),
    else None: candidates are ranked by their gain. ``min_data_in_leaf`` is None when
    that setting is off; when on, each search sets ``rows_per_hessian`` f32[n] for the
    nodes it searches (``rows_per_hessian``). ``max_delta_step`` is None when off (0),
    so that the default's programs have no clipping in them.
    """

    l2: jax.Array
    l1: jax.Array
    min_split_gain: jax.Array
    min_child_weight: jax.Array
    noise: ScoreNoise | None = None
    min_data_in_leaf: jax.Array | None = None
    rows_per_hessian: jax.Array | None = None
    max_delta_step: jax.Array | None = None


class Best(NamedTuple):
    """The best candidate of a search over some features (per node for depthwise trees).

    ``index`` counts candidates over every feature in (feature, bin, missing) order:
    ``(feature * (B - 1) + bin) * 2 + missing_right``.
    """

    gain: jax.Array  # f32[] or f32[n]
    index: jax.Array  # i32[] or i32[n]
    extra: tuple  # arrays of the same leading shape, kept with the winner
    # the score it won by (``candidate_ranks``: noisy, or the cosine score), or None
    score: jax.Array | None = None


def rank_of(best: Best) -> jax.Array:
    """What searches compare: the score a candidate ranked by (noisy, or the cosine
    score) where there is one, else the gain."""
    return best.gain if best.score is None else best.score


class LevelSplit(NamedTuple):
    """One level of an oblivious tree, in bin space."""

    feature: jax.Array  # i32[]
    split_bin: jax.Array  # i32[]: rows with bin <= split_bin go left
    default_left: jax.Array  # bool[]: where missing values go
    gain: jax.Array  # f32[]


def soft_threshold(G: jax.Array, l1: jax.Array) -> jax.Array:
    """T(G) = sign(G) * max(|G| - l1, 0), the L1 shrinkage of a gradient sum."""
    return jnp.sign(G) * jnp.maximum(jnp.abs(G) - l1, 0.0)


def leaf_weight(G: jax.Array, H: jax.Array, params: SplitParams) -> jax.Array:
    """Newton leaf value -T(G) / (H + l2), elementwise; finite for any H >= 0. With
    ``max_delta_step``, held to [-max_delta_step, max_delta_step] (``held_step``)."""
    return held_step(-soft_threshold(G, params.l1) / jnp.maximum(H + params.l2, MIN_DENOMINATOR),
                     params)


def held_step(value: jax.Array, params: SplitParams) -> jax.Array:
    """``value`` (leaf values, before the learning rate) clipped to
    [-max_delta_step, max_delta_step], or as it is when that setting is off. XGBoost's
    safeguard for losses whose Hessian can be near 0 where the gradient is not (a
    Poisson count far above its prediction, a nearly certain class): there the Newton
    step is huge, and a few rows would move the margins out of the loss's range."""
    if params.max_delta_step is None:
        return value
    # Traced (swept), 0 is off as it is when given as a number, not a bound of 0.
    bound = params.max_delta_step
    return jnp.where(bound > 0, jnp.clip(value, -bound, bound), value)


# Block length of ``prefix_sums``: a bin axis of up to 256 is 16 blocks of 16.
_PREFIX_BLOCK = 16


def prefix_sums(x: jax.Array, axis: int, block_totals: jax.Array | None = None) -> jax.Array:
    """Inclusive cumulative sums of ``x`` along ``axis``, by blocks of ``_PREFIX_BLOCK``:
    each block's running sums as a small triangular matrix product, plus the totals of
    the blocks before.

    The same sums as ``jnp.cumsum``, which XLA:CPU runs as a slower reduce-window over
    the whole axis (docs/benchmarks.md).

    The totals of the blocks before enter the product as a 17th entry of each block,
    with weight 1 for every running sum, so that the product yields the finished sums.
    Added after the product, they were fused into each consumer of the sums, whose
    loops then read a broadcast that changes every 16 entries and vectorised poorly:
    a level's search at 60 and more features took twice as long (docs/benchmarks.md,
    "The split search's prefix sums"). Both forms give the same sums up to float
    reassociation: how a product orders its additions is up to the processor's kernel.

    ``block_totals``, when given, are the blocks' totals f32[..., n_blocks] (the axes
    of ``x`` but ``axis``, in order, then the blocks), each the sum of its block's
    entries from the first, as ``_block_totals`` sums them; the last
    block's total is not used and may differ. The caller can then sum them where the
    data lie in their own order rather than along the moved axis.
    """
    n = x.shape[axis]
    if n <= _ADDED_PREFIX_MAX:
        return _added_prefix_sums(x, axis)
    n_blocks = -(-n // _PREFIX_BLOCK)
    x = jnp.moveaxis(x, axis, -1)
    batch = x.shape[:-1]
    blocks = jnp.pad(x, [(0, 0)] * len(batch) + [(0, n_blocks * _PREFIX_BLOCK - n)])
    blocks = blocks.reshape(*batch, n_blocks, _PREFIX_BLOCK)
    running = jnp.triu(jnp.ones((_PREFIX_BLOCK, _PREFIX_BLOCK), x.dtype))
    if n_blocks > 1:
        totals = block_totals if block_totals is not None else _block_totals(blocks, -1)
        before = _product(totals, jnp.triu(jnp.ones((n_blocks, n_blocks), x.dtype), 1))
        blocks = jnp.concatenate([blocks, before[..., None]], axis=-1)
        running = jnp.concatenate([running, jnp.ones((1, _PREFIX_BLOCK), x.dtype)])
    sums = _product(blocks, running).reshape(*batch, n_blocks * _PREFIX_BLOCK)[..., :n]
    return jnp.moveaxis(sums, -1, axis)


def _block_totals(blocks: jax.Array, axis: int) -> jax.Array:
    """``blocks`` summed along ``axis`` (of ``_PREFIX_BLOCK`` entries) from its first
    entry to its last, one addition at a time."""
    totals = jax.lax.index_in_dim(blocks, 0, axis, keepdims=False)
    for k in range(1, blocks.shape[axis]):
        totals = totals + jax.lax.index_in_dim(blocks, k, axis, keepdims=False)
    return totals


# Rows each product of ``prefix_sums`` is given at least. A matrix product's kernel need
# not add its terms in order, and on CPU the order can depend on the number of rows: on
# an Intel Xeon with AVX512-FP16, [R, 17] x [17, 16] gave other floats for R <= 50 than
# for the same rows within a longer product (docs/benchmarks.md, "The order of a
# product's additions"). Histograms of few features or nodes (a narrower group of
# features, the first levels, one node's bins) make short products, and their sums must
# be those of the same bins in a longer one: the search over narrower groups keeps the
# model of the full width. So short products get rows of zeros up to this count,
# dropped after.
_MIN_PRODUCT_ROWS = 256


def _product(a: jax.Array, w: jax.Array) -> jax.Array:
    """f32[..., N]: ``a`` f32[..., K] times ``w`` f32[K, N] at full float32 precision
    (accelerators would round to TF32 otherwise), as one product of at least
    ``_MIN_PRODUCT_ROWS`` rows."""
    rows = a.reshape(-1, a.shape[-1])
    n_rows = rows.shape[0]
    if n_rows < _MIN_PRODUCT_ROWS:
        rows = jnp.pad(rows, [(0, _MIN_PRODUCT_ROWS - n_rows), (0, 0)])
    product = jnp.matmul(rows, w, precision=jax.lax.Precision.HIGHEST)[:n_rows]
    return product.reshape(*a.shape[:-1], w.shape[-1])


# Up to this many bins, prefix sums are running additions: the block products pad the
# bin axis to 16, and for the 3 value bins of 0/1 features did 80 times the work
# (docs/benchmarks.md, "Sparse features").
_ADDED_PREFIX_MAX = 8


def _added_prefix_sums(x: jax.Array, axis: int) -> jax.Array:
    """``prefix_sums`` of a short axis as n - 1 additions, in the order of the sums."""
    parts = [jax.lax.index_in_dim(x, 0, axis)]
    for i in range(1, x.shape[axis]):
        parts.append(parts[-1] + jax.lax.index_in_dim(x, i, axis))
    return jnp.concatenate(parts, axis=axis)


def _by_output(hist: jax.Array) -> jax.Array:
    """f32[2K, F, n, B]: ``hist`` f32[F, n, B, 2K] with its g/h axis first.

    The split search runs along the bin axis; with the 2K sums of a bin side by side
    last, XLA:CPU's elementwise loops ran over a last axis of two entries and vectorised
    poorly; with the bins last they run over contiguous bins (docs/benchmarks.md).
    """
    return jnp.moveaxis(hist, -1, 0)


def _sum_first(x: jax.Array) -> jax.Array:
    """x summed over its first (output) axis of K, as K - 1 elementwise additions in
    output order: a reduction over an axis of a few entries made XLA:CPU's loops
    several times slower (docs/benchmarks.md)."""
    total = x[0]
    for k in range(1, x.shape[0]):
        total = total + x[k]
    return total


def _score_by_output(sums: jax.Array, params: SplitParams) -> jax.Array:
    """T(G)^2 / (H + l2) summed over outputs, for sums f32[2K, ...] (G then H first);
    with ``max_delta_step``, the loss change at the held leaf value w,
    -(2 T(G) w + (H + l2) w^2)."""
    n_outputs = sums.shape[0] // 2
    G, H = sums[:n_outputs], sums[n_outputs:]
    T = soft_threshold(G, params.l1)
    denominator = jnp.maximum(H + params.l2, MIN_DENOMINATOR)
    free = T * T / denominator
    if params.max_delta_step is None:
        return _sum_first(free)
    w = held_step(-T / denominator, params)
    # Where no bound is set (a swept 0), the free score itself, bit for bit.
    return _sum_first(jnp.where(params.max_delta_step > 0,
                                -(2.0 * T * w + denominator * w * w), free))


def _node_gains_by_direction(hist: jax.Array, params: SplitParams, bounds=None,
                             monotone: jax.Array | None = None, directions: int = 2
                             ) -> tuple[jax.Array, ...]:
    """``node_gains`` as f32[F, n, B - 1] arrays: missing values sent left, then (with
    ``directions=2``) right. Each is computed with the bins on the last axis
    (``_by_output``)."""
    return _gains_and_parent(hist, params, bounds, monotone, directions)[0]


def _cosine_denominator(left: jax.Array, right: jax.Array, params: SplitParams) -> jax.Array:
    """f32[...]: the denominator of CatBoost's cosine score for the children sums
    ``left`` and ``right`` f32[2K, ...] (G then H first): with each child's value
    w = T(G) / (H + l2), the sum of w^2 H over both children and the K outputs.

    The numerator, the sum of w T(G), is the children's summed score S (the gain plus
    the parent's score), which the gain computes already. A split's cosine score,
    S / sqrt(denominator), is the cosine between the leaf values it gives each row and
    the rows' (soft-thresholded) negative gradients, times their norm per Hessian unit;
    for an oblivious level both sums run over the level's nodes before the ratio is
    taken (``cosine_scores``)."""
    n_outputs = left.shape[0] // 2
    total = 0.0
    for child in (left, right):
        G, H = child[:n_outputs], child[n_outputs:]
        T = soft_threshold(G, params.l1)
        denominator = jnp.maximum(H + params.l2, MIN_DENOMINATOR)
        # The child's score as _score_by_output computes it, times H / (H + l2): w^2 H.
        total = total + _sum_first(T * T / denominator * H / denominator)
    return total


def _cosine_terms(left: jax.Array, right: jax.Array, children: jax.Array,
                  params: SplitParams) -> tuple[jax.Array, jax.Array]:
    """The (numerator, denominator) of a candidate's cosine score: the children's summed
    score ``children`` over ``_cosine_denominator``; with ``max_delta_step``, both from
    the held leaf values w (``held_step``), the sums of -w T(G) and w^2 H, as the
    score's own value is no longer the first of them."""
    free = children, _cosine_denominator(left, right, params)
    if params.max_delta_step is None:
        return free
    n_outputs = left.shape[0] // 2
    numerator, denominator = 0.0, 0.0
    for child in (left, right):
        G, H = child[:n_outputs], child[n_outputs:]
        T = soft_threshold(G, params.l1)
        w = held_step(-T / jnp.maximum(H + params.l2, MIN_DENOMINATOR), params)
        numerator = numerator + _sum_first(-w * T)
        denominator = denominator + _sum_first(w * w * H)
    bound = params.max_delta_step > 0  # a swept 0 is off: the free terms, bit for bit
    return (jnp.where(bound, numerator, free[0]), jnp.where(bound, denominator, free[1]))


def cosine_scores(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
    """numerator / sqrt(denominator): the children's summed score S over
    ``_cosine_denominator`` (0 where the denominator is 0: no child has gradient, and
    the candidate does not split)."""
    positive = denominator > 0
    return jnp.where(positive, numerator * jax.lax.rsqrt(jnp.where(positive, denominator, 1.0)),
                     0.0)


def rows_per_hessian(node: jax.Array, gh: jax.Array, n_nodes: int,
                     axis_name: str | None = None) -> jax.Array:
    """f32[n_nodes]: each node's rows per unit of Hessian, rows / H, 0 for a node
    without Hessian; H and the rows are summed over devices along ``axis_name``.

    A row counts when its Hessian, summed over outputs, is positive: rows of weight 0
    (padding, rows a round did not draw, a pair search's rows of other leaves) do not.
    A child's rows are then estimated as its Hessian times its node's ratio, as
    LightGBM estimates them for ``min_data_in_leaf`` (its histograms hold no counts
    either): exact for squared error on unweighted rows, where every H is 1.

    Args:
      node: i32[N], each row's node, in [0, n_nodes).
      gh: f32[N, 2K], weighted gradients then Hessians.
    """
    hessian = jnp.sum(gh[:, gh.shape[1] // 2:], axis=1)
    sums = jax.ops.segment_sum(jnp.stack([hessian, (hessian > 0).astype(gh.dtype)], axis=1),
                               node, num_segments=n_nodes)
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    positive = sums[:, 0] > 0
    return jnp.where(positive, sums[:, 1] / jnp.where(positive, sums[:, 0], 1.0), 0.0)


def _enough_rows(hessian: jax.Array, params: SplitParams) -> jax.Array:
    """bool[F, n, B - 1]: whether a child's estimated rows (its Hessian ``hessian``
    f32[F, n, B - 1], summed over outputs, times its node's ``rows_per_hessian``),
    rounded, reach ``min_data_in_leaf``."""
    rows = hessian * params.rows_per_hessian[None, :, None]
    return rows >= params.min_data_in_leaf - 0.5


class _Sums(NamedTuple):
    """The sums a histogram's candidates are scored from (``_candidate_sums``)."""

    below: jax.Array  # f32[2K, F, n, B - 1]: each candidate's value bins, up to its bin
    missing: jax.Array  # f32[2K, F, n, 1]: the missing bin
    total: jax.Array  # f32[2K, F, n, 1]: the node's
    parent: jax.Array  # f32[F, n, 1]: the node's own score


def _candidate_sums(hist: jax.Array, params: SplitParams) -> _Sums:
    """The prefix sums of ``hist`` f32[F, n, B, 2K] along its bins, with the bins last
    (``_by_output``), the node totals and the nodes' own scores.

    The prefix sums' block totals are summed from ``hist`` as it lies, each bin's 2K
    sums side by side: summed from the transposed bins, XLA:CPU read the histogram
    transposed twice, once for the totals and once for the products (0.2 of 1.7 ms of
    a level's search at 20 features, 32 nodes and three outputs, docs/benchmarks.md "The
    split search's histogram read as it lies"). The last block's total then holds the
    missing bin, which ``prefix_sums`` does not use.
    """
    by_output = _by_output(hist)  # [2K, F, n, B]
    n_bins = hist.shape[2]
    totals = None
    if n_bins - 1 > _ADDED_PREFIX_MAX and n_bins % _PREFIX_BLOCK == 0:
        blocks = hist.reshape(*hist.shape[:2], n_bins // _PREFIX_BLOCK, _PREFIX_BLOCK,
                              hist.shape[3])
        totals = jnp.moveaxis(_block_totals(blocks, 3), -1, 0)  # [2K, F, n, B / 16]
    below = prefix_sums(by_output[..., :-1], axis=-1, block_totals=totals)
    missing = by_output[..., -1:]
    total = below[..., -1:] + missing
    return _Sums(below, missing, total, _score_by_output(total, params))


def _lefts(sums: _Sums, directions: int) -> tuple[jax.Array, ...]:
    """The left children's sums f32[2K, F, n, B - 1] with missing values sent left,
    then (``directions=2``) right."""
    return (sums.below + sums.missing, sums.below)[:directions]


def _gains_and_parent(hist: jax.Array, params: SplitParams, bounds=None,
                      monotone: jax.Array | None = None, directions: int = 2,
                      cosine: bool = False
                      ) -> tuple[tuple[jax.Array, ...], jax.Array, tuple | None]:
    """(``_node_gains_by_direction``, each node's own score f32[F, n], and with
    ``cosine`` each direction's (children's summed score S, ``_cosine_denominator``)
    pair f32[F, n, B - 1], else None): the scores from the same sums as the gains
    (score noise ranks by them; the parent's computed apart, from the histogram again,
    cost a level as much as its gains at 500 features)."""
    sums = _candidate_sums(hist, params)
    return _direction_gains(sums, _lefts(sums, directions), params, bounds, monotone, cosine)


def _direction_gains(sums: _Sums, lefts: tuple[jax.Array, ...], params: SplitParams,
                     bounds=None, monotone: jax.Array | None = None, cosine: bool = False
                     ) -> tuple[tuple[jax.Array, ...], jax.Array, tuple | None]:
    """``_gains_and_parent`` from the histogram's ``_candidate_sums`` and the left
    children's sums of each missing direction searched (``_lefts``)."""
    n_outputs = sums.below.shape[0] // 2
    total, parent = sums.total, sums.parent
    gains, cosine_terms = [], []
    for left in lefts:
        right = total - left
        children = _score_by_output(left, params) + _score_by_output(right, params)
        gain = children - parent
        if cosine:
            cosine_terms.append(_cosine_terms(left, right, children, params))
        left_hessian, right_hessian = _sum_first(left[n_outputs:]), _sum_first(right[n_outputs:])
        allowed = ((left_hessian >= params.min_child_weight)
                   & (right_hessian >= params.min_child_weight))
        if params.rows_per_hessian is not None:
            allowed = (allowed & _enough_rows(left_hessian, params)
                       & _enough_rows(right_hessian, params))
        if monotone is not None:
            lower, upper = (b.T[:, None, :, None] for b in bounds)  # [K, 1, n, 1]
            w_left = jnp.clip(leaf_weight(left[:n_outputs], left[n_outputs:], params),
                              lower, upper)
            w_right = jnp.clip(leaf_weight(right[:n_outputs], right[n_outputs:], params),
                               lower, upper)
            direction = monotone[None, :, None, None]
            ordered = jnp.all((direction == 0) | (direction * (w_right - w_left) >= 0), axis=0)
            allowed = allowed & ordered
        gains.append(jnp.where(allowed, gain, 0.0))
    return tuple(gains), parent[..., 0], tuple(cosine_terms) if cosine else None


def node_gains(hist: jax.Array, params: SplitParams, bounds=None,
               monotone: jax.Array | None = None) -> jax.Array:
    """Gain of every candidate split of every node, each node on its own.

    Args:
      hist: f32[F, n, B, 2K]; the last bin holds missing values.
      bounds: (lower, upper) f32[n, K], the range each node's leaves are held to by
        monotone constraints (depthwise trees), or None.
      monotone: i32[F] of -1/0/+1, with ``bounds``: a candidate on a constrained
        feature whose children's values (clipped to the node's range) are in the wrong
        order is not allowed.

    Returns:
      f32[F, n, B - 1, 2]: the gain of "bin <= b goes left" with missing values sent
      left (index 0 of the last axis) or right (index 1); 0 where a child would hold
      less Hessian than ``min_child_weight``, or fewer rows than ``min_data_in_leaf``
      (or the order is wrong).
    """
    return jnp.stack(_node_gains_by_direction(hist, params, bounds, monotone), axis=-1)


def level_gains(hist: jax.Array, params: SplitParams, directions: int = 2) -> jax.Array:
    """Gain of every candidate split of one oblivious level: ``node_gains`` summed over
    the level's nodes, f32[F, B - 1, directions] (missing-left only with 1)."""
    return level_gains_and_parent(hist, params, directions)[0]


def level_gains_and_parent(hist: jax.Array, params: SplitParams, directions: int = 2,
                           cosine: bool = False
                           ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """(``level_gains``, the level's summed own score of its nodes f32[F], and with
    ``cosine`` each candidate's cosine score over the level's nodes f32[F, B - 1,
    directions], else None): the score of the rows a candidate divides, and the cosine
    score, as ``candidate_ranks`` takes them."""
    sums = _candidate_sums(hist, params)
    return _level_gains(sums, _lefts(sums, directions), params, cosine)


def _level_gains(sums: _Sums, lefts: tuple[jax.Array, ...], params: SplitParams,
                 cosine: bool) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """``level_gains_and_parent`` of the directions of ``lefts`` (``_direction_gains``),
    f32[F, B - 1, len(lefts)]."""
    gains, parent, terms = _direction_gains(sums, lefts, params, cosine=cosine)
    if not cosine:
        return (jnp.stack([_sum_nodes(g) for g in gains], axis=-1),
                jnp.sum(parent, axis=1), None)
    summed = [_sum_nodes_together(gain, *pair) for gain, pair in zip(gains, terms, strict=True)]
    return (jnp.stack([gain for gain, _, _ in summed], axis=-1), jnp.sum(parent, axis=1),
            jnp.stack([cosine_scores(numerator, denominator)
                       for _, numerator, denominator in summed], axis=-1))


def _sum_nodes_together(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """Each of ``arrays`` f32[F, n, B - 1] summed over its node axis (``_sum_nodes``).

    Above ``HALVING_MAX_FEATURES`` features, as one variadic reduction: it computes the
    children's scores the arrays share once per entry, where one reduction each computed
    them again (a level of 500 features and 8 nodes took 2.8 times the gain's alone, and
    about as long as it after). For fewer, each by halving, which vectorises better on
    small blocks (2,000 x 28: 0.30-0.33 s per 100 trees against 0.36-0.37)."""
    if arrays[0].shape[0] <= HALVING_MAX_FEATURES:
        return tuple(_sum_nodes(x) for x in arrays)
    zero = jnp.zeros((), arrays[0].dtype)
    return tuple(jax.lax.reduce(
        arrays, (zero,) * len(arrays),
        lambda a, b: tuple(x + y for x, y in zip(a, b, strict=True)), (1,)))


# Blocks of at most this many features sum their gains over nodes by halving the node
# axis; larger ones by one reduction. Measured on one tree (2,000 rows, 256 bins, score
# noise, interleaved runs): halving took 5.1 against 6.7 ms at 28 features and 6.9
# against 8.5 ms at 40, but 13.8 against 11.7 ms at 64 and 42 against 34 ms at 180
# (docs/benchmarks.md, "The split search's reductions").
HALVING_MAX_FEATURES = 40


def _sum_nodes(gains: jax.Array) -> jax.Array:
    """f32[F, B - 1]: gains f32[F, n, B - 1] summed over their node axis.

    For few features, by halving it (first half plus second half, until one node is
    left; an odd count keeps its last node for the next step): XLA:CPU computed the gains
    inside ``jnp.sum``'s loop, which vectorised poorly on such small blocks. Both give
    the same floats on the 28 fingerprinted models.
    """
    if gains.shape[0] > HALVING_MAX_FEATURES:
        return jnp.sum(gains, axis=1)
    return sum_by_halving(gains, 1)


def sum_by_halving(x: jax.Array, axis: int) -> jax.Array:
    """``x`` summed over ``axis``: the first half plus the second, until one entry is
    left (an odd count keeps its last entry for the next step), as elementwise
    additions. XLA:CPU runs some reductions over a short axis of a small array as a
    library call many times slower than these additions (docs/benchmarks.md)."""
    return reduce_by_halving(x, axis, jnp.add)


def reduce_by_halving(x: jax.Array, axis: int, combine) -> jax.Array:
    """``x`` reduced over ``axis`` by the elementwise ``combine`` of its first half and
    its second, until one entry is left (``sum_by_halving``): about log2 of the axis'
    length steps to compile, where a chain entry by entry is as many steps as entries
    (``repeated_candidates``' AND over a level's nodes; docs/benchmarks.md, "Smaller
    kernels to compile")."""
    while x.shape[axis] > 1:
        half = x.shape[axis] // 2
        halves = combine(jax.lax.slice_in_dim(x, 0, half, axis=axis),
                         jax.lax.slice_in_dim(x, half, 2 * half, axis=axis))
        x = (jnp.concatenate([halves, jax.lax.slice_in_dim(x, 2 * half, None, axis=axis)],
                             axis=axis) if x.shape[axis] % 2 else halves)
    return jax.lax.index_in_dim(x, 0, axis, keepdims=False)


def _mix32(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser: every input bit flips each output bit with
    probability about 1/2 (u32 in, u32 out)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


def candidate_normals(key: jax.Array, features: jax.Array, cells: jax.Array) -> jax.Array:
    """f32[b, *S]: a standard normal per feature of ``features`` i32[b] and cell id of
    ``cells`` u32[*S], a function of the key u32[2], the feature's index and the cell id
    alone.

    A counter-based hash, not ``jax.random.normal``: a level draws one number per
    candidate (500 features x 255 bins x nodes), and threefry took 0.88 ms for 500 x 255
    against 0.38 ms for this hash (docs/benchmarks.md, "Score noise"). Two rounds of
    MurmurHash3's finaliser over (key, feature, cell) give 24 uniform bits, and the
    inverse normal CDF the normal.
    """
    key = jnp.asarray(key).astype(jnp.uint32).reshape(-1)
    per_feature = _mix32(key[0] ^ (features.astype(jnp.uint32) * jnp.uint32(0x9E3779B9)))
    per_feature = per_feature.reshape((-1,) + (1,) * cells.ndim)
    bits = _mix32(per_feature ^ key[-1] ^ (cells[None].astype(jnp.uint32)
                                           * jnp.uint32(0x632BE5AB)))
    uniform = ((bits >> 8).astype(jnp.float32) + 0.5) * (1.0 / (1 << 24))  # in (0, 1)
    return jnp.sqrt(2.0) * jax.lax.erf_inv(2.0 * uniform - 1.0)


# The noise's cell of node j's bin k is j * this + k: the most value bins a feature has
# (bins are u8, the missing bin last), so that a candidate draws the same number at any
# histogram width (narrower groups of features, a smaller B).
NOISE_CELLS_PER_NODE = 255


def candidate_ranks(gains: jax.Array, parent: jax.Array, cosine: jax.Array | None,
                    features: jax.Array, params: SplitParams, hist: jax.Array) -> jax.Array:
    """The scores candidates are ranked by under score noise (``params.noise``) or the
    cosine score (``cosine``); without either they are ranked by their gains.

    Args:
      gains: f32[b, *S, C, d], the gains of the candidates ending at the first C
        of the B_g - 1 value bins (S: the nodes' axis for depthwise trees, none for an
        oblivious level; d missing directions).
      parent: f32[b, *S], the score of the rows the candidates divide.
      cosine: f32 of the shape of ``gains``, the candidates' cosine scores
        (``cosine_scores``), or None to rank by the gain.
      features: i32[b], the candidates' features among every feature.
      hist: f32[b, n, B_g, 2K], the histograms the gains are of.

    Returns:
      f32 of the shape of ``gains``: the score, sqrt(gain + parent) or the cosine score,
      with noise plus scale * e, one e per (feature, node, bin) shared by both missing
      directions (so that the tie between them, when no row is missing, still goes to
      missing-left); -inf where the gain would not split and, with noise, where the
      candidate repeats the one a bin below it (``repeated_candidates``). For squared
      error with l2 = 0 the two scores are equal (each child's H is its rows' weight).
      With ``noise.by_feature``, as CatBoost selects: -inf but at each feature's (and,
      for depthwise trees, each node's) candidate of the largest noisy score in each
      missing direction, ranked there by its score plus a fresh draw of the feature's
      (and node's), so that a feature of many candidates is not favoured by the
      largest of its many draws. The draw is shared by both directions, so the larger
      score wins between them, whether they are scored at once or in turn
      (``_searched``'s loop).
    """
    noise = params.noise
    *nodes, n_bins_here = gains.shape[1:-1]
    splits = makes_split(gains, params)
    if cosine is not None:
        score = cosine
    else:
        expand = (Ellipsis,) + (None,) * (gains.ndim - parent.ndim)
        score = jnp.sqrt(jnp.maximum(gains + parent[expand], 0.0))
    if noise is not None:
        cells = jnp.arange(n_bins_here, dtype=jnp.uint32)
        if nodes:
            cells = cells[None] + jnp.uint32(NOISE_CELLS_PER_NODE) * jnp.arange(
                nodes[0], dtype=jnp.uint32)[:, None]
        draws = candidate_normals(noise.key, features, cells)
        repeated = repeated_candidates(hist, by_node=bool(nodes))[..., :n_bins_here, :]
        splits = splits & ~repeated
        noisy = score + noise.scale * draws[..., None]
        by_candidate = jnp.where(splits, noisy, -jnp.inf)
        if noise.by_feature is None:
            return by_candidate
        return jnp.where(noise.by_feature,
                         _by_feature(score, by_candidate, splits, features, noise), by_candidate)
    return jnp.where(splits, score, -jnp.inf)


# Folded into a level's noise key for the draw each feature's best is ranked by.
_FEATURE_DRAWS = 0x7F4A7C15


def _by_feature(score: jax.Array, noisy: jax.Array, splits: jax.Array, features: jax.Array,
                noise: ScoreNoise) -> jax.Array:
    """CatBoost's selection (``candidate_ranks``): f32 of the shape of ``score`` f32[b,
    *S, C, d], -inf but at each (feature, node, missing direction)'s candidate of the
    largest ``noisy`` score (-inf where not ``splits``), where it is its ``score`` plus a
    fresh draw per feature (and node) times the noise's scale: the draw both directions
    share leaves the larger score to win between them."""
    # Per missing direction: a search that scores the two in turn (``_searched``'s
    # loop) sees one at a time, and must pick as the one that scores both at once.
    best = splits & (noisy == jnp.max(noisy, axis=-2, keepdims=True))
    nodes = score.shape[1:-2]
    cells = jnp.arange(nodes[0], dtype=jnp.uint32) if nodes else jnp.zeros((), jnp.uint32)
    key = jnp.asarray(noise.key).astype(jnp.uint32) ^ jnp.uint32(_FEATURE_DRAWS)
    fresh = candidate_normals(key, features, cells)[..., None, None]
    return jnp.where(best, score + noise.scale * fresh, -jnp.inf)


def repeated_candidates(hist: jax.Array, by_node: bool) -> jax.Array:
    """bool[b, B_g - 1, 1] (``by_node``: bool[b, n, B_g - 1, 1]): the candidates whose bin
    holds no g or h of the node (of any node of an oblivious level) in ``hist`` f32[b,
    n, B_g, 2K], bin 0 excepted.

    Such a candidate divides the rows' sums as the one a bin below it does, with the
    same gain. Without noise the lower bin wins that tie; with noise each copy would
    draw a number of its own, and a division repeated over many empty bins (a
    few-valued feature in a wide histogram, the missing-or-not split past its last
    value, the sparse bins of a small node) would win more often than one draw allows.
    So only the first of such a run is ranked.

    The test reads the histogram as it lies, a chain of elementwise ANDs over its 2K
    sums, then ANDs over its nodes by halving: the search reads it so too (its prefix
    sums' block products), and a bins-last copy made for this test alone was a pass over
    the histogram of its own, about a twentieth of the levels' time at 2,000 x 20
    (docs/benchmarks.md, "The split search's histogram read as it lies"). ``jnp.all``
    over the last axis of 2K entries ran as a scalar loop on XLA:CPU.
    """
    inner = hist[:, :, 1:-1]  # [b, n, B_g - 2, 2K]
    empty = inner[..., 0] == 0
    for k in range(1, inner.shape[-1]):
        empty = empty & (inner[..., k] == 0)
    if not by_node:
        empty = reduce_by_halving(empty, 1, jnp.logical_and)
    return jnp.concatenate([jnp.zeros_like(empty[..., :1]), empty], axis=-1)[..., None]


def first_argmax(x: jax.Array) -> jax.Array:
    """i32[...]: ``jnp.argmax(x, axis=-1)``, the first largest entry along the last axis
    (the first NaN where there is one), as a max and then a min over the indices that
    hold it. NaN: on short rows the first NaN wins, as in argmax; over long ones
    XLA:CPU's vectorised max skips NaNs (rows of 6,000 returned the largest number's
    index), and a NaN may or may not win. The searches' scores are NaN only where the
    gradients are not finite: their denominators are at least ``MIN_DENOMINATOR``.

    XLA:CPU ran argmax's one reduction over (value, index) pairs as a scalar loop, with
    the candidates' scores computed inside it; two plain reductions vectorise. At 20
    features, 8 nodes and 256 bins, the noisy scores and their argmax took 0.25 ms that
    way and 0.09 ms this way (docs/benchmarks.md, "The split search's reductions").
    """
    # Stored once: computed again inside each reduction, the two copies of an entry could
    # round differently, and the largest would then not equal itself.
    x = jax.lax.optimization_barrier(x)
    # A NaN looked for apart made depthwise trees of 2,000 x 20 a third slower, one ranked
    # as +inf half again as slow (oblivious ones 2-4% and 25%).
    top = jnp.max(x, axis=-1, keepdims=True)
    hit = (x == top) | (jnp.isnan(x) & jnp.isnan(top))
    index = jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    return jnp.min(jnp.where(hit, index, x.shape[-1]), axis=-1)


# Histograms of fewer (feature, node, bin) cells than this search both missing
# directions at once, without the loop below: their search is cheap, and the loop's
# body is compiled apart from the code around it. At 28 features x 32 nodes x 256 bins,
# 2,000 or 20,000 rows, the loop cost 0.25 s of the first fit's compilation and saved
# nothing of the warm fit (docs/benchmarks.md, "Missing directions scored in turn").
ONE_DIRECTION_MIN_CELLS = 2**18

# The search of one block: ``search(sums, lefts, missing_right) -> Best`` from the
# block's ``_candidate_sums``, the left children's sums of the directions it scores
# (``_lefts``), and None when those are both directions in order, else the traced
# bool[] of the one direction scored.
_BlockSearch = Callable[[_Sums, tuple[jax.Array, ...], jax.Array | None], Best]


def _searched(hist: jax.Array, params: SplitParams, search: _BlockSearch,
              missing_values: bool = True, n_candidates: int | None = None) -> Best:
    """The best candidate of ``hist`` f32[b, n, B, 2K] over both missing directions,
    the missing-right ones scored only when a row of ``hist`` is in a missing bin, and
    over the first ``n_candidates`` bins a split may end at (static; None: all B - 1).

    Without missing values both directions have the same gain bit for bit (the
    missing sums are 0), and ties go to missing-left, so scoring missing-left alone
    finds the same split with half the work; data without NaN (most data) do that.
    The directions are the iterations of a loop whose trip count is 1 or 2, so the
    search is compiled once (a branch for each count compiled it twice: about 0.2 s
    more of the first fit at 500 features, docs/benchmarks.md "Missing directions
    scored in turn"); the prefix sums are computed once, before it, and the two
    directions' winners are compared as one argmax over both would (``better``).
    """
    sums = _candidate_sums(hist, params)
    trimmed = n_candidates is not None and n_candidates < sums.below.shape[-1]
    if trimmed:
        # Past them a candidate divides the rows as one before it does, or not at all
        # (``search.FeatureGroup``'s ``n_candidates``).
        sums = sums._replace(below=sums.below[..., :n_candidates])
    cells = hist.shape[0] * hist.shape[1] * hist.shape[2]
    if not missing_values and (trimmed or
                               cells * (hist.shape[3] // 2) >= ONE_DIRECTION_MIN_CELLS):
        # The fit's rows hold no missing value (``missing_values`` False, static) and the
        # search is large, or of few candidates: missing-left alone, with no loop. 2,000
        # x 180, three classes, 8-10% faster and 0.5 s less compilation than both
        # directions in one pass; narrow binary searches were slower so, searches of
        # few-valued features not (docs/benchmarks.md, "Data without NaN: missing-left
        # alone in one-pass searches", "Few-valued groups scored at their values'
        # candidates only").
        return search(sums, _lefts(sums, 1), None)
    if cells < ONE_DIRECTION_MIN_CELLS:
        return search(sums, _lefts(sums, 2), None)

    def direction(i, best):
        right = i == 1
        left = jnp.where(right, sums.below, sums.below + sums.missing)
        return better(best, search(sums, (left,), right))

    shapes = jax.eval_shape(lambda: search(sums, (sums.below,), jnp.bool_(False)))
    n_directions = 1 + jnp.any(hist[:, :, -1] != 0).astype(jnp.int32)
    return jax.lax.fori_loop(0, n_directions, direction, jax.tree.map(_losing, shapes))


def _losing(shape: jax.ShapeDtypeStruct) -> jax.Array:
    """An entry of a ``Best`` that loses to any candidate (``better``): -inf, or the
    largest index."""
    if jnp.issubdtype(shape.dtype, jnp.integer):
        return jnp.full(shape.shape, jnp.iinfo(shape.dtype).max, shape.dtype)
    return jnp.full(shape.shape, -jnp.inf, shape.dtype)


def better(a: Best, b: Best) -> Best:
    """Per entry, the better of two searches' bests: the larger gain (or ranking score,
    ``rank_of``), ties (and NaN, as ``argmax`` ranks it) to the lower index."""
    a_rank, b_rank = rank_of(a), rank_of(b)
    a_nan, b_nan = jnp.isnan(a_rank), jnp.isnan(b_rank)
    lower = b.index < a.index
    b_wins = jnp.where(a_nan | b_nan, b_nan & (~a_nan | lower),
                       (b_rank > a_rank) | ((b_rank == a_rank) & lower))
    return jax.tree.map(
        lambda x, y: jnp.where(b_wins.reshape(b_wins.shape + (1,) * (x.ndim - b_wins.ndim)),
                               y, x), a, b)


def best_level_split(hist: jax.Array, params: SplitParams,
                     allowed: jax.Array | None = None,
                     score_function: ScoreFunction = "l2") -> LevelSplit:
    """The (feature, bin, missing direction) of largest summed gain.

    ``allowed`` (bool[F]) restricts the search to some features (column sampling).

    Ties go to the lowest feature, then the lowest bin, then missing-left. When no
    candidate beats ``min_split_gain`` the result is the pass-through split (feature
    0, the last value bin, missing left), which sends every row left. A gain equal to
    ``min_split_gain`` does not split.
    """
    n_features = hist.shape[0]
    best = best_level_candidate(hist, jnp.arange(n_features, dtype=jnp.int32),
                                jnp.ones(n_features, bool), params, allowed,
                                score_function=score_function)
    return split_of(best, hist.shape[2] - 1, params)


def best_level_candidate(hist: jax.Array, features: jax.Array, counted: jax.Array,
                         params: SplitParams, allowed: jax.Array | None,
                         n_value_bins: int | None = None,
                         score_function: ScoreFunction = "l2",
                         missing_values: bool = True,
                         n_candidates: int | None = None) -> Best:
    """The oblivious level's best candidate among some features.

    Args:
      hist: f32[b, n, B_g, 2K], the histograms of features ``features`` i32[b].
      counted: bool[b], False for a feature that must not win (searched elsewhere).
      allowed: bool[F] over every feature, or None.
      n_value_bins: B - 1 of the candidate index (``Best``), when the histograms are
        narrower (B_g < B: features that fill fewer bins); None for B_g.
      score_function: "l2" ranks candidates by their gain summed over the level's
        nodes, "cosine" by the cosine score of the whole level (static).
      missing_values: False when no row is in a missing bin (static): searches whose
        cells times K reach ``ONE_DIRECTION_MIN_CELLS``, and those with
        ``n_candidates``, score the missing-left candidates alone (``_searched``).
      n_candidates: the bins a split may end at, the first of the B_g - 1 (static;
        None: all of them): past them a candidate divides the rows as one before it
        does, or not at all (``search.FeatureGroup``).

    Returns:
      Best of f32[] and i32[], no extras (``score``: what the winner ranked by, its
      gain when neither noise nor the cosine ranks; -inf for a gain of 0).
    """
    if allowed is not None:
        counted = counted & allowed[features]
    n_hist_bins = n_candidates or hist.shape[2] - 1

    ranked = params.noise is not None or score_function == "cosine"

    def search(sums, lefts, missing_right):
        directions = len(lefts)
        gains, parent, cosine = _level_gains(  # [b, B_g-1, d], [b]
            sums, lefts, params, cosine=score_function == "cosine")
        gains = jnp.where(counted[:, None, None], gains, -jnp.inf)
        # A gain of exactly 0 divides nothing that counts: never ranked, so that with a
        # negative min_split_gain a level takes the best split that divides rows.
        ranks = jnp.where(gains != 0, gains, -jnp.inf)
        if ranked:
            ranks = jnp.where(counted[:, None, None],
                              candidate_ranks(gains, parent, cosine, features, params, hist),
                              -jnp.inf)
        local = first_argmax(ranks.reshape(-1))
        return Best(gains.reshape(-1)[local],
                    _global_index(local, features, n_hist_bins, directions,
                                  n_value_bins or n_hist_bins, missing_right), (),
                    ranks.reshape(-1)[local])

    return _searched(hist, params, search, missing_values, n_candidates)


def best_node_candidates(hist: jax.Array, features: jax.Array, counted: jax.Array,
                         params: SplitParams, allowed: jax.Array, bounds=None,
                         monotone: jax.Array | None = None,
                         n_value_bins: int | None = None,
                         score_function: ScoreFunction = "l2",
                         n_candidates: int | None = None,
                         missing_values: bool = True) -> Best:
    """Each node's best candidate among some features, for depthwise trees.

    Args:
      hist: f32[b, n, B_g, 2K], the histograms of features ``features`` i32[b].
      counted: bool[b], False for a feature that must not win (searched elsewhere).
      allowed: bool[n, F] over every feature, the features each node may split on.
      bounds, monotone: as in ``node_gains`` (monotone i32[F] over every feature).
      n_value_bins, n_candidates, missing_values: as in ``best_level_candidate``.
      score_function: as in ``best_level_candidate``, each node on its own.

    Returns:
      Best of f32[n] and i32[n]; with ``bounds``, the extras are the g and h sums
      f32[n, 2K] of each node's left and right child under its candidate.
    """
    usable = allowed[:, features].T & counted[:, None]  # [b, n]
    block_monotone = None if monotone is None else monotone[features]
    n_nodes, n_hist_bins = hist.shape[1], n_candidates or hist.shape[2] - 1

    ranked = params.noise is not None or score_function == "cosine"

    def search(sums, lefts, missing_right):
        directions = len(lefts)
        by_direction, parent, terms = _direction_gains(
            sums, lefts, params, bounds, block_monotone, cosine=score_function == "cosine")
        gains = jnp.stack(by_direction, axis=-1)
        gains = jnp.where(usable[:, :, None, None], gains, -jnp.inf)  # [b, n, B-1, d]
        by_node = jnp.moveaxis(gains, 1, 0).reshape(n_nodes, -1)
        ranks, score = by_node, None
        if ranked:
            cosine = None if terms is None else jnp.stack(
                [cosine_scores(*pair) for pair in terms], axis=-1)  # each node's own
            ranks = jnp.where(usable[:, :, None, None],
                              candidate_ranks(gains, parent, cosine, features, params, hist),
                              -jnp.inf)
            ranks = jnp.moveaxis(ranks, 1, 0).reshape(n_nodes, -1)
        # Each node's first largest by a max and a min (as the level search): argmax's
        # reduction over (value, index) pairs was most of a depthwise tree at 2,000 x 20
        # (docs/benchmarks.md, "Depthwise and leaf-wise searches: each node's largest").
        local = first_argmax(ranks)
        gain = jnp.take_along_axis(by_node, local[:, None], axis=-1)[:, 0]
        if ranked:
            score = jnp.take_along_axis(ranks, local[:, None], axis=-1)[:, 0]
        extra = ()
        if bounds is not None:
            local_feature, rest = jnp.divmod(local, n_hist_bins * directions)
            split_bin, right = jnp.divmod(rest, directions)
            if missing_right is not None:
                right = right + missing_right.astype(right.dtype)
            extra = chosen_children(hist, LevelSplit(local_feature, split_bin, right == 0,
                                                     gain))
        return Best(gain, _global_index(local, features, n_hist_bins, directions,
                                        n_value_bins or n_hist_bins, missing_right),
                    extra, score)

    # Without cut candidates, a node search keeps its loop over the directions, which
    # runs once without missing rows: missing-left alone in one pass made 2,000 x 180
    # depthwise trees 1.6x slower (docs/benchmarks.md, "Few-valued groups scored at
    # their values' candidates only").
    return _searched(hist, params, search, missing_values or n_candidates is None,
                     n_candidates)


def _global_index(local: jax.Array, features: jax.Array, n_hist_bins: int, directions: int,
                  n_value_bins: int, missing_right: jax.Array | None = None) -> jax.Array:
    """i32: a candidate index among a block's features (``n_hist_bins`` value bins,
    ``directions`` missing directions) as one among every feature with ``n_value_bins``
    value bins and both directions; with one direction, missing-left, or the direction
    of ``missing_right`` (bool[]) where given."""
    local_feature, rest = jnp.divmod(local, n_hist_bins * directions)
    split_bin, right = jnp.divmod(rest, directions)
    if missing_right is not None:
        right = right + missing_right.astype(right.dtype)
    return ((features[local_feature] * n_value_bins + split_bin) * 2
            + right).astype(jnp.int32)


def makes_split(gain: jax.Array, params: SplitParams) -> jax.Array:
    """bool, of the shape of ``gain``: whether a candidate of this gain may split, its
    gain above ``min_split_gain`` and not exactly 0. A gain of 0 is that of a candidate
    that divides no node (every row on one side) or only into children that add nothing
    (``min_child_weight``, ``min_data_in_leaf``), which is never made, so that a negative
    ``min_split_gain`` splits levels that divide rows, as CatBoost's candidates all do."""
    return (gain > params.min_split_gain) & (gain != 0)


def split_of(best: Best, n_value_bins: int, params: SplitParams) -> LevelSplit:
    """The split of a search's best candidate, or the pass-through split (feature 0,
    the last value bin, missing left) where it does not beat ``min_split_gain``."""
    feature, rest = jnp.divmod(best.index, n_value_bins * 2)
    split_bin, missing_right = jnp.divmod(rest, 2)
    do_split = makes_split(best.gain, params)
    return LevelSplit(
        feature=jnp.where(do_split, feature, 0).astype(jnp.int32),
        split_bin=jnp.where(do_split, split_bin, n_value_bins - 1).astype(jnp.int32),
        default_left=jnp.where(do_split, missing_right == 0, True),
        gain=jnp.where(do_split, jnp.maximum(best.gain, MADE_SPLIT_MIN_GAIN), 0.0),
    )


def best_node_splits(hist: jax.Array, params: SplitParams, allowed: jax.Array,
                     bounds=None, monotone: jax.Array | None = None,
                     score_function: ScoreFunction = "l2") -> LevelSplit:
    """Each node's own best (feature, bin, missing direction), for depthwise trees.

    Args:
      hist: f32[F, n, B, 2K].
      allowed: bool[n, F], the features each node may split on.
      bounds, monotone: as in ``node_gains``.

    Returns:
      A LevelSplit of arrays of shape [n]. Ties and the pass-through split of a node
      that does not split are as in ``best_level_split``.
    """
    n_features = hist.shape[0]
    best = best_node_candidates(hist, jnp.arange(n_features, dtype=jnp.int32),
                                jnp.ones(n_features, bool), params, allowed, bounds, monotone,
                                score_function=score_function)
    return split_of(best, hist.shape[2] - 1, params)


def chosen_children(hist: jax.Array, split: LevelSplit) -> tuple[jax.Array, jax.Array]:
    """(left, right) f32[n, 2K]: the g and h sums of each node's children under its
    chosen split (``best_node_splits``), read from the histogram f32[F, n, B, 2K]."""
    n_nodes = hist.shape[1]
    node_hist = hist[split.feature, jnp.arange(n_nodes)]  # [n, B, 2K]
    below = prefix_sums(node_hist[:, :-1], axis=1)  # [n, B-1, 2K]
    left = jnp.take_along_axis(below, split.split_bin[:, None, None], axis=1)[:, 0]
    left = left + jnp.where(split.default_left[:, None], node_hist[:, -1], 0.0)
    total = below[:, -1] + node_hist[:, -1]
    return left, total - left
