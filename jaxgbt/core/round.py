"""One boosting round: derivatives -> sampled (g, h) -> tree -> leaf values -> new margins.

``boost_round`` is the only round. Plain and ordered boosting (``jaxgbt.core.ordered``)
run the same steps and differ only in the margins they carry, which a ``RoundStrategy``
strategy reads and moves: at which margins the tree's gradients are taken, at which the
model's leaf values are set, and how the carried margins update after the tree. With
several orders of target statistics (``jaxgbt.core.statistic_orders``) the same round runs
on one order's columns and margins, and every order's margins then move by its tree.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxgbt.core import statistic_orders
from jaxgbt.core.config import BoostConfig, round_learning_rate
from jaxgbt.core.histogram import SparseEntries
from jaxgbt.core.layout import layout
from jaxgbt.core.leaves import (
    fill_empty_leaves,
    newton_from,
    newton_full,
    quantile_leaves,
    shrink_leaves,
)
from jaxgbt.core.ordered import OrderedMargins, prefix_leaf_values
from jaxgbt.core.sampling import (
    SamplingParams,
    drawn_rows,
    round_keys,
    sampled_weight,
    tree_feature_masks,
)
from jaxgbt.core.split import ScoreNoise, SplitParams, leaf_weight
from jaxgbt.core.tree import BinnedTree
from jaxgbt.objectives.derivatives import (
    GROUP_BATCH_FLOATS,
    Derivatives,
    group_derivatives,
    loss_values,
    row_derivatives,
)


class BoostParams(NamedTuple):
    """Hyperparameters as traced f32[] scalars (sweepable with ``vmap``)."""

    learning_rate: jax.Array
    split: SplitParams
    hessian_floor: jax.Array
    sampling: SamplingParams
    monotone: jax.Array | None = None  # i32[F] of -1/0/+1, or None
    interaction_sets: jax.Array | None = None  # bool[S, F], or None
    # f32[]: CatBoost's random_strength, read when ``BoostConfig.score_noise`` is set.
    random_strength: jax.Array | None = None
    # f32[]: hierarchical shrinkage of the leaves (``leaves.shrink_leaves``), or None (0).
    leaf_shrinkage: jax.Array | None = None


class TrainData(NamedTuple):
    """What every round reads.

    Attributes:
      bins: u8[F, N], feature-major binned features (u8[F + (P - 1) C, N] with several
        orders of target statistics, ``core.statistic_orders``).
      y: labels with rows on axis 0 (an array or a pytree of arrays).
      weight: f32[N] sample weights (0 for padding rows).
      group_index: i32[Q, M], the rows of each group for a group loss, else None.
      group_mask: bool[Q, M], which entries of group_index are rows, else None.
      order: i32[N], the random order of the rows for ordered boosting
        (``ordered.row_order``), else None.
      entries: the ``histogram.SparseEntries`` of ``BoostConfig.sparse_group``'s
        features (``data.binning.sparse_entries``), else None.
    """

    bins: jax.Array
    y: Any
    weight: jax.Array
    group_index: jax.Array | None = None
    group_mask: jax.Array | None = None
    order: jax.Array | None = None
    entries: SparseEntries | None = None


# What a round carries: the margins f32[N, K], ordered boosting's pair of them, or with
# several orders of target statistics each order's margins f32[N, P, K].
Margins = jax.Array | OrderedMargins


def round_derivatives(config: BoostConfig, params: BoostParams, data: TrainData,
                      raw: jax.Array) -> Derivatives:
    """g and curvature of every row at margins ``raw`` f32[N, K], by the configured path."""
    if config.grouped:
        return group_derivatives(config.loss, config.curvature, config.fisher)(
            data.y, raw, data.group_index, data.group_mask, params.hessian_floor)
    return row_derivatives(config.loss, config.vector_output, config.curvature,
                           config.fisher)(data.y, raw, params.hessian_floor)


def round_losses(config: BoostConfig, data: TrainData, raw: jax.Array) -> jax.Array:
    """The loss at margins ``raw`` f32[N, K]: f32[N], one value per row, or f32[Q], one
    per group for a group loss (unweighted). ``fit`` checks it once, at the start."""
    if not config.grouped:
        return loss_values(config.loss, config.vector_output)(data.y, raw)
    f = raw[:, 0]
    y_groups = jax.tree.map(lambda a: a[data.group_index], data.y)
    n_groups, width = data.group_index.shape
    # Batched like group_derivatives: a pairwise loss holds M x M temporaries per group.
    batch = max(1, min(n_groups, GROUP_BATCH_FLOATS // (width * width)))
    return jax.lax.map(lambda group: config.loss(*group),
                       (y_groups, f[data.group_index], data.group_mask), batch_size=batch)


class RoundStrategy(NamedTuple):
    """What plain and ordered boosting do differently in a round: pure functions of the
    ``Margins`` they carry.

    Attributes:
      model_margins: ``margins -> f32[N, K]``, the model's own margins on the training
        rows (what ``predict_raw`` gives on them); its leaf values are set from the
        derivatives there.
      structure_margins: ``margins -> f32[N, K]``, other margins whose derivatives grow
        the tree and draw its rows; None to grow at the model's margins.
      advance: ``(config, params, data, margins, step, gh, leaf, learning_rate) ->
        margins`` after the round; ``step`` f32[N, K] is each row's leaf value of the
        tree (learning rate applied), ``gh`` f32[N, 2K] the weighted (g, h) it was grown
        from, ``leaf`` i32[N] each row's leaf, ``learning_rate`` f32[].
    """

    model_margins: Callable[[Margins], jax.Array]
    structure_margins: Callable[[Margins], jax.Array] | None
    advance: Callable[..., Margins]


def _same_margins(raw: jax.Array) -> jax.Array:
    return raw


def _add_step(config, params, data, raw, step, gh, leaf, learning_rate) -> jax.Array:
    return raw + step


def _model_of(margins: OrderedMargins) -> jax.Array:
    return margins.model


def _ordered_of(margins: OrderedMargins) -> jax.Array:
    return margins.ordered


def _advance_ordered(config, params, data, margins, step, gh, leaf, learning_rate
                     ) -> OrderedMargins:
    """The model's margins move by the tree; each row's ordered margin by the Newton value
    of its leaf from the rows before it in sigma (``ordered.prefix_leaf_values``)."""
    ordered_step = learning_rate * prefix_leaf_values(gh, leaf, data.order, 2**config.depth,
                                                      params.split)
    return OrderedMargins(model=margins.model + step, ordered=margins.ordered + ordered_step)


PLAIN = RoundStrategy(model_margins=_same_margins, structure_margins=None, advance=_add_step)
# CatBoost's ordered boosting: the tree is grown from the gradients at the ordered margins,
# its leaf values are set from those at the model's (``jaxgbt.core.ordered``).
ORDERED = RoundStrategy(model_margins=_model_of, structure_margins=_ordered_of,
                   advance=_advance_ordered)


def _bad_rows(config: BoostConfig, weight: jax.Array, taken: tuple[Derivatives, ...]
              ) -> jax.Array:
    """i32[]: the rows of positive weight f32[N] whose g or h is not finite in any of the
    round's derivatives (summed over devices)."""
    finite = jnp.isfinite(taken[0].g) & jnp.isfinite(taken[0].h)
    for derivatives in taken[1:]:
        finite = finite & jnp.isfinite(derivatives.g) & jnp.isfinite(derivatives.h)
    finite = jnp.all(finite, axis=1)
    bad_rows = jnp.sum((~finite) & (weight > 0), dtype=jnp.int32)
    if config.axis_name is not None:
        bad_rows = jax.lax.psum(bad_rows, config.axis_name)
    return bad_rows


