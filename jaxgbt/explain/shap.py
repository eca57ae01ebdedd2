"""Exact path-dependent TreeSHAP values and interaction values, from a model's arrays.

The values are those of XGBoost's ``pred_contribs`` / ``pred_interactions`` and of
``shap.TreeExplainer(feature_perturbation="tree_path_dependent")``: the Shapley values of
the game ``v(S) = E[f(x) | x_S]``, where the expectation over the columns outside S is
taken along the trees, each split on a column outside S averaging its two subtrees
weighted by their covers (the training Hessian that reached them, ``Booster.cover``).

Why it decomposes over leaves. In one tree, ``v(S) = sum_l v_l prod_d g_ld(S)``, the
product running over the D splits on leaf l's path, with ``g_ld = one_ld`` (1 when x
takes the path's branch, else 0) if the split's column is in S, and ``zero_ld`` (the
branch's share of its parent's cover) if not. Each leaf's term is a product game whose
players are the columns on its path (a column tested twice is one player: its zeros
multiply, and so do its ones); Shapley values are linear in the game, and columns off
the path are null players. For a product game of P players,

  phi_i  = v_l (one_i - zero_i) sum_k  k! (P-1-k)! / P!          * c_k,
  phi_ij = v_l (one_i - zero_i)(one_j - zero_j)
                                sum_k  k! (P-2-k)! / (2 (P-1)!)  * c'_k   (i != j),

c_k the coefficient of t**k in ``prod_{m != i} (zero_m + t one_m)`` and c' that of
``prod_{m != i, j}``: the sum over coalitions S of a size k of the products over S of
ones and over the rest of zeros. ``phi_ij`` is half the Shapley interaction index, so
that ``phi_ij = phi_ji`` share the pair's effect, and ``phi_ii = phi_i - sum_j phi_ij``
(shap's convention): a row of the interaction matrix sums to the SHAP value. Every
leaf's game here has P = D players, one per path slot; a slot whose column already
appeared higher on the path is merged into that player and left as a null player
(zero = one = 1), which changes no Shapley value, so that every shape is fixed.

The coefficients come from the product over all P factors (P steps), divided by one
factor (one_i = 1: a synthetic division by ``zero_i + t``, whose every step multiplies
by a number in [0, 1]; one_i = 0: ``(one_i - zero_i) / zero_i = -1``, no division), so a
leaf costs O(P**2) for the values and O(P**3) for the interactions.

Tables of answer patterns make the games a cost per model, not per row. In an oblivious
tree a row's ones depend on the row only through the leaf it reaches (the leaf id's bits
are its answers at the D levels), so ``pattern_table`` computes, once per model, the
values for the L answer patterns, and a row's values are a gather of its leaves' rows of
the table (``values_from_table``). In any tree, a leaf's game depends on the row only
through its D answers along that leaf's path: ``leaf_pattern_table`` holds each leaf's
terms for the 2**D patterns, and ``row_values`` gathers, per row and tree, each leaf's
entry by the pattern the row makes on its path (L D lookups instead of L games). When
that table would be too large (deep trees), ``row_values`` plays each row's leaf games,
O(L D**2) per row and tree (O(L D**3) for interactions). Rows go in blocks throughout, so
memory does not grow with N beyond the output.

Nodes with no cover (below a split that sent every row one way) give 0/0 shares, taken
as 0; the same rule makes ``expected_value`` the cover-weighted mean of the leaf values.
"""

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.layout import Layout

# Elements of the largest intermediate array a block of rows (or answer patterns) may
# make: the interaction kernel holds [rows, L, D, D, D] coefficients.
_BLOCK_ELEMENTS = 1 << 22
# Up to this many columns, slot values are summed into columns by a one-hot product
# (R x S x F multiply-adds, vectorized); above it by a segment sum (R x S adds).
_DENSE_SEGMENTS = 64
# Largest per-leaf pattern table (elements, T x 2**D x L x D (x D) x K) for trees that
# are not oblivious; beyond it each row plays its leaves' games.
_TABLE_ELEMENTS = 1 << 25
# Interventional values of such trees play P x P games per leaf (8**D per tree); at most
# this many slot terms in all (200 trees of depth 6 with interactions: 1.1e10).
_INTERVENTIONAL_WORK = 1 << 34


