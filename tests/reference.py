"""Slow, obvious float64 NumPy versions of jaxgbt's binning, histogram, split gain,
oblivious- and depthwise-tree growth and prediction, written from the docstrings with
plain loops.

Shapes use the names of ``jaxgbt/_dtypes.py``: N rows, F features, B bins (the last
one holds NaN), D levels, L = 2**D leaves, T trees, K outputs, C = 2K.
"""

from typing import NamedTuple

import numpy as np

MIN_DENOMINATOR = 1e-6


# Binning -------------------------------------------------------------------------------


def cut_points(values: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    """Cut points f32[<= B - 2] of one feature's non-missing values.

    With at most B - 1 distinct values every gap between neighbours is cut; otherwise
    the cut after the first distinct value whose cumulative weight reaches
    ``total * k / (B - 1)``, for k = 1 .. B - 2 (the last gap at most). A cut is the
    float32 midpoint of its gap, or the lower value where that rounds to the upper.
    """
    values = np.asarray(values, np.float32)
    weights = np.asarray(weights, np.float64)
    n_value_bins = n_bins - 1
    distinct = sorted({float(v) for v in values})
    if len(distinct) <= 1:
        return np.empty(0, np.float32)
    if len(distinct) <= n_value_bins:
        gaps = range(len(distinct) - 1)
    else:
        position = {v: i for i, v in enumerate(distinct)}
        mass = [0.0] * len(distinct)
        for v, w in zip(values, weights, strict=True):
            mass[position[float(v)]] += float(w)
        if sum(mass) <= 0:
            mass = [0.0] * len(distinct)
            for v in values:
                mass[position[float(v)]] += 1.0
        cumulative, running = [], 0.0
        for m in mass:
            running += m
            cumulative.append(running)
        total = cumulative[-1]
        gaps = set()
        for k in range(1, n_value_bins):
            level = total * k / n_value_bins
            first = next((i for i, c in enumerate(cumulative) if c >= level), len(distinct))
            gaps.add(min(first, len(distinct) - 2))
    cuts = set()
    for i in gaps:
        lower, upper = distinct[i], distinct[i + 1]
        cut = np.float32((lower + upper) / 2)
        if cut >= np.float32(upper):
            cut = np.float32(lower)
        cuts.add(float(cut))
    return np.array(sorted(cuts), np.float32)


def thresholds(X: np.ndarray, n_bins: int, sample_weight: np.ndarray | None = None) -> np.ndarray:
    """f32[F, B - 1]: each feature's cut points, then +inf."""
    n_rows, n_features = X.shape
    weights = np.ones(n_rows) if sample_weight is None else np.asarray(sample_weight, np.float64)
    table = np.full((n_features, n_bins - 1), np.inf, np.float32)
    for f in range(n_features):
        present = ~np.isnan(X[:, f])
        cuts = cut_points(X[present, f], weights[present], n_bins)
        table[f, : len(cuts)] = cuts
    return table


def apply_bins(X: np.ndarray, table: np.ndarray) -> np.ndarray:
    """i64[F, N]: the first bin b with ``x <= table[f, b]``; NaN goes to bin B - 1."""
    n_rows, n_features = X.shape
    missing_bin = table.shape[1]
    bins = np.empty((n_features, n_rows), np.int64)
    for f in range(n_features):
        for i in range(n_rows):
            x = X[i, f]
            if np.isnan(x):
                bins[f, i] = missing_bin
            else:
                bins[f, i] = next(b for b in range(missing_bin) if x <= table[f, b])
    return bins


# Histogram and gain ----------------------------------------------------------------------


def histogram(bins: np.ndarray, node: np.ndarray, gh: np.ndarray, n_nodes: int,
              n_bins: int) -> np.ndarray:
    """f64[F, n_nodes, B, C]: sums of the rows of gh (N, C) per feature, node and bin."""
    bins = np.asarray(bins)
    gh = np.asarray(gh, np.float64)
    n_features, n_rows = bins.shape
    hist = np.zeros((n_features, n_nodes, n_bins, gh.shape[1]))
    for f in range(n_features):
        for i in range(n_rows):
            hist[f, node[i], bins[f, i]] += gh[i]
    return hist


def soft_threshold(G, l1):
    """sign(G) * max(|G| - l1, 0)."""
    return np.sign(G) * np.maximum(np.abs(G) - l1, 0.0)


def score(G: np.ndarray, H: np.ndarray, l2: float, l1: float) -> float:
    """T(G)^2 / max(H + l2, 1e-6), summed over outputs."""
    total = 0.0
    for g, h in zip(G, H, strict=True):
        total += soft_threshold(g, l1) ** 2 / max(h + l2, MIN_DENOMINATOR)
    return total


def _sum_bins(hist_node: np.ndarray, bins) -> np.ndarray:
    """Sequential sum of hist_node[b] (shape (C,)) over bins."""
    total = np.zeros(hist_node.shape[-1])
    for b in bins:
        total = total + hist_node[b]
    return total


def _children(hist_node: np.ndarray, b: int, missing_right: int) -> tuple[np.ndarray, ...]:
    """(left, right) sums f64[C] of "bin <= b goes left" in one node's histogram f[B, C],
    its last bin (missing) sent right or left."""
    missing_bin = hist_node.shape[0] - 1
    left = _sum_bins(hist_node, range(b + 1))
    right = _sum_bins(hist_node, range(b + 1, missing_bin))
    if missing_right:
        return left, right + hist_node[missing_bin]
    return left + hist_node[missing_bin], right


def _candidates(hist: np.ndarray):
    """(feature, bin, missing_right) of every candidate split of a histogram
    f[F, n, B, C], in the order of the search's index."""
    for f in range(hist.shape[0]):
        for b in range(hist.shape[2] - 1):
            for missing_right in (0, 1):
                yield f, b, missing_right


def rows_per_hessian(node: np.ndarray, gh: np.ndarray, n_nodes: int) -> np.ndarray:
    """f64[n_nodes]: rows over Hessian of each node (0 without Hessian); a row counts
    when its Hessian summed over outputs is positive."""
    gh = np.asarray(gh, np.float64)
    hessian = gh[:, gh.shape[1] // 2:].sum(axis=1)
    ratio = np.zeros(n_nodes)
    for n in range(n_nodes):
        total = hessian[node == n].sum()
        if total > 0:
            ratio[n] = np.sum(hessian[node == n] > 0) / total
    return ratio


def level_gains(hist: np.ndarray, l2: float, l1: float, min_child_weight: float,
                rows: np.ndarray | None = None, min_data_in_leaf: float = 0.0) -> np.ndarray:
    """f64[F, B - 1, 2]: gain of "bin <= b goes left", missing left (0) or right (1).

    Per node ``score(L) + score(R) - score(parent)``, or 0 when either child's
    H summed over outputs is below min_child_weight, or with ``rows`` (each node's
    ``rows_per_hessian``) when either child's H times its node's ratio, rounded, is
    below min_data_in_leaf; summed over nodes.
    """
    K = hist.shape[3] // 2
    gains = np.zeros((hist.shape[0], hist.shape[2] - 1, 2))
    for f, b, missing_right in _candidates(hist):
        total = 0.0
        for n in range(hist.shape[1]):
            parent = _sum_bins(hist[f, n], range(hist.shape[2]))
            left, right = _children(hist[f, n], b, missing_right)
            if left[K:].sum() < min_child_weight or right[K:].sum() < min_child_weight:
                continue
            if rows is not None and min(left[K:].sum(), right[K:].sum()) * rows[n] \
                    < min_data_in_leaf - 0.5:
                continue
            total += (score(left[:K], left[K:], l2, l1) + score(right[:K], right[K:], l2, l1)
                      - score(parent[:K], parent[K:], l2, l1))
        gains[f, b, missing_right] = total
    return gains


def level_cosine(hist: np.ndarray, l2: float, l1: float) -> np.ndarray:
    """f64[F, B - 1, 2]: CatBoost's cosine score of each candidate of a level, over
    every node and both children: with w = T(G) / max(H + l2, 1e-6) per child and
    output, sum(w T(G)) / sqrt(sum(w^2 H)) (0 where the denominator is 0)."""
    K = hist.shape[3] // 2
    scores = np.zeros((hist.shape[0], hist.shape[2] - 1, 2))
    for f, b, missing_right in _candidates(hist):
        numerator = denominator = 0.0
        for n in range(hist.shape[1]):
            for child in _children(hist[f, n], b, missing_right):
                for k in range(K):
                    G, H = child[k], child[K + k]
                    w = soft_threshold(G, l1) / max(H + l2, MIN_DENOMINATOR)
                    numerator += w * soft_threshold(G, l1)
                    denominator += w * w * H
        scores[f, b, missing_right] = (numerator / np.sqrt(denominator)
                                       if denominator > 0 else 0.0)
    return scores


class Split(NamedTuple):
    feature: int
    split_bin: int
    default_left: bool
    gain: float


def best_split(gains: np.ndarray, min_split_gain: float, ranks: np.ndarray | None = None
               ) -> Split:
    """Largest gain, ties to the lowest feature, then bin, then missing-left; the
    pass-through split (0, B - 2, True, 0.0) when it is <= min_split_gain.

    With ``ranks`` (the shape of ``gains``, e.g. ``level_cosine``), the largest rank
    among the candidates whose gain exceeds min_split_gain, with the same ties (a gain
    of exactly 0, which divides no node that counts, is never made); the
    split keeps its gain, or the smallest normal float32 where that is <= 0 (a negative
    min_split_gain: a split made at a loss)."""
    n_features, n_value_bins, _ = gains.shape
    threshold = min_split_gain
    best = None
    for f in range(n_features):
        for b in range(n_value_bins):
            for missing_right in (0, 1):
                gain = gains[f, b, missing_right]
                makes = gain > threshold and gain != 0  # a gain of 0 divides nothing
                if ranks is None:
                    key = gain if gain != 0 else -np.inf
                else:
                    key = ranks[f, b, missing_right] if makes else -np.inf
                if best is None or key > best[0]:
                    best = (key, gain, f, b, missing_right)
    _, gain, f, b, missing_right = best
    if not (gain > threshold and gain != 0):
        return Split(0, n_value_bins - 1, True, 0.0)
    return Split(f, b, missing_right == 0, max(float(gain), float(np.finfo(np.float32).tiny)))


def _best_of(hist: np.ndarray, l2: float, l1: float, min_split_gain: float,
             min_child_weight: float, score_function: str, rows: np.ndarray | None = None,
             min_data_in_leaf: float = 0.0) -> Split:
    """``best_split`` of a histogram's gains, ranked by ``level_cosine`` for "cosine";
    ``rows`` and ``min_data_in_leaf`` as in ``level_gains``."""
    gains = level_gains(hist, l2, l1, min_child_weight, rows, min_data_in_leaf)
    ranks = level_cosine(hist, l2, l1) if score_function == "cosine" else None
    return best_split(gains, min_split_gain, ranks)


# Trees -----------------------------------------------------------------------------------


def goes_right(bin_value: int, split_bin: int, default_left: bool, n_bins: int) -> bool:
    """Missing (bin B - 1) goes by default_left, any other bin right when > split_bin."""
    if bin_value == n_bins - 1:
        return not default_left
    return bin_value > split_bin


def route_binned(bins: np.ndarray, feature: np.ndarray, split_bin: np.ndarray,
                 default_left: np.ndarray, n_bins: int) -> np.ndarray:
    """i64[N, T]: leaf of each row in each tree (arrays of shape (T, D)), from bins."""
    n_trees, depth = feature.shape
    n_rows = bins.shape[1]
    leaves = np.zeros((n_rows, n_trees), np.int64)
    for i in range(n_rows):
        for t in range(n_trees):
            for d in range(depth):
                right = goes_right(bins[feature[t, d], i], split_bin[t, d], default_left[t, d],
                                   n_bins)
                leaves[i, t] += int(right) * 2 ** (depth - 1 - d)
    return leaves


class Tree(NamedTuple):
    feature: np.ndarray  # i64[D]
    split_bin: np.ndarray  # i64[D]
    default_left: np.ndarray  # bool[D]
    gain: np.ndarray  # f64[D]
    leaf_value: np.ndarray  # f64[L, K]
    leaf: np.ndarray  # i64[N]


def leaf_values(gh: np.ndarray, leaf: np.ndarray, n_leaves: int, l2: float,
                l1: float) -> np.ndarray:
    """f64[L, K]: -T(G) / max(H + l2, 1e-6) of the rows in each leaf."""
    gh = np.asarray(gh, np.float64)
    K = gh.shape[1] // 2
    sums = np.zeros((n_leaves, gh.shape[1]))
    for i in range(gh.shape[0]):
        sums[leaf[i]] += gh[i]
    values = np.zeros((n_leaves, K))
    for j in range(n_leaves):
        for k in range(K):
            G, H = sums[j, k], sums[j, K + k]
            values[j, k] = -soft_threshold(G, l1) / max(H + l2, MIN_DENOMINATOR)
    return values


def leaf_covers(gh: np.ndarray, leaf: np.ndarray, n_leaves: int) -> np.ndarray:
    """f64[L]: the Hessians of the rows in each leaf, summed over the K outputs."""
    gh = np.asarray(gh, np.float64)
    K = gh.shape[1] // 2
    covers = np.zeros(n_leaves)
    for i in range(gh.shape[0]):
        covers[leaf[i]] += gh[i, K:].sum()
    return covers


def fill_empty_leaves(leaf_value: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """f64[L, K]: each leaf of cover 0 given the cover-weighted mean of the leaf values
    under its deepest ancestor of positive cover (leaf l's ancestor at depth d is node
    l >> (D - d)); the others as they are."""
    n_leaves = len(cover)
    depth = n_leaves.bit_length() - 1
    filled = np.array(leaf_value, np.float64)
    for j in range(n_leaves):
        if cover[j] > 0:
            continue
        for d in range(depth - 1, -1, -1):
            under = [i for i in range(n_leaves) if i >> (depth - d) == j >> (depth - d)]
            total = sum(cover[i] for i in under)
            if total > 0:
                filled[j] = sum(cover[i] * np.asarray(leaf_value[i], np.float64)
                                for i in under) / total
                break
    return filled


def shrink_leaves(leaf_value: np.ndarray, rows: np.ndarray, strength: float) -> np.ndarray:
    """f64[L, K]: hierarchical shrinkage (Agarwal et al. 2022). Node means are the
    row-weighted means of the leaf values under them; a leaf's value is its root's mean
    plus each step along its path from a node's mean to its child's (the leaf's own value
    last) over 1 + strength / (the node's rows), steps into nodes of no rows adding
    nothing. A tree of no rows keeps its values."""
    n_leaves = len(rows)
    depth = n_leaves.bit_length() - 1
    values = np.asarray(leaf_value, np.float64)
    if rows.sum() == 0:
        return values.copy()
    out = np.zeros_like(values)
    for j in range(n_leaves):
        means, counts = [], []
        for d in range(depth + 1):
            under = [i for i in range(n_leaves) if i >> (depth - d) == j >> (depth - d)]
            count = sum(rows[i] for i in under)
            means.append(values[j] if d == depth else
                         sum(rows[i] * values[i] for i in under) / max(count, 1.0))
            counts.append(count)
        out[j] = means[0]
        for d in range(1, depth + 1):
            if counts[d] > 0:
                out[j] += (means[d] - means[d - 1]) / (1 + strength / counts[d - 1])
    return out


def filled_leaf_values(tree: "Tree", gh: np.ndarray) -> np.ndarray:
    """f64[L, K]: ``tree``'s leaf values as a boosting round leaves them, each empty leaf
    filled from its ancestors (``fill_empty_leaves``) by the covers of ``gh``'s rows."""
    n_leaves = len(tree.leaf_value)
    return fill_empty_leaves(tree.leaf_value, leaf_covers(gh, tree.leaf, n_leaves))


def _tree_of(splits: list[Split], gh: np.ndarray, leaf: np.ndarray, n_leaves: int, l2: float,
             l1: float) -> Tree:
    """A Tree of the splits (in the layout's order) and each row's leaf i64[N]."""
    return Tree(
        feature=np.array([s.feature for s in splits]),
        split_bin=np.array([s.split_bin for s in splits]),
        default_left=np.array([s.default_left for s in splits]),
        gain=np.array([s.gain for s in splits]),
        leaf_value=leaf_values(gh, leaf, n_leaves, l2, l1),
        leaf=leaf,
    )


def grow_tree(bins: np.ndarray, gh: np.ndarray, depth: int, n_bins: int, *, l2: float,
              l1: float = 0.0, min_split_gain: float = 0.0,
              min_child_weight: float = 0.0, score_function: str = "l2",
              min_data_in_leaf: float = 0.0) -> Tree:
    """One oblivious tree of depth D on binned data u8[F, N] with gh f[N, 2K].

    Level d histograms the 2**d nodes of the level, picks ``best_split`` (ranked by
    ``level_cosine`` with ``score_function="cosine"``) and sends each row right or
    left; a row's leaf is ``sum_d right_d * 2**(D - 1 - d)``. ``min_data_in_leaf`` > 0
    estimates children's rows from each node's ``rows_per_hessian``.
    """
    bins = np.asarray(bins, np.int64)
    n_rows = bins.shape[1]
    rights = np.zeros((depth, n_rows), np.int64)
    splits = []
    for d in range(depth):
        node = np.zeros(n_rows, np.int64)
        for previous in range(d):
            node += rights[previous] * 2 ** (d - 1 - previous)
        rows = rows_per_hessian(node, gh, 2**d) if min_data_in_leaf > 0 else None
        split = _best_of(histogram(bins, node, gh, 2**d, n_bins), l2, l1, min_split_gain,
                         min_child_weight, score_function, rows, min_data_in_leaf)
        for i in range(n_rows):
            rights[d, i] = goes_right(bins[split.feature, i], split.split_bin,
                                      split.default_left, n_bins)
        splits.append(split)
    leaf = np.zeros(n_rows, np.int64)
    for d in range(depth):
        leaf += rights[d] * 2 ** (depth - 1 - d)
    return _tree_of(splits, gh, leaf, 2**depth, l2, l1)


def predict(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
            default_left: np.ndarray, leaf_value: np.ndarray,
            base_score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw margins f64[N, K] and leaves i64[N, T] of a model on float features.

    ``feature``, ``threshold``, ``default_left`` have shape (T, D) and ``leaf_value``
    (T, L, K). At each level ``x <= threshold`` goes left and NaN by default_left.
    """
    n_trees, depth = feature.shape
    n_rows = X.shape[0]
    leaves = np.zeros((n_rows, n_trees), np.int64)
    raw = np.zeros((n_rows, leaf_value.shape[-1]))
    for i in range(n_rows):
        raw[i] = np.asarray(base_score, np.float64)
        for t in range(n_trees):
            for d in range(depth):
                x = X[i, feature[t, d]]
                right = (not default_left[t, d]) if np.isnan(x) else not x <= threshold[t, d]
                leaves[i, t] += int(right) * 2 ** (depth - 1 - d)
            raw[i] += leaf_value[t, leaves[i, t]]
    return raw, leaves


# Depthwise trees -------------------------------------------------------------------------


def grow_depthwise_tree(bins: np.ndarray, gh: np.ndarray, depth: int, n_bins: int, *, l2: float,
                        l1: float = 0.0, min_split_gain: float = 0.0,
                        min_child_weight: float = 0.0, score_function: str = "l2",
                        min_data_in_leaf: float = 0.0) -> Tree:
    """One depthwise tree: every node picks its own ``best_split`` from a histogram of its
    own rows. Splits are in heap order (node j of level d at 2**d - 1 + j); a row at node
    j goes to node 2j (left) or 2j + 1 (right) of the next level, its leaf is its node
    after D levels."""
    bins = np.asarray(bins, np.int64)
    n_rows = bins.shape[1]
    node = np.zeros(n_rows, np.int64)
    splits = []
    for d in range(depth):
        for j in range(2**d):
            rows = node == j
            # A one-node histogram of the node's rows: level_gains sums over one node.
            hist = histogram(bins[:, rows], np.zeros(rows.sum(), np.int64), gh[rows], 1, n_bins)
            ratio = rows_per_hessian(np.zeros(rows.sum(), np.int64), gh[rows], 1)
            splits.append(_best_of(hist, l2, l1, min_split_gain, min_child_weight,
                                   score_function, ratio if min_data_in_leaf > 0 else None,
                                   min_data_in_leaf))
        new_node = np.zeros(n_rows, np.int64)
        for i in range(n_rows):
            split = splits[2**d - 1 + node[i]]
            right = goes_right(bins[split.feature, i], split.split_bin, split.default_left,
                               n_bins)
            new_node[i] = 2 * node[i] + int(right)
        node = new_node
    return _tree_of(splits, gh, node, 2**depth, l2, l1)


def grow_lossguide_tree(bins: np.ndarray, gh: np.ndarray, depth: int, n_bins: int,
                        max_leaves: int, *, l2: float, l1: float = 0.0,
                        min_split_gain: float = 0.0, min_child_weight: float = 0.0,
                        min_data_in_leaf: float = 0.0) -> Tree:
    """One leaf-wise tree: from the root, the leaf whose ``best_split`` (from a histogram
    of its own rows) gains most splits next, the lowest heap index on ties, until the
    tree has ``max_leaves`` leaves or no leaf above level D gains anything. Stored as a
    depthwise tree (heap order from 0: node i's children 2i + 1, 2i + 2): a node that
    does not split holds the pass-through split and sends its rows left, so a row's leaf
    is the leftmost node at level D below the leaf it stops in."""
    bins = np.asarray(bins, np.int64)
    n_rows = bins.shape[1]
    node = np.zeros(n_rows, np.int64)  # heap index from 0
    n_value_bins = n_bins - 1
    splits = [Split(0, n_value_bins - 1, True, 0.0)] * (2**depth - 1)
    candidates = {}  # leaf -> its best split, for leaves above level D

    def search(leaf):
        if int(np.floor(np.log2(leaf + 1))) < depth:
            rows = node == leaf
            hist = histogram(bins[:, rows], np.zeros(rows.sum(), np.int64), gh[rows], 1, n_bins)
            ratio = rows_per_hessian(np.zeros(rows.sum(), np.int64), gh[rows], 1)
            candidates[leaf] = best_split(
                level_gains(hist, l2, l1, min_child_weight,
                            ratio if min_data_in_leaf > 0 else None, min_data_in_leaf),
                min_split_gain)

    search(0)
    for _ in range(max_leaves - 1):
        if not candidates:  # every leaf at level D
            break
        leaf = min(candidates, key=lambda i: (-candidates[i].gain, i))
        if not candidates[leaf].gain > 0:
            break
        split = splits[leaf] = candidates.pop(leaf)
        for i in np.flatnonzero(node == leaf):
            right = goes_right(bins[split.feature, i], split.split_bin, split.default_left,
                               n_bins)
            node[i] = 2 * leaf + 1 + int(right)
        search(2 * leaf + 1)
        search(2 * leaf + 2)
    level = np.floor(np.log2(node + 1)).astype(np.int64)
    leaf = (node + 1 - 2**level) * 2 ** (depth - level)
    return _tree_of(splits, gh, leaf, 2**depth, l2, l1)


def predict_depthwise(X: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
                      default_left: np.ndarray, leaf_value: np.ndarray,
                      base_score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Raw margins f64[N, K] and leaves i64[N, T] of depthwise trees (split arrays of
    shape (T, 2**D - 1) in heap order) on float features."""
    n_trees, n_nodes = feature.shape
    depth = int(np.log2(n_nodes + 1))
    n_rows = X.shape[0]
    leaves = np.zeros((n_rows, n_trees), np.int64)
    raw = np.zeros((n_rows, leaf_value.shape[-1]))
    for i in range(n_rows):
        raw[i] = np.asarray(base_score, np.float64)
        for t in range(n_trees):
            j = 0
            for d in range(depth):
                at = 2**d - 1 + j
                x = X[i, feature[t, at]]
                right = (not default_left[t, at]) if np.isnan(x) else not x <= threshold[t, at]
                j = 2 * j + int(right)
            leaves[i, t] = j
            raw[i] += leaf_value[t, j]
    return raw, leaves


# TreeSHAP by brute force -----------------------------------------------------------------


def path_dependent_game(x: np.ndarray, feature: np.ndarray, threshold: np.ndarray,
                        default_left: np.ndarray, leaf_value: np.ndarray, cover: np.ndarray,
                        base_score: np.ndarray, raw_column, n_columns: int,
                        depthwise: bool) -> np.ndarray:
    """f64[2**F, K]: E[f(x) | x_S] for every coalition S of the F columns (S's bit c set
    when column c is in it), by walking each tree: a split on a column in S follows x (a
    missing value its default side), any other averages its two subtrees weighted by
    their covers (a node's cover is the sum of its leaves'; 0 when it has none).

    Args:
      x: f64[F_split], one row as the trees read it; raw_column: for each split column
        the column of X (player) it belongs to.
      feature, threshold, default_left: [T, M], one entry per level (oblivious) or per
        node in heap order (depthwise); leaf_value f[T, L, K]; cover f[T, L].
    """
    in_coalition = ((np.arange(2**n_columns)[:, None] >> np.arange(n_columns)[None]) & 1) > 0
    n_trees, n_leaves = cover.shape
    depth = int(np.log2(n_leaves))
    total = np.broadcast_to(np.asarray(base_score, np.float64),
                            (2**n_columns, leaf_value.shape[-1]))

    def node(t, level, j):
        if level == depth:
            return np.asarray(leaf_value[t, j], np.float64)[None, :], float(cover[t, j])
        at = 2**level - 1 + j if depthwise else level
        left, left_cover = node(t, level + 1, 2 * j)
        right, right_cover = node(t, level + 1, 2 * j + 1)
        node_cover = left_cover + right_cover
        value = x[feature[t, at]]
        goes_right = (not default_left[t, at]) if np.isnan(value) else value > threshold[t, at]
        chosen = right if goes_right else left
        averaged = ((left_cover * left + right_cover * right) / node_cover if node_cover > 0
                    else np.zeros_like(left))
        in_s = in_coalition[:, raw_column[feature[t, at]]][:, None]
        return np.where(in_s, chosen, averaged), node_cover

    for t in range(n_trees):
        total = total + node(t, 0, 0)[0]
    return total


def shapley_values(game: np.ndarray, n_columns: int) -> np.ndarray:
    """f64[F, K]: the Shapley values of a game f[2**F, K] (coalitions as bit sets)."""
    from math import factorial

    coalitions = np.arange(2**n_columns)
    size = np.array([bin(s).count("1") for s in coalitions])
    phi = np.zeros((n_columns, game.shape[1]))
    for i in range(n_columns):
        without = coalitions[(coalitions >> i) & 1 == 0]
        weight = np.array([factorial(s) * factorial(n_columns - s - 1) for s in size[without]]
                          ) / factorial(n_columns)
        phi[i] = weight @ (game[without | (1 << i)] - game[without])
    return phi


def shapley_interaction_values(game: np.ndarray, n_columns: int) -> np.ndarray:
    """f64[F, F, K]: shap's interaction values of a game f[2**F, K]: off the diagonal half
    the Shapley interaction index, on it the Shapley value minus the row's other entries."""
    from math import factorial

    coalitions = np.arange(2**n_columns)
    size = np.array([bin(s).count("1") for s in coalitions])
    out = np.zeros((n_columns, n_columns, game.shape[1]))
    for i in range(n_columns):
        for j in range(n_columns):
            if i == j:
                continue
            rest = coalitions[((coalitions >> i) & 1 == 0) & ((coalitions >> j) & 1 == 0)]
            weight = np.array([factorial(s) * factorial(n_columns - s - 2) for s in size[rest]]
                              ) / (2 * factorial(n_columns - 1))
            both, only_i, only_j = rest | (1 << i) | (1 << j), rest | (1 << i), rest | (1 << j)
            out[i, j] = weight @ (game[both] - game[only_i] - game[only_j] + game[rest])
    phi = shapley_values(game, n_columns)
    for i in range(n_columns):
        out[i, i] = phi[i] - out[i].sum(axis=0)
    return out