# Folded into a round's key for its score noise, apart from its row and feature draws.
_NOISE_STREAM = 0x5C02E


def noise_scale(random_strength: jax.Array, g: jax.Array, h: jax.Array, weight: jax.Array,
                n_rows: jax.Array, model_length: jax.Array,
                axis_name: str | None = None) -> jax.Array:
    """f32[]: the standard deviation of a round's score noise (CatBoost's ``random_strength``).

    ``random_strength * sqrt(sum w g^2 / sum w h) * N / (N + exp(model_length))``: the
    spread of the round's gradients (CatBoost's, which has h = 1, divided by the mean
    curvature so that it is in the units of ``split.ScoreNoise``'s square-root score),
    times CatBoost's decay, near 1 until the rounds times their learning rates
    (``model_length``) reach log N, then falling to 0.

    Args:
      g, h: f32[N, K], the round's gradients and curvatures; weight f32[N, 1].
      n_rows: f32[], the training rows (of positive weight, over every device).
    """
    sums = jnp.stack([jnp.sum(weight * g * g), jnp.sum(weight * h)])
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    spread = jnp.sqrt(sums[0] / jnp.maximum(sums[1], 1e-30))
    decay = n_rows / (n_rows + jnp.exp(jnp.minimum(model_length, 80.0)))
    return random_strength * spread * decay


