"""The boosting loop: rounds of (g, h) -> tree -> margin update, on device.

``train`` is the only place rounds are looped. Rounds run in compiled chunks of
``BoostConfig.rounds_per_chunk`` (``chunk.train_chunk``); the host only queues chunks, it
never waits for one, so there is no host round-trip per tree or per level. ``train``
starts from a base score, a warm start's margins or a checkpoint's ``Progress``, and joins
the chunks' trees into one ``Progress``.
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxgbt.core import statistic_orders
from jaxgbt.core.config import BoostConfig
from jaxgbt.core.layout import n_splits
from jaxgbt.core.ordered import OrderedMargins
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.core.tracing import is_traced, traced_like
from jaxgbt.core.tree import BinnedTree
from jaxgbt.engine.compile import chunk_runner
from jaxgbt.engine.padding import pad_rows, padded_data, padded_row_count, real_rows
from jaxgbt.engine.sharding import process_rows, shard_rows


class Progress(NamedTuple):
    """Training so far: what a checkpoint holds and what ``train`` returns.

    Attributes:
      trees: the trees of the rounds done, stacked on a leading axis.
      raw: f32[N, K], the training margins after those rounds (with several orders of
        target statistics each order's, f32[N, P, K]: ``core.statistic_orders``).
      bad_rows: i32[rounds done], rows whose g or h was NaN/inf in each round.
      raw_ordered: f32[N, K], the ordered margins of ordered boosting (see
        ``jaxgbt.core.ordered``), else None.
    """

    trees: BinnedTree
    raw: jax.Array
    bad_rows: jax.Array
    raw_ordered: jax.Array | None = None

    @property
    def rounds_done(self) -> int:
        return self.bad_rows.shape[0]

    @property
    def first_round(self) -> int:
        """0: a Progress holds the tree of every round done (``ChunkDone`` does not)."""
        return 0


class ChunkDone(NamedTuple):
    """What ``on_chunk`` gets under a trace: the last chunk's trees alone (stacked on a
    leading axis), from round ``first_round``."""

    trees: BinnedTree
    first_round: int

    @property
    def rounds_done(self) -> int:
        return self.first_round + self.trees.feature.shape[0]


def train(config: BoostConfig, params: BoostParams, data: TrainData, base_score: jax.Array,
          n_trees: int, mesh: Mesh | None = None, resume: Progress | None = None,
          start_raw: jax.Array | None = None, round_offset: int = 0,
          on_chunk: Callable[[Progress | ChunkDone], int | None] | None = None) -> Progress:
    """Boosts until ``n_trees`` rounds are done.

    Args:
      base_score: f32[K], the starting margin of every row.
      n_trees: T (not static: a new value reuses the compiled chunk).
      mesh: a one-axis mesh named ``config.axis_name`` to split rows over, or None.
      resume: progress to continue from (a checkpoint); None starts at round 0.
      start_raw: f32[N, K] starting margins instead of ``base_score`` (warm start from
        an earlier model's predictions).
      round_offset: rounds already done by an earlier model (warm start): round r here
        draws the samples and learning rate of round r + round_offset.
      on_chunk: called on the host with the progress after every chunk of rounds (for
        validation and checkpoints); it returns None to go on, or the number of rounds
        to keep to stop training there (the rounds done: stop after this chunk; fewer:
        the progress is cut back to that round, its margins recomputed exactly). It
        forces a wait for the device only if it reads the arrays. Inside a trace it
        gets the chunk's own trees (``ChunkDone``), and it returns None or a traced
        i32[]: the round from which this model's rounds are skipped (they add empty
        trees, so the progress keeps ``n_trees`` rounds).

    Returns:
      The progress after ``n_trees`` rounds (or where ``on_chunk`` stopped): trees,
      training margins f32[N, K] and per-round counts of rows with non-finite gradients.
    """
    n_rows = data.weight.shape[0]
    done = _start(config, base_score, start_raw, n_rows) if resume is None else resume
    raw = _carried_margins(config, done)
    # Rows padded to a bucket of row counts where that leaves the model the same
    # (``engine.padding``): nearby row counts then run one compiled chunk.
    n_padded = padded_row_count(config, data, raw, mesh)
    data, raw = padded_data(data, n_padded), pad_rows(raw, n_padded)
    unsharded = data
    if mesh is not None:
        data, raw = shard_rows(data, raw, mesh, config)
    # Under vmap the chunk returns batched margins, and early stopping decides a batched
    # last round: passed in batched from the first chunk on, they run one compiled
    # program, not one per form.
    raw = traced_like(raw, (params, data))
    run_chunk = chunk_runner(config, params, data, raw, mesh)
    n_trees_array = traced_like(jnp.asarray(n_trees + round_offset, jnp.int32),
                                (params, data))
    parts = [(done.trees, done.bad_rows)]
    for first_round in range(done.rounds_done, n_trees, config.rounds_per_chunk):
        chunk_start = (first_round, raw)
        raw, (trees, bad_rows) = run_chunk(params, data, raw,
                                           jnp.asarray(first_round + round_offset, jnp.int32),
                                           n_trees_array)
        kept = min(config.rounds_per_chunk, n_trees - first_round)
        if kept < config.rounds_per_chunk:
            trees, bad_rows = _first_rounds((trees, bad_rows), kept)
        parts.append((trees, bad_rows))
        if on_chunk is not None and is_traced(bad_rows):
            # Under a trace only the evaluator runs between chunks (no callbacks or
            # checkpoints), and it reads the new trees alone: the chunks are joined once,
            # at the end. Joined after every chunk, each growing length compiled its own
            # eager concatenates and slices (docs/benchmarks.md, "Compile").
            kept = on_chunk(ChunkDone(trees, first_round))
            if kept is not None:
                n_trees_array = jnp.minimum(n_trees_array, kept + round_offset)
            continue
        if on_chunk is not None:
            done = _joined(parts, raw, n_rows)
            parts = [(done.trees, done.bad_rows)]
            kept = on_chunk(done)
            if kept is None:
                continue
            if is_traced(kept):
                # Decided inside the trace (early stopping under jax.vmap or jax.jit, one
                # value per model): the rounds from ``kept`` on are skipped in the program
                # and leave empty trees; the host cannot read it, so the loop goes on.
                n_trees_array = jnp.minimum(n_trees_array, kept + round_offset)
                continue
            if kept < done.rounds_done:
                # The margins of round ``kept`` are recomputed from the start of this
                # chunk, or from round 0 when the stop falls among the rounds a resumed
                # checkpoint held (only there can it fall before this chunk).
                if kept < first_round:
                    start = pad_rows(_carried_margins(config, _start(
                        config, base_score, start_raw, n_rows)), n_padded)
                    if mesh is not None:
                        _, start = shard_rows(unsharded, start, mesh, config)
                    chunk_start = (0, start)
                raw = _margins_at(kept, chunk_start, run_chunk, params, data, round_offset,
                                  config.rounds_per_chunk)
                parts = [_first_rounds(parts[0], kept)]
            break
    return _joined(parts, raw, n_rows)


def _margins_at(kept: int, origin: tuple, run_chunk, params: BoostParams, data: TrainData,
                round_offset: int, rounds_per_chunk: int):
    """The carried margins after ``kept`` rounds, rerun from ``origin`` (rounds done,
    carried margins), at or before it, with rounds from ``kept`` on skipped: the same
    margins a fit of ``kept`` trees ends with (one more chunk, only when a callback
    stops inside one)."""
    first, raw = origin
    stop = jnp.asarray(kept + round_offset, jnp.int32)
    for first_round in range(first, kept, rounds_per_chunk):
        raw, _ = run_chunk(params, data, raw, jnp.asarray(first_round + round_offset, jnp.int32),
                           stop)
    return raw


def _first_rounds(chunk, kept: int):
    """The first ``kept`` rounds of a chunk's (trees, bad_rows): on the host when
    concrete, else in one compiled program (under ``vmap``, where each eager slice of
    each array would compile a program of its own)."""
    if any(is_traced(a) for a in jax.tree.leaves(chunk)):
        return _compiled_first_rounds(chunk, kept)
    return jax.tree.map(lambda a: np.asarray(a)[:kept], chunk)


@functools.partial(jax.jit, static_argnums=1)
def _compiled_first_rounds(chunk, kept: int):
    return jax.tree.map(lambda a: a[:kept], chunk)


def _start(config: BoostConfig, base_score: jax.Array, start_raw: jax.Array | None,
           n_rows: int) -> Progress:
    """No rounds done: every row at ``base_score`` f32[K], or at ``start_raw`` f32[N, K]."""
    # Host arrays where values are concrete: eagerly, each device op would compile.
    start = base_score if is_traced(base_score) else np.asarray(base_score)
    if start_raw is not None:
        raw = start_raw
    elif is_traced(start):
        raw = jnp.broadcast_to(start, (n_rows, config.n_outputs))
    else:
        raw = jax.device_put(np.broadcast_to(start, (n_rows, config.n_outputs)))
    if config.statistic_orders > 1:
        raw = statistic_orders.starting_margins(config, raw)
    return Progress(trees=_no_trees(config), raw=raw, bad_rows=np.zeros((0,), np.int32),
                    raw_ordered=raw if config.ordered else None)


def _no_trees(config: BoostConfig) -> BinnedTree:
    """Zero trees, as host arrays of the shapes a stack of trees has."""
    n_entries = n_splits(config.depth, config.grow_policy)
    return BinnedTree(feature=np.zeros((0, n_entries), np.int32),
                      split_bin=np.zeros((0, n_entries), np.int32),
                      default_left=np.zeros((0, n_entries), bool),
                      gain=np.zeros((0, n_entries), np.float32),
                      leaf_value=np.zeros((0, 2**config.depth, config.n_outputs), np.float32),
                      cover=np.zeros((0, 2**config.depth), np.float32))


def _carried_margins(config: BoostConfig, done: Progress):
    """What the rounds carry: the margins f32[N, K], or with ``config.ordered`` the
    model's and the ordered margins."""
    if not config.ordered:
        return done.raw
    if done.raw_ordered is None:
        raise ValueError("ordered boosting cannot resume from progress without ordered "
                         "margins (a checkpoint of a plain fit); delete the checkpoint.")
    return OrderedMargins(model=done.raw, ordered=done.raw_ordered)


