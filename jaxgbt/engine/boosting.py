"""The boosting loop: rounds of (g, h) -> tree -> margin update, on device.

``train`` is the only place rounds are looped. Rounds run in compiled chunks of
``BoostConfig.rounds_per_chunk`` (a ``lax.scan``); the host only queues chunks, it
never waits for one, so there is no host round-trip per tree or per level.
"""

import collections
import functools
import threading
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgbt.core.config import BoostConfig
from jaxgbt.core.dtypes import BIN_DTYPE
from jaxgbt.core.ordered import OrderedMargins
from jaxgbt.core.round import BoostParams, TrainData, boost_round, round_derivatives
from jaxgbt.core.tree import BinnedTree, n_splits
from jaxgbt.data.validation import is_traced
from jaxgbt.engine.batching import one_model_at_a_time


class Progress(NamedTuple):
    """Training so far: what a checkpoint holds and what ``train`` returns.

    Attributes:
      trees: the trees of the rounds done, stacked on a leading axis.
      raw: f32[N, K], the training margins after those rounds.
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


def _empty_tree(depth: int, n_outputs: int, grow_policy: str = "oblivious") -> BinnedTree:
    n_entries = n_splits(depth, grow_policy)
    zeros = jnp.zeros(n_entries, jnp.int32)
    return BinnedTree(feature=zeros, split_bin=zeros, default_left=jnp.ones(n_entries, bool),
                      gain=jnp.zeros(n_entries, jnp.float32),
                      leaf_value=jnp.zeros((2**depth, n_outputs), jnp.float32))


# Compiled once per configuration: ``fit`` checks the gradients at the starting margin
# with it (eagerly, a group loss's derivatives would be traced anew on every fit).
compiled_derivatives = jax.jit(round_derivatives, static_argnames="config")


def train_chunk(config: BoostConfig, params: BoostParams, data: TrainData, raw: jax.Array,
                first_round: jax.Array, n_trees: jax.Array) -> tuple[jax.Array, BinnedTree]:
    """``rounds_per_chunk`` rounds from ``first_round``; rounds >= n_trees are skipped.

    ``raw`` is f32[N, K], or with ``config.ordered`` the ``OrderedMargins`` pair.
    Returns the margins (of the same kind), and the chunk's trees and bad-row counts
    stacked on a leading axis.
    """
    empty = (_empty_tree(config.depth, config.n_outputs, config.grow_policy),
             jnp.zeros((), jnp.int32))

    # Under jax.vmap over models (fit_many, cv, forests) on CPU, the models' rounds run
    # one after another (_batching.one_model_at_a_time).
    step = one_model_at_a_time(functools.partial(
        boost_round, config))

    def one_round(raw, round_index):
        return jax.lax.cond(
            round_index < n_trees,
            lambda raw: step(params, data, raw, round_index),
            lambda raw: (raw, empty),
            raw,
        )

    rounds = first_round + jnp.arange(config.rounds_per_chunk, dtype=jnp.int32)
    return jax.lax.scan(one_round, raw, rounds)


@functools.partial(jax.jit, static_argnames=("config", "mesh"))
def _compiled_chunk(config, mesh, params, data, raw, first_round, n_trees):
    if mesh is None:
        return train_chunk(config, params, data, raw, first_round, n_trees)
    rows = P(config.axis_name)
    data_specs = TrainData(bins=P(None, config.axis_name),
                           y=jax.tree.map(lambda _: rows, data.y), weight=rows,
                           group_index=None, group_mask=None)
    sharded = jax.shard_map(functools.partial(train_chunk, config), mesh=mesh,
                            in_specs=(P(), data_specs, rows, P(), P()), out_specs=(rows, P()),
                            check_vma=False)
    return sharded(params, data, raw, first_round, n_trees)


# Chunks compiled ahead of time for fits outside any trace on one device, by
# configuration and argument types, least recently used first. ``fit`` compiles its
# chunk before it bins the data (``chunk_program`` with the bins as a shape), so the
# compiler's working memory (about 100 MB at depth 6, whatever the rows) has been
# handed back before the binned matrix exists; jit's own cache is not filled by an
# ahead-of-time compilation, hence this one. Bounded, since the configurations hold the
# user's loss and each program its code: a search over more than this many configurations
# and data shapes in one process compiles the least recently used again.
_CHUNK_PROGRAMS: collections.OrderedDict = collections.OrderedDict()
_CHUNK_PROGRAMS_LOCK = threading.Lock()
MAX_CHUNK_PROGRAMS = 64
_ROUND_SPEC = jax.ShapeDtypeStruct((), jnp.int32)


def _argument_types(tree) -> tuple:
    """The pytree structure and each leaf's (shape, dtype, weak type): what decides
    whether a compiled program accepts the arguments."""
    leaves, treedef = jax.tree.flatten(tree)
    avals = [jax.typeof(leaf) for leaf in leaves]  # as jit sees them (Python scalars weak)
    return treedef, tuple((aval.shape, aval.dtype, aval.weak_type) for aval in avals)


def _ahead_of_time(params: BoostParams, data: TrainData, raw, mesh: Mesh | None) -> bool:
    """Whether ``train`` runs these arguments through ``chunk_program``: on one device,
    nothing traced."""
    return mesh is None and not any(is_traced(leaf)
                                    for leaf in jax.tree.leaves((params, data, raw)))


def compile_ahead(config: BoostConfig, params: BoostParams, data: TrainData,
                  start_raw: jax.Array | None, x_shape: tuple[int, int],
                  mesh: Mesh | None) -> bool:
    """Compiles the chunk ``train`` will run on this data before its bins exist.

    Args:
      data: the fit's data without its bins (``bins`` is not read).
      start_raw: the starting margins f32[N, K] ``train`` will get, or None.
      x_shape: (N, F) of the matrix to be binned.

    Returns:
      Whether it compiled (or found the program compiled); False when ``train`` will
      compile through jit instead (a mesh, or traced arguments).
    """
    n_rows, n_features = x_shape
    margins = (jax.ShapeDtypeStruct((n_rows, config.n_outputs), jnp.float32)
               if start_raw is None else jax.ShapeDtypeStruct(start_raw.shape, start_raw.dtype))
    raw = OrderedMargins(model=margins, ordered=margins) if config.ordered else margins
    data = data._replace(bins=jax.ShapeDtypeStruct((n_features, n_rows), BIN_DTYPE))
    if is_traced(start_raw) or not _ahead_of_time(params, data, raw, mesh):
        return False
    chunk_program(config, params, data, raw)
    return True


def chunk_program(config: BoostConfig, params: BoostParams, data: TrainData, raw) -> Callable:
    """The compiled chunk, ``program(params, data, raw, first_round, n_trees)``, for
    arguments of these types on the default device, compiled now if not held yet.

    ``data`` and ``raw`` may hold ``jax.ShapeDtypeStruct`` in place of arrays (``fit``
    compiles before the bins exist). Not for traced arguments or a mesh: those go
    through ``_compiled_chunk`` itself.
    """
    args = (params, data, raw, _ROUND_SPEC, _ROUND_SPEC)
    key = (config, bool(jax.config.jax_enable_x64), str(jax.config.jax_default_device),
           jax.default_backend(), *_argument_types(args))
    with _CHUNK_PROGRAMS_LOCK:  # fits may run in threads
        program = _CHUNK_PROGRAMS.pop(key, None)
    if program is None:
        program = _compiled_chunk.lower(config, None, *args).compile()
    with _CHUNK_PROGRAMS_LOCK:
        _CHUNK_PROGRAMS[key] = program
        while len(_CHUNK_PROGRAMS) > MAX_CHUNK_PROGRAMS:
            _CHUNK_PROGRAMS.popitem(last=False)
    return program


def _pad_rows(data: TrainData, n_pad: int, missing_bin: int) -> TrainData:
    """Appends n_pad rows of weight 0 (missing features, the first row's label)."""
    if n_pad == 0:
        return data
    bins = jnp.pad(data.bins, ((0, 0), (0, n_pad)), constant_values=missing_bin)
    y = jax.tree.map(lambda a: jnp.concatenate([a, jnp.repeat(a[:1], n_pad, axis=0)]), data.y)
    weight = jnp.pad(data.weight, (0, n_pad))
    return data._replace(bins=bins, y=y, weight=weight)


def _shard(data: TrainData, raw: jax.Array, mesh: Mesh, config: BoostConfig):
    """Pads rows to a multiple of the device count and places them on the mesh."""
    n_rows = data.weight.shape[0]
    n_pad = -n_rows % mesh.devices.size
    data = _pad_rows(data, n_pad, config.n_bins - 1)
    raw = jnp.pad(raw, ((0, n_pad), (0, 0)))
    rows = NamedSharding(mesh, P(config.axis_name))
    feature_rows = NamedSharding(mesh, P(None, config.axis_name))
    data = data._replace(bins=jax.device_put(data.bins, feature_rows),
                         y=jax.device_put(data.y, rows), weight=jax.device_put(data.weight, rows))
    return data, jax.device_put(raw, rows)


def train(config: BoostConfig, params: BoostParams, data: TrainData, base_score: jax.Array,
          n_trees: int, mesh: Mesh | None = None, resume: Progress | None = None,
          start_raw: jax.Array | None = None, round_offset: int = 0,
          on_chunk: Callable[[Progress], None] | None = None) -> Progress:
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
        validation and checkpoints); it returns True to stop training there. It forces
        a wait for the device only if it reads the arrays.

    Returns:
      The progress after ``n_trees`` rounds: trees, training margins f32[N, K] and
      per-round counts of rows with non-finite gradients.
    """
    n_rows = data.weight.shape[0]
    if resume is None:
        # Host arrays where values are concrete: eagerly, each device op would compile.
        start = base_score if is_traced(base_score) else np.asarray(base_score)
        if start_raw is not None:
            raw = start_raw
        elif is_traced(start):
            raw = jnp.broadcast_to(start, (n_rows, config.n_outputs))
        else:
            raw = jax.device_put(np.broadcast_to(start, (n_rows, config.n_outputs)))
        no_trees = _no_trees(config)
        done = Progress(trees=no_trees, raw=raw, bad_rows=np.zeros((0,), np.int32),
                        raw_ordered=raw if config.ordered else None)
    else:
        done = resume
    raw = _carried_margins(config, done)
    if mesh is not None:
        data, raw = _shard(data, raw, mesh, config)
    if _ahead_of_time(params, data, raw, mesh):
        run_chunk = chunk_program(config, params, data, raw)
    else:
        run_chunk = functools.partial(_compiled_chunk, config, mesh)
    n_trees_array = jnp.asarray(n_trees + round_offset, jnp.int32)
    parts = [(done.trees, done.bad_rows)]
    for first_round in range(done.rounds_done, n_trees, config.rounds_per_chunk):
        raw, (trees, bad_rows) = run_chunk(params, data, raw,
                                           jnp.asarray(first_round + round_offset, jnp.int32),
                                           n_trees_array)
        kept = min(config.rounds_per_chunk, n_trees - first_round)
        if kept < config.rounds_per_chunk:
            trees, bad_rows = jax.tree.map(
                lambda a, kept=kept: a[:kept] if is_traced(a) else np.asarray(a)[:kept],
                (trees, bad_rows))
        parts.append((trees, bad_rows))
        if on_chunk is not None:
            done = _joined(parts, raw, n_rows)
            parts = [(done.trees, done.bad_rows)]
            if on_chunk(done):
                break
    return _joined(parts, raw, n_rows)


def _no_trees(config: BoostConfig) -> BinnedTree:
    """Zero trees, as host arrays of the shapes a stack of trees has."""
    n_entries = n_splits(config.depth, config.grow_policy)
    return BinnedTree(feature=np.zeros((0, n_entries), np.int32),
                      split_bin=np.zeros((0, n_entries), np.int32),
                      default_left=np.zeros((0, n_entries), bool),
                      gain=np.zeros((0, n_entries), np.float32),
                      leaf_value=np.zeros((0, 2**config.depth, config.n_outputs), np.float32))


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
    rows of a sharded fit dropped). Concrete arrays are joined on the host: a device
    concatenate would compile anew for every growing length."""
    trees, bad_rows = jax.tree.map(lambda *chunks: _concatenate(chunks), *parts)
    if isinstance(margins, OrderedMargins):  # on one device: no padding rows
        return Progress(trees=trees, raw=margins.model, bad_rows=bad_rows,
                        raw_ordered=margins.ordered)
    return Progress(trees=trees, raw=margins[:n_rows], bad_rows=bad_rows)


def _concatenate(chunks):
    if any(is_traced(c) for c in chunks):
        return chunks[0] if len(chunks) == 1 else jnp.concatenate(chunks)
    # device_put: jnp.asarray of a host array may compile a copy.
    return jax.device_put(np.concatenate([np.asarray(c) for c in chunks]))