def _with_noise(config: BoostConfig, params: BoostParams, data: TrainData, at: Derivatives,
                weight: jax.Array, round_index: jax.Array, learning_rate: jax.Array,
                output: jax.Array | None = None) -> BoostParams:
    """``params`` with the round's ``ScoreNoise`` when ``config.score_noise``; the model
    length is the rounds before this one times this round's learning rate. With
    ``output`` (bool[K], the output a tree of one output is of; ``at`` holds its g and h
    alone), the curvature is that output's, and the rounds are that output's: the trees
    before over K."""
    if not config.score_noise:
        return params
    # Counted in integers: XLA:CPU splits a float sum over the rows into a windowed sum
    # and a sum of the windows, a kernel of its own to compile. The same float for
    # fewer than 2**24 rows, where both counts are exact.
    n_rows = jnp.sum(data.weight > 0, dtype=jnp.int32)
    if config.axis_name is not None:
        n_rows = jax.lax.psum(n_rows, config.axis_name)
    n_rows = n_rows.astype(jnp.float32)
    # The noise is in the units of the scores the search ranks, which sum weights in
    # place of Hessians under split_curvature="weight".
    curvature = jnp.ones_like(at.h) if config.split_curvature == "weight" else at.h
    rounds = round_index
    if output is not None:
        rounds = round_index // config.n_outputs
        curvature = jnp.where(output, curvature, 0.0)
    scale = noise_scale(params.random_strength, at.g, curvature, weight, n_rows,
                        rounds * learning_rate, config.axis_name)
    key = jax.random.fold_in(jax.random.fold_in(params.sampling.key, round_index),
                             _NOISE_STREAM)
    # None keeps CatBoost's selection out of the default's programs (``candidate_ranks``).
    by_feature = jnp.asarray(True) if config.noise_draws == "feature" else None
    return params._replace(split=params.split._replace(
        noise=ScoreNoise(key, scale, by_feature)))


def _on_output(at: Derivatives, output: jax.Array | None) -> Derivatives:
    """``at`` with every output's g and h but ``output``'s (bool[K]) set to 0: the
    round's tree is grown from that output's columns alone, and whatever sets its leaves
    from these (the Newton leaves of a search by weights or at ordered margins, further
    Newton steps) gives the others 0 / (0 + l2) = 0. A ``where``, not a product: a
    product would keep a NaN elsewhere."""
    if output is None:
        return at
    return at._replace(g=jnp.where(output, at.g, 0.0), h=jnp.where(output, at.h, 0.0))


def _searched(gh: jax.Array, weight: jax.Array, by_weight: bool) -> jax.Array:
    """The (g, curvature) f32[N, 2K] the split search sums: ``gh`` itself, or with
    ``by_weight`` (``split_curvature="weight"``) each row's weight f32[N, 1] in place of
    its Hessians, for every output."""
    if not by_weight:
        return gh
    n_outputs = gh.shape[1] // 2
    return jnp.concatenate(
        [gh[:, :n_outputs], jnp.broadcast_to(weight, (gh.shape[0], n_outputs))], axis=1)


def _grown_tree(config: BoostConfig, params: BoostParams, data: TrainData, gh: jax.Array,
                weight: jax.Array, feature_key: jax.Array
                ) -> tuple[BinnedTree, jax.Array, tuple | None]:
    """The round's tree from the weighted (g, h) f32[N, 2K], on the drawn rows alone when
    ``config.sample_capacity`` is set (rows of ``weight`` f32[N, 1] above 0).

    Returns:
      (tree, every row's leaf i32[N], leaf bounds or None), as ``tree.grow``.
    """
    level_allowed = (tree_feature_masks(feature_key, params.sampling, data.bins.shape[0],
                                        config.depth, config.grow_policy)
                     if config.column_sampling else None)
    tree_bins, tree_gh, tree_entries = data.bins, gh, data.entries
    if config.sample_capacity is not None:  # the tree is grown on the drawn rows alone
        rows, in_use = drawn_rows(weight[:, 0] > 0, config.sample_capacity)
        tree_bins = jnp.take(data.bins, rows, axis=1)
        tree_gh = jnp.where(in_use[:, None], gh[rows], 0.0)
        if data.entries is not None:  # the entries stay by row; the slots map to rows
            tree_entries = data.entries._replace(
                slot_rows=rows, row_axis=jnp.zeros((data.bins.shape[1], 0), jnp.int8))
    tree, leaf, leaf_bounds = layout(config.grow_policy).grow(
        tree_bins, tree_gh, params.split, config.depth, config.n_bins, config.axis_name,
        level_allowed, params.interaction_sets, params.monotone, config.bin_groups,
        config.sparse_group, tree_entries, config.max_leaves, config.score_function,
        config.missing_values)
    if config.sample_capacity is not None:  # every row's leaf, for the margins
        leaf = layout(config.grow_policy).leaf_from_bins(data.bins, tree, config.n_bins)
    return tree, leaf, leaf_bounds