def _joined(parts: list, margins, n_rows: int) -> Progress:
    """One Progress from chunks of (trees, bad_rows) and the carried margins (padding
    rows dropped: a bucket's, or a sharded fit's). Concrete arrays are joined on the
    host: a device concatenate would compile anew for every growing length."""
    parts = [part for part in parts if part[1].shape[0]] or parts[:1]
    if any(is_traced(leaf) for leaf in jax.tree.leaves(parts)):
        trees, bad_rows = parts[0] if len(parts) == 1 else _compiled_join(parts)
    else:
        trees, bad_rows = jax.tree.map(lambda *chunks: _host_concatenate(chunks), *parts)
    if isinstance(margins, OrderedMargins):  # on one device: a bucket's padding only
        margins = real_rows(margins, n_rows)
        return Progress(trees=trees, raw=margins.model, bad_rows=bad_rows,
                        raw_ordered=margins.ordered)
    return Progress(trees=trees, raw=process_rows(margins, n_rows), bad_rows=bad_rows)


@jax.jit
def _compiled_join(parts: list):
    """The chunks' (trees, bad_rows) joined round after round, under a trace (vmap): one
    program, where eager concatenates of batched arrays compiled a transpose and a
    concatenate for each of the six tree arrays (docs/benchmarks.md, "Compile")."""
    return jax.tree.map(lambda *chunks: jnp.concatenate(chunks), *parts)


def _host_concatenate(chunks):
    # device_put: jnp.asarray of a host array may compile a copy.
    return jax.device_put(np.concatenate([np.asarray(c) for c in chunks]))