class TreePaths(NamedTuple):
    """Each leaf's path from the root, as the players of its game.

    Attributes:
      column: i32[T, L, D], the column of X (the player) tested at each path slot.
      zero: f32[T, L, D], the slot's player's share of cover (the product over the
        player's slots on the path); 1 for a slot merged into an earlier one.
      same: bool[T, L, D, D], whether slot e tests the player of slot d (d its first
        slot); the row's ones of a player are the product over those slots.
      first: bool[T, L, D], whether the slot is its player's first on the path.
      value: f32[T, L, K], the leaf values.
    """

    column: jax.Array
    zero: jax.Array
    same: jax.Array
    first: jax.Array
    value: jax.Array


def path_slots(layout: Layout, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """(entry i32[L, D], side i32[L, D]): for slot d of leaf l's path, the split entry it
    reads and the branch the path takes there (1 right); static."""
    leaf = np.arange(2**depth)[:, None]
    level = np.arange(depth)[None, :]
    side = (leaf >> (depth - 1 - level)) & 1
    node = leaf >> (depth - level)  # the path's node at each level, numbered in the level
    starts = np.asarray([layout.level_splits(d).start for d in range(depth)])
    widths = np.asarray([layout.level_splits(d).stop - layout.level_splits(d).start
                         for d in range(depth)])
    entry = starts[None, :] + (node * widths[None, :]) // 2**level
    return entry.astype(np.int32), side.astype(np.int32)


def cover_shares(cover: jax.Array, depth: int) -> jax.Array:
    """f32[T, L, D]: for slot d of leaf l, the cover of the path's child at level d + 1
    over that of its node at level d (0 where the node has none).

    Args:
      cover: f32[T, L], the leaves' covers; a node's cover is the sum of its leaves'.
    """
    n_trees, n_leaves = cover.shape
    leaf = np.arange(n_leaves)
    shares = []
    for level in range(depth):
        parent = cover.reshape(n_trees, 2**level, n_leaves >> level).sum(-1)[
            :, leaf >> (depth - level)]
        child = cover.reshape(n_trees, 2 ** (level + 1), n_leaves >> (level + 1)).sum(-1)[
            :, leaf >> (depth - level - 1)]
        shares.append(jnp.where(parent > 0, child / jnp.where(parent > 0, parent, 1.0), 0.0))
    return jnp.stack(shares, axis=-1)


def tree_paths(feature: jax.Array, cover: jax.Array, leaf_value: jax.Array,
               raw_column: jax.Array, layout: Layout, depth: int) -> TreePaths:
    """The leaves' games of T trees.

    Args:
      feature: i32[T, M], the split column of each split entry.
      cover: f32[T, L], the leaves' covers.
      leaf_value: f32[T, L, K].
      raw_column: i32[F_split], the column of X each split column is made from (the
        encoded columns of a categorical column are one player).
      layout: the trees' layout; depth: D (static).
    """
    entry, _ = path_slots(layout, depth)
    column = jnp.asarray(raw_column, jnp.int32)[feature][:, entry]  # [T, L, D]
    shares = cover_shares(cover.astype(jnp.float32), depth)
    same = column[..., :, None] == column[..., None, :]  # [T, L, D, D]
    earlier = np.tril(np.ones((depth, depth), bool), k=-1)  # e < d
    first = ~jnp.any(same & earlier[None, None], axis=-1)
    same = same & first[..., None]
    zero = jnp.where(first, jnp.prod(jnp.where(same, shares[..., None, :], 1.0), axis=-1), 1.0)
    return TreePaths(column, zero, same, first, leaf_value.astype(jnp.float32))


def merged_ones(paths_same: jax.Array, paths_first: jax.Array, goes: jax.Array) -> jax.Array:
    """f32[..., L, D]: each slot's player's one (1 when x takes the path's branch at every
    slot of the player), 1 for merged slots.

    Args:
      paths_same, paths_first: a tree's ``TreePaths.same`` [L, D, D] and ``first`` [L, D].
      goes: bool[R, L, D], whether each of R rows takes the path's branch at each slot.
    """
    player = jnp.all(jnp.where(paths_same[None], goes[..., None, :], True), axis=-1)
    return jnp.where(paths_first[None], player, True).astype(jnp.float32)


def expected_value(paths: TreePaths, base_score: jax.Array) -> jax.Array:
    """f32[K]: E[f(x)] under the trees' covers, the margin of the empty coalition: the base
    score plus each tree's cover-weighted mean leaf value."""
    reach = jnp.prod(paths.zero, axis=-1)  # [T, L]: the leaf's share of its tree's cover
    return base_score.astype(jnp.float32) + jnp.einsum("tl,tlk->k", reach, paths.value,
                                                        precision=jax.lax.Precision.HIGHEST)


def _product_coefficients(zero: jax.Array, one: jax.Array) -> list[jax.Array]:
    """The P + 1 coefficients of prod_m (zero_m + t one_m), each [...], from f32[..., P]."""
    n_players = zero.shape[-1]
    coefficients = [jnp.ones_like(zero[..., 0])] + [jnp.zeros_like(zero[..., 0])] * n_players
    for m in range(n_players):
        z, o = zero[..., m], one[..., m]
        coefficients = [z * coefficients[0]] + [
            z * coefficients[k] + o * coefficients[k - 1] for k in range(1, n_players + 1)]
    return coefficients


def _without_player(coefficients: list[jax.Array], zero: jax.Array, one: jax.Array
                    ) -> list[jax.Array]:
    """(one_i - zero_i) * poly / (zero_i + t one_i), for every player i at once.

    Args:
      coefficients: n + 1 arrays [..., 1 or P] (or broadcasting), a polynomial holding
        the factor of each player i.
      zero, one: f32[..., P].
    Returns n arrays [..., P]: one polynomial per player i.
    """
    degree = len(coefficients) - 1
    # one_i = 1: synthetic division by (zero_i + t), from the top coefficient down.
    divided = [None] * degree
    divided[degree - 1] = coefficients[degree] * jnp.ones_like(zero)
    for k in range(degree - 1, 0, -1):
        divided[k - 1] = coefficients[k] - zero * divided[k]
    # one_i = 0: the factor is zero_i, and (0 - zero_i) / zero_i = -1.
    return [jnp.where(one > 0, (1.0 - zero) * divided[k], -coefficients[k])
            for k in range(degree)]


def shapley_weights(zero: jax.Array, one: jax.Array) -> jax.Array:
    """f32[..., P]: each player's Shapley value in the product game with value 1.

    Args:
      zero, one: f32[..., P], the players' factors off and on the coalition (one in {0, 1}).
    """
    return _shapley(_reduced(zero, one))


def _reduced(zero: jax.Array, one: jax.Array) -> list[jax.Array]:
    """P arrays [..., P]: coefficient k, for each player i, of (one_i - zero_i) times
    the product over the other players of (zero_m + t one_m)."""
    full = [c[..., None] for c in _product_coefficients(zero, one)]
    return _without_player(full, zero, one)


def _shapley(reduced: list[jax.Array]) -> jax.Array:
    """[..., P]: the Shapley weights k! (P-1-k)! / P! applied to the coefficients."""
    n_players = len(reduced)
    weights = [math.factorial(k) * math.factorial(n_players - 1 - k) / math.factorial(n_players)
               for k in range(n_players)]
    return sum(w * c for w, c in zip(weights, reduced, strict=True))


def interaction_weights(zero: jax.Array, one: jax.Array) -> jax.Array:
    """f32[..., P, P]: the players' SHAP interaction values in the product game with value
    1, off the diagonal half the Shapley interaction index, on it the player's Shapley
    value minus its row's other entries (so rows sum to the Shapley values)."""
    n_players = zero.shape[-1]
    reduced = _reduced(zero, one)  # P arrays [..., P(i)]
    values = _shapley(reduced)  # [..., P]
    if n_players == 1:
        return values[..., None]
    pairs = _without_player([c[..., None] for c in reduced], zero[..., None, :],
                            one[..., None, :])  # P - 1 arrays [..., P(i), P(j)]
    pair_weights = [math.factorial(k) * math.factorial(n_players - 2 - k)
                    / (2 * math.factorial(n_players - 1)) for k in range(n_players - 1)]
    off = sum(w * c for w, c in zip(pair_weights, pairs, strict=True))
    diagonal = np.eye(n_players, dtype=bool).reshape((1,) * (off.ndim - 2) + off.shape[-2:])
    off = jnp.where(diagonal, 0.0, off)
    return jnp.where(diagonal, (values - jnp.sum(off, axis=-1))[..., None], off)


def _blocks(n_items: int, per_item: int) -> int:
    """Items per block so that a block's largest array holds about _BLOCK_ELEMENTS."""
    return max(1, min(n_items, _BLOCK_ELEMENTS // max(per_item, 1)))


def _slot_values(paths_tree: TreePaths, one: jax.Array, interactions: bool) -> jax.Array:
    """f32[R, L, D, K] (or [R, L, D, D, K]): one tree's leaf terms per path slot (or slot
    pair), for R rows whose merged ones are ``one`` f32[R, L, D]."""
    zero = jnp.broadcast_to(paths_tree.zero, one.shape)
    if interactions:
        return jnp.einsum("rlde,lk->rldek", interaction_weights(zero, one), paths_tree.value,
                          precision=jax.lax.Precision.HIGHEST)
    return jnp.einsum("rld,lk->rldk", shapley_weights(zero, one), paths_tree.value,
                      precision=jax.lax.Precision.HIGHEST)


def _leaf_bits(depth: int) -> np.ndarray:
    """i32[L, D]: bit d of each number below 2**D, the first bit (d = 0) the highest."""
    return (np.arange(2**depth)[:, None] >> (depth - 1 - np.arange(depth))[None, :]) & 1


def _tables(paths: TreePaths, goes: np.ndarray, depth: int, interactions: bool,
            sum_leaves: bool) -> jax.Array:
    """f32[T, R, (L,) D(, D), K]: every tree's leaf terms for R answer patterns.

    Args:
      goes: bool[R, L, D], whether pattern r takes leaf l's branch at slot d.
      sum_leaves: sum the terms over the leaves (oblivious trees) or keep them.
    """
    n_patterns, n_leaves = goes.shape[:2]
    per_pattern = n_leaves * depth ** (3 if interactions else 2) * 2
    block = _blocks(n_patterns, per_pattern)
    n_blocks = -(-n_patterns // block)
    pattern_blocks = jnp.asarray(np.minimum(np.arange(n_blocks * block), n_patterns - 1)
                                 .reshape(n_blocks, block))
    goes = jnp.asarray(goes)

    def one_tree(paths_tree: TreePaths) -> jax.Array:
        def one_block(patterns):
            one = merged_ones(paths_tree.same, paths_tree.first, goes[patterns])
            terms = _slot_values(paths_tree, one, interactions)
            return jnp.sum(terms, axis=1) if sum_leaves else terms

        table = jax.lax.map(one_block, pattern_blocks)
        return table.reshape((n_blocks * block,) + table.shape[2:])[:n_patterns]

    return jax.lax.map(one_tree, paths)


def pattern_table(paths: TreePaths, depth: int, interactions: bool = False) -> jax.Array:
    """Oblivious trees: f32[T, L, D, K] (interactions: f32[T, L, D, D, K]), the values per
    level slot (and slot pair) of a row reaching leaf r, for each of the L leaves r.

    In an oblivious tree leaf r's id holds the row's answer at every level, so a row
    takes leaf l's branch at level d when bit d of r and of l agree. The slots' columns
    are then the same for every leaf (``paths.column[:, 0]``).
    """
    bits = _leaf_bits(depth)
    return _tables(paths, bits[:, None, :] == bits[None, :, :], depth, interactions,
                   sum_leaves=True)


def interventional_table(paths: TreePaths, depth: int, background_share: jax.Array,
                         interactions: bool = False) -> jax.Array:
    """Oblivious trees, interventional SHAP against a background set: f32[T, L, D, K] (or
    [T, L, D, D, K]) as ``pattern_table``, for the game ``v(S) = mean_b f(x_S, b_rest)``.

    With one background row b, a leaf's game is the product game whose zero factors are
    b's own answers along the path (1 where b takes the path's branch): b reaches leaf r'
    of the tree, so a row at leaf r and a background row at leaf r' make a game that
    depends on (r, r') alone. The background enters only through the share of its rows
    at each leaf, and the table averages the L x L games with those shares.

    Args:
      paths: the trees' games (their ``zero`` is not read).
      background_share: f32[T, L], the fraction of the background rows reaching each
        leaf of each tree.
    """
    bits = _leaf_bits(depth)
    goes = jnp.asarray(bits[:, None, :] == bits[None, :, :])  # [R, L, D]
    # share [L'] over the background's leaves b; the leaves' terms summed.
    return _averaged_over_background(paths, background_share, goes, depth, interactions,
                                     "rbld,b,lk->rdk", "rblde,b,lk->rdek")


def interventional_leaf_table(paths: TreePaths, depth: int, pattern_share: jax.Array,
                              interactions: bool = False) -> jax.Array:
    """Any trees, interventional SHAP: f32[T, P, L, D, K] (or [T, P, L, D, D, K]) as
    ``leaf_pattern_table``, each leaf's terms averaged over the background rows.

    A leaf's game against one background row depends on the row's answers along the
    leaf's path (pattern p) and the background row's (pattern q, its zero factors), so
    the table averages the P x P games of each leaf with the share of background rows
    making each pattern q there.

    Args:
      paths: the trees' games (their ``zero`` is not read).
      pattern_share: f32[T, L, P], per tree and leaf, the fraction of background rows
        whose answers along the leaf's path make pattern q (bit d: the path's branch
        taken at slot d).
    """
    n_leaves = 2**depth
    bits = jnp.asarray(_leaf_bits(depth) == 1)  # [P, D]
    goes = jnp.broadcast_to(bits[:, None, :], (n_leaves, n_leaves, depth))  # [P, L, D]
    # share [L, Q] per leaf over the background's patterns q; the leaves kept apart.
    return _averaged_over_background(paths, pattern_share, goes, depth, interactions,
                                     "rqld,lq,lk->rldk", "rqlde,lq,lk->rldek")


def _averaged_over_background(paths: TreePaths, shares: jax.Array, goes: jax.Array,
                              depth: int, interactions: bool, values_spec: str,
                              interactions_spec: str) -> jax.Array:
    """The interventional tables: for each tree and each answer pattern r of the rows
    explained, the leaf games against every background pattern (their zero factors from
    ``goes``, bool[P, L, D]), weighted by ``shares`` (per tree) and contracted by the
    einsum ``values_spec`` (or ``interactions_spec``) over (weights, share, leaf values).
    Patterns go in blocks so that the largest array stays near _BLOCK_ELEMENTS."""
    n_leaves = 2**depth
    per_pattern = n_leaves * n_leaves * depth ** (3 if interactions else 2) * 2
    block = _blocks(n_leaves, per_pattern)
    n_blocks = -(-n_leaves // block)
    pattern_blocks = jnp.asarray(np.minimum(np.arange(n_blocks * block), n_leaves - 1)
                                 .reshape(n_blocks, block))

    def one_tree(tree) -> jax.Array:
        paths_tree, share = tree
        background_ones = merged_ones(paths_tree.same, paths_tree.first, goes)  # [Q, L, D]

        def one_block(patterns):
            one = merged_ones(paths_tree.same, paths_tree.first, goes[patterns])  # [R, L, D]
            shape = (one.shape[0], n_leaves) + one.shape[1:]  # [R, Q, L, D]
            one = jnp.broadcast_to(one[:, None], shape)
            zero = jnp.broadcast_to(background_ones[None], shape)
            if interactions:
                return jnp.einsum(interactions_spec, interaction_weights(zero, one), share,
                                  paths_tree.value, precision=jax.lax.Precision.HIGHEST)
            return jnp.einsum(values_spec, shapley_weights(zero, one), share, paths_tree.value,
                              precision=jax.lax.Precision.HIGHEST)

        table = jax.lax.map(one_block, pattern_blocks)
        return table.reshape((n_blocks * block,) + table.shape[2:])[:n_leaves]

    return jax.lax.map(one_tree, (paths, shares))


def path_patterns(feature: jax.Array, threshold: jax.Array, default_left: jax.Array,
                  X: jax.Array, layout: Layout, depth: int) -> jax.Array:
    """i32[N, T, L]: the pattern of each row's answers along each leaf's path (bit d, the
    first slot highest: the row takes the path's branch at slot d), from rows X
    f32[N, F_split] and the split arrays [T, M]."""
    entry, side = path_slots(layout, depth)
    values = X[:, feature]  # [N, T, M]
    right = jnp.where(jnp.isnan(values), ~default_left[None], values > threshold[None])
    goes = right[:, :, entry] == (side == 1)[None, None]  # [N, T, L, D]
    place = jnp.asarray(2 ** np.arange(depth - 1, -1, -1), jnp.int32)
    return jnp.sum(goes.astype(jnp.int32) * place[None, None, None], axis=-1)


def leaf_pattern_table(paths: TreePaths, depth: int, interactions: bool = False
                       ) -> jax.Array:
    """Any trees: f32[T, P, L, D, K] (interactions: [T, P, L, D, D, K]), each leaf's terms
    for each of the P = 2**D patterns of answers along its path (bit d of p: the row
    takes the path's branch at slot d). A row's terms are then a gather by the pattern
    it makes on each path, instead of a game per row and leaf."""
    n_leaves = 2**depth
    bits = _leaf_bits(depth) == 1  # [P, D]
    goes = np.broadcast_to(bits[:, None, :], (n_leaves, n_leaves, depth))
    return _tables(paths, goes, depth, interactions, sum_leaves=False)


def _into_columns(values: jax.Array, segments: jax.Array, n_segments: int) -> jax.Array:
    """f32[R, n_segments, K]: values f32[R, S, K] summed by their segments i32[S] (the
    column, or the column pair, each slot or slot pair tests)."""
    if n_segments <= _DENSE_SEGMENTS:  # a one-hot product: dense work, fast for few
        one_hot = jax.nn.one_hot(segments, n_segments, dtype=values.dtype)  # [S, F]
        return jnp.einsum("rsk,sf->rfk", values, one_hot, precision=jax.lax.Precision.HIGHEST)
    # Many segments (column pairs): summed with rows and outputs along the vector axis.
    out = jax.ops.segment_sum(jnp.moveaxis(values, 1, 0), segments, num_segments=n_segments)
    return jnp.moveaxis(out, 0, 1)


def _segments(columns: jax.Array, n_columns: int, interactions: bool) -> jax.Array:
    """i32[S] (or [S * S]): the column of each slot i32[S], or the column pair of each slot
    pair (flattened as ``F * first + second``)."""
    if not interactions:
        return columns.reshape(-1)
    return (columns[..., :, None] * n_columns + columns[..., None, :]).reshape(-1)


def _by_row_blocks(fn, arrays: tuple[jax.Array, ...], block: int) -> jax.Array:
    """``fn`` over blocks of ``block`` rows of ``arrays`` (rows on axis 0), the last
    block padded with copies of the last row; the results' rows concatenated."""
    n_rows = arrays[0].shape[0]
    n_blocks = -(-n_rows // block)
    index = jnp.minimum(jnp.arange(n_blocks * block), n_rows - 1).reshape(n_blocks, block)
    out = jax.lax.map(lambda rows: fn(*(a[rows] for a in arrays)), index)
    return out.reshape((n_blocks * block,) + out.shape[2:])[:n_rows]


def _shaped(flat: jax.Array, n_columns: int, interactions: bool) -> jax.Array:
    """[R, F, K] or [R, F, F, K] from [R, F or F * F, K]."""
    if not interactions:
        return flat
    return flat.reshape(flat.shape[0], n_columns, n_columns, flat.shape[-1])


def values_from_table(table: jax.Array, level_columns: jax.Array, leaves: jax.Array,
                      n_columns: int, interactions: bool = False) -> jax.Array:
    """f32[N, F, K] (or [N, F, F, K]): oblivious trees' values of rows from their leaves.

    Args:
      table: from ``pattern_table``, f32[T, L, D, K] (or [T, L, D, D, K]).
      level_columns: i32[T, D], the column each level tests (``paths.column[:, 0]``).
      leaves: i32[N, T], the leaf each row reaches in each tree.
      n_columns: F.
    """
    n_trees = level_columns.shape[0]
    n_outputs = table.shape[-1]
    segments = _segments(level_columns, n_columns, interactions)
    n_segments = n_columns ** (2 if interactions else 1)
    width = (segments.shape[0] + n_segments) * n_outputs
    block = _blocks(leaves.shape[0], width)

    def block_values(leaf_block):
        rows = table[jnp.arange(n_trees)[None, :], leaf_block]  # [R, T, D(, D), K]
        flat = rows.reshape(rows.shape[0], -1, n_outputs)
        return _shaped(_into_columns(flat, segments, n_segments), n_columns, interactions)

    return _by_row_blocks(block_values, (leaves,), block)


def _by_nodes(slots: jax.Array, column: jax.Array, depth: int, n_columns: int,
              interactions: bool) -> tuple[jax.Array, jax.Array]:
    """Leaf terms summed over the leaves that share the slot's node (or, for a slot pair,
    the deeper of the two nodes), before they are summed into columns: 2**D - 1 node
    slots instead of L * D (the leaves below a node test the same column there).

    Args:
      slots: f32[R, L, D, K] (or [R, L, D, D, K]), one tree's leaf terms per path slot.
      column: i32[L, D], the column each slot tests.
    Returns:
      (f32[R, S, K], i32[S]): the sums and their columns (or column pairs, as
      ``_segments`` numbers them).
    """
    n_rows, n_leaves, n_outputs = slots.shape[0], slots.shape[1], slots.shape[-1]
    sums, segments = [], []
    pairs = ([(d, e) for d in range(depth) for e in range(depth)] if interactions
             else [(d, d) for d in range(depth)])
    for d, e in pairs:
        nodes = 2 ** max(d, e)  # the groups of leaves below one node of the deeper slot
        terms = slots[:, :, d, e] if interactions else slots[:, :, d]
        sums.append(terms.reshape(n_rows, nodes, n_leaves // nodes, n_outputs).sum(2))
        first_leaf = column[::n_leaves // nodes]
        segments.append(first_leaf[:, d] * n_columns + first_leaf[:, e] if interactions
                        else first_leaf[:, d])
    return jnp.concatenate(sums, axis=1), jnp.concatenate(segments)


def row_values(paths: TreePaths, feature: jax.Array, threshold: jax.Array,
               default_left: jax.Array, X: jax.Array, layout: Layout, depth: int,
               n_columns: int, interactions: bool = False,
               table: jax.Array | None = None) -> jax.Array:
    """f32[N, F, K] (or [N, F, F, K]): the values of rows X f32[N, F_split], from their
    answer at every split on each leaf's path (any layout; depthwise trees need it).

    Args:
      paths: the trees' games (``tree_paths``).
      feature, threshold, default_left: the split arrays [T, M]; a row goes right when
        ``x > threshold``, a missing value where ``default_left`` says.
      layout, depth: the trees' layout and D (static).
      n_columns: F, the columns of the values.
      table: ``leaf_pattern_table(paths, depth, interactions)`` to gather each leaf's
        terms from, or None to play each row's leaf games.
    """
    entry, side = path_slots(layout, depth)
    n_leaves, n_outputs = 2**depth, paths.value.shape[-1]
    n_segments = n_columns ** (2 if interactions else 1)
    per_row = (n_leaves * depth ** (2 if interactions else 1) * (2 if table is not None
                                                                else 2 * depth)
               + n_segments * n_outputs)
    block = _blocks(X.shape[0], per_row)
    place = jnp.asarray(2 ** np.arange(depth - 1, -1, -1), jnp.int32)  # slot 0: high bit

    def block_values(x):
        def one_tree(total, tree):
            paths_tree, tree_feature, tree_threshold, tree_default_left, tree_table = tree
            values = x[:, tree_feature]  # [R, M]
            right = jnp.where(jnp.isnan(values), ~tree_default_left[None],
                              values > tree_threshold[None])
            goes = right[:, entry] == (side == 1)[None]  # [R, L, D]
            if tree_table is None:
                one = merged_ones(paths_tree.same, paths_tree.first, goes)
                slots = _slot_values(paths_tree, one, interactions)
            else:
                pattern = jnp.sum(goes.astype(jnp.int32) * place[None, None], axis=-1)
                slots = tree_table[pattern, jnp.arange(n_leaves)[None, :]]  # [R, L, D.., K]
            flat, segments = _by_nodes(slots, paths_tree.column, depth, n_columns,
                                       interactions)
            return total + _into_columns(flat, segments, n_segments), None

        start = jnp.zeros((x.shape[0], n_segments, n_outputs), jnp.float32)
        total, _ = jax.lax.scan(one_tree, start,
                                (paths, feature, threshold, default_left, table))
        return _shaped(total, n_columns, interactions)

    return _by_row_blocks(block_values, (X,), block)


def interventional_fits(n_trees: int, depth: int, interactions: bool) -> bool:
    """Whether interventional values of trees that are not oblivious (``P x P`` games per
    leaf, 8**D per tree) take a reasonable time: at most _INTERVENTIONAL_WORK slot terms."""
    return n_trees * 8**depth * depth ** (3 if interactions else 2) <= _INTERVENTIONAL_WORK


def _leaf_table_fits(n_trees: int, depth: int, n_outputs: int, n_rows: int,
                     interactions: bool) -> bool:
    """Whether ``leaf_pattern_table`` pays (more rows than answer patterns) and fits in
    _TABLE_ELEMENTS."""
    size = n_trees * 4**depth * depth ** (2 if interactions else 1) * n_outputs
    return n_rows > 2**depth and size <= _TABLE_ELEMENTS


def tree_shap(paths: TreePaths, X: jax.Array, leaves: jax.Array | None, split_arrays: tuple,
              layout: Layout, depth: int, n_columns: int, interactions: bool = False,
              background_share: jax.Array | None = None) -> jax.Array:
    """f32[N, F, K] SHAP values (or f32[N, F, F, K] interaction values) of rows X.

    Args:
      paths: the trees' games (``tree_paths``).
      X: f32[N, F_split], the rows as the trees read them.
      leaves: i32[N, T], the rows' leaves, for oblivious trees (the table's gather), or
        None to answer every split of each path (``row_values``; any layout).
      split_arrays: (feature, threshold, default_left), each [T, M].
      layout, depth: the trees' layout and D (static).
      n_columns: F, the columns the values are for.
      background_share: for interventional SHAP, a background set's share of rows:
        f32[T, L] at each leaf of oblivious trees (with ``leaves``), or f32[T, L, P]
        making each answer pattern along each leaf's path (``leaves`` None); None for
        the path-dependent values.
    """
    if background_share is not None and leaves is not None:
        table = interventional_table(paths, depth, background_share, interactions)
        return values_from_table(table, paths.column[:, 0], leaves, n_columns, interactions)
    if background_share is not None:
        table = interventional_leaf_table(paths, depth, background_share, interactions)
        return row_values(paths, *split_arrays, X, layout, depth, n_columns, interactions,
                          table)
    if leaves is not None:
        table = pattern_table(paths, depth, interactions)
        return values_from_table(table, paths.column[:, 0], leaves, n_columns, interactions)
    n_trees, n_outputs = paths.value.shape[0], paths.value.shape[-1]
    table = (leaf_pattern_table(paths, depth, interactions)
             if _leaf_table_fits(n_trees, depth, n_outputs, X.shape[0], interactions) else None)
    return row_values(paths, *split_arrays, X, layout, depth, n_columns, interactions, table)