def _newton_leaves(config: BoostConfig, params: BoostParams, at_model: Derivatives,
                   weight: jax.Array, leaf: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Each leaf's Newton step f32[L, K] from the derivatives at the model's margins,
    with the full K x K Hessian where the loss gives one (``leaves.newton_full``), else
    its diagonal (``split.leaf_weight``); and each leaf's cover f32[L], its Hessian
    summed over the outputs (the diagonal's, for a full Hessian).

    Args:
      weight: f32[N, 1], the round's row weights.
      leaf: i32[N], each row's leaf.
    """
    G, H = _leaf_sums(config, at_model, weight, leaf)
    if at_model.h_full is None:
        return leaf_weight(G, H, params.split), jnp.sum(H, axis=1)
    return (newton_full(G, H, params.split),
            jnp.sum(jnp.diagonal(H, axis1=1, axis2=2), axis=1))


def _leaf_sums(config: BoostConfig, at: Derivatives, weight: jax.Array, leaf: jax.Array
               ) -> tuple[jax.Array, jax.Array]:
    """Each leaf's weighted gradient sum f32[L, K] and Hessian sum: f32[L, K], or
    f32[L, K, K] where the loss gives the full Hessian; summed over devices.

    Args:
      weight: f32[N, 1], the round's row weights.
      leaf: i32[N], each row's leaf.
    """
    n_leaves = 2**config.depth
    n_rows, n_outputs = at.g.shape
    if at.h_full is None:
        curvature = at.h * weight
    else:
        curvature = (at.h_full * weight[:, :, None]).reshape(n_rows, -1)
    G = jax.ops.segment_sum(at.g * weight, leaf, num_segments=n_leaves)
    H = jax.ops.segment_sum(curvature, leaf, num_segments=n_leaves)
    if config.axis_name is not None:
        G, H = jax.lax.psum((G, H), config.axis_name)
    if at.h_full is not None:
        H = H.reshape(n_leaves, n_outputs, n_outputs)
    return G, H


def _further_newton_steps(config: BoostConfig, params: BoostParams, data: TrainData,
                          model_raw: jax.Array, weight: jax.Array, leaf: jax.Array,
                          value: jax.Array, output: jax.Array | None = None) -> jax.Array:
    """f32[L, K]: the leaf values ``value`` after ``config.leaf_newton_steps - 1`` more
    Newton steps (``leaves.newton_from``), each on the derivatives at the model's margins
    ``model_raw`` f32[N, K] moved by the leaf values so far (learning rate not applied:
    the steps seek the leaf's own minimum, which the learning rate then scales, as in
    CatBoost).

    Args:
      weight: f32[N, 1], the round's row weights.
      leaf: i32[N], each row's leaf.
      output: bool[K], True at the output the tree is of, or None (every output).
    """
    def step(_, value):
        at = _on_output(round_derivatives(config, params, data, model_raw + value[leaf]),
                        output)
        G, H = _leaf_sums(config, at, weight, leaf)
        return newton_from(value, G, H, params.split)

    return jax.lax.fori_loop(0, config.leaf_newton_steps - 1, step, value)


def boost_round(config: BoostConfig, params: BoostParams, data: TrainData, margins: Margins,
                round_index: jax.Array) -> tuple[Margins, tuple[BinnedTree, jax.Array]]:
    """One round: gradients at the current margins, a tree, the updated margins.

    Args:
      margins: f32[N, K], the current margins; with ``config.ordered`` the
        ``OrderedMargins`` pair (then ``data.order`` is sigma, and ``fit`` has refused
        group losses, several devices, full Hessians and quantile leaves); with
        ``config.statistic_orders`` P above 1, each order's margins f32[N, P, K] (then
        ``data.bins`` holds every order's columns, ``core.statistic_orders``).
      round_index: i32[], the round (sampling keys and learning-rate schedule).

    Returns:
      The new margins (of the same kind), and the tree (its leaf values already scaled by
      the learning rate) with the number of rows i32[] whose g or h was not finite.
    """
    if config.statistic_orders > 1:
        return _round_on_one_order(config, params, data, margins, round_index)
    return _round(config, params, data, margins, round_index)


def _round_on_one_order(config: BoostConfig, params: BoostParams, data: TrainData,
                        margins: jax.Array, round_index: jax.Array
                        ) -> tuple[jax.Array, tuple[BinnedTree, jax.Array]]:
    """The round of ``boost_round`` on order ``round_index mod P``'s columns and margins
    f32[N, K]: its tree's structure. Then, as CatBoost treats its folds, every order's
    margins f32[N, P, K] move by the tree with that order's own leaf values (the tree on
    its columns, each leaf set from the rows that reach it there, at its margins:
    ``_own_leaves``), and the model takes the leaf values of another order than the one
    the structure was chosen on, the next round's: values estimated on statistics that
    did not pick the splits, as CatBoost's come from its averaging fold."""
    order = round_index % config.statistic_orders
    one_order = data._replace(bins=statistic_orders.order_bins(config, data.bins, order))
    grown = _grown(config, params, one_order, statistic_orders.order_margins(margins, order),
                   round_index)
    leaves = statistic_orders.order_leaves(config, data.bins, grown.tree)  # i32[N, P]
    values, covers = jax.vmap(
        lambda raw, leaf: _own_leaves(config, params, data, grown, raw, leaf),
        in_axes=(1, 1))(margins, leaves)  # f32[P, L, K], f32[P, L]
    steps = jnp.take_along_axis(values, leaves.T[:, :, None], axis=1)  # f32[P, N, K]
    model = (order + 1) % config.statistic_orders
    tree = grown.tree._replace(leaf_value=values[model], cover=covers[model])
    return margins + jnp.transpose(steps, (1, 0, 2)), (tree, grown.bad_rows)


class _Grown(NamedTuple):
    """A round's tree, its leaf values set (learning rate applied), and what set them."""

    tree: BinnedTree
    leaf: jax.Array  # i32[N], each row's leaf
    leaf_bounds: tuple | None  # the grower's bounds on the leaves (monotone constraints)
    weight: jax.Array  # f32[N, 1], the round's row weights (its sample)
    gh: jax.Array  # f32[N, 2K], the weighted (g, h) the tree was grown from
    output: jax.Array | None  # bool[K], the output a tree of one output is of
    learning_rate: jax.Array  # f32[]
    bad_rows: jax.Array  # i32[], rows whose g or h was not finite


def _round(config: BoostConfig, params: BoostParams, data: TrainData, margins: Margins,
           round_index: jax.Array) -> tuple[Margins, tuple[BinnedTree, jax.Array]]:
    """``boost_round`` on F columns and margins f32[N, K] or ``OrderedMargins``."""
    grown = _grown(config, params, data, margins, round_index)
    boosting = ORDERED if config.ordered else PLAIN
    step = grown.tree.leaf_value[grown.leaf]
    margins = boosting.advance(config, params, data, margins, step, grown.gh, grown.leaf,
                               grown.learning_rate)
    return margins, (grown.tree, grown.bad_rows)


def _grown(config: BoostConfig, params: BoostParams, data: TrainData, margins: Margins,
           round_index: jax.Array) -> _Grown:
    """The round's tree on F columns at margins f32[N, K] or ``OrderedMargins``."""
    boosting = ORDERED if config.ordered else PLAIN
    grown_elsewhere = boosting.structure_margins is not None
    # At the structure's margins (if other), then at the model's: the first grow the tree,
    # the last set its leaves.
    taken = tuple(round_derivatives(config, params, data, margins_of(margins))
                  for margins_of in (boosting.structure_margins, boosting.model_margins)
                  if margins_of is not None)
    bad_rows = _bad_rows(config, data.weight, taken)
    output = None  # bool[K]: with one_output_per_tree, the output whose turn it is
    if config.one_output_per_tree:
        turn = round_index % config.n_outputs
        output = jnp.arange(config.n_outputs) == turn
    at_structure, at_model = _on_output(taken[0], output), _on_output(taken[-1], output)
    row_key, feature_key = round_keys(params.sampling, round_index)
    if config.axis_name is not None:
        # Each device draws its own rows: with one key, every shard would draw the same
        # pattern at the same local positions. The features stay one draw for all.
        row_key = jax.random.fold_in(row_key, jax.lax.axis_index(config.axis_name))
    weight = sampled_weight(row_key, config.row_sampling, params.sampling, at_structure.g,
                            data.weight)
    gh = jnp.concatenate([at_structure.g * weight, at_structure.h * weight], axis=1)
    by_weight = config.split_curvature == "weight"
    learning_rate = round_learning_rate(config, params.learning_rate, round_index)
    searched = _searched(gh, weight, by_weight)
    if output is not None:  # a tree of one output: its (g, curvature) columns alone
        searched = jnp.take(searched, jnp.stack([turn, turn + config.n_outputs]), axis=1)
    tree, leaf, leaf_bounds = _grown_tree(
        config, _with_noise(config, params, data, at_structure, weight, round_index,
                            learning_rate, output), data, searched, weight, feature_key)
    if output is not None:  # its values, and any bounds on them, at its output; 0 elsewhere
        tree = tree._replace(leaf_value=jnp.where(output, tree.leaf_value, 0.0))
        if leaf_bounds is not None:
            leaf_bounds = tuple(jnp.where(output, bound, 0.0) for bound in leaf_bounds)
    # The grower's leaf values are the diagonal Newton step at the structure's margins,
    # from the curvature it searched with; set them anew where the model's margins, the
    # loss or a search by weights ask for other ones.
    if by_weight:
        value, cover = _newton_leaves(config, params, at_model, weight, leaf)
        tree = tree._replace(leaf_value=value, cover=cover)
    elif grown_elsewhere or at_model.h_full is not None:
        tree = tree._replace(leaf_value=_newton_leaves(config, params, at_model, weight,
                                                       leaf)[0])
    grown = _Grown(tree, leaf, leaf_bounds, weight, gh, output, learning_rate, bad_rows)
    return grown._replace(tree=_finished_leaves(config, params, data,
                                                boosting.model_margins(margins), grown))


def _own_leaves(config: BoostConfig, params: BoostParams, data: TrainData, grown: _Grown,
                raw: jax.Array, leaf: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(leaf values f32[L, K], learning rate applied; covers f32[L]) of ``grown``'s tree
    set from other margins ``raw`` f32[N, K] and the leaves ``leaf`` i32[N] the rows
    reach under other columns: the Newton step of each leaf's rows (the round's sample)
    at ``raw``, then every step ``_finished_leaves`` takes."""
    at = _on_output(round_derivatives(config, params, data, raw), grown.output)
    value, cover = _newton_leaves(config, params, at, grown.weight, leaf)
    own = grown._replace(tree=grown.tree._replace(leaf_value=value, cover=cover), leaf=leaf)
    return _finished_leaves(config, params, data, raw, own).leaf_value, cover


def _finished_leaves(config: BoostConfig, params: BoostParams, data: TrainData,
                     model_raw: jax.Array, grown: _Grown) -> BinnedTree:
    """``grown.tree`` with its Newton leaf values (in ``grown``, set from the model's
    margins ``model_raw`` f32[N, K]) taken to the tree's values: quantile leaves, further
    Newton steps, empty leaves filled, shrinkage, the constraints, the learning rate."""
    tree, leaf, weight = grown.tree, grown.leaf, grown.weight
    if config.leaf_quantile is not None:
        residual = data.y - model_raw[:, 0]
        tree = tree._replace(leaf_value=quantile_leaves(
            residual, weight[:, 0], leaf, 2**config.depth, config.leaf_quantile)[:, None])
    if config.leaf_newton_steps > 1:  # spec refuses it with quantile leaves
        tree = tree._replace(leaf_value=_further_newton_steps(
            config, params, data, model_raw, weight, leaf, tree.leaf_value, grown.output))
    # The leaves no row reached take their ancestors' values, then the constraints
    # hold again, after any refresh of the leaves above.
    tree = tree._replace(leaf_value=fill_empty_leaves(tree.leaf_value, tree.cover))
    if params.leaf_shrinkage is not None:
        rows = jax.ops.segment_sum((weight[:, 0] > 0).astype(jnp.float32), leaf,
                                   num_segments=tree.cover.shape[0])
        if config.axis_name is not None:
            rows = jax.lax.psum(rows, config.axis_name)
        tree = tree._replace(leaf_value=shrink_leaves(tree.leaf_value, rows,
                                                      params.leaf_shrinkage))
    tree = layout(config.grow_policy).constrain_leaves(tree, grown.leaf_bounds,
                                                       params.monotone)
    return tree._replace(leaf_value=grown.learning_rate * tree.leaf_value)
