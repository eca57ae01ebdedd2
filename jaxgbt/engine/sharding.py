"""Rows split over the devices of a one-axis mesh (``fit(devices=...)``).

Every device holds a slice of the rows and runs the same chunk of rounds under
``jax.shard_map``; the rounds sum histograms, leaf sums and bad-row counts over
``BoostConfig.axis_name``, so every device grows the same trees. Which axis of each
array is split (``_row_specs``) is kept apart from putting the arrays there
(``shard_rows``, from arrays one process holds whole); on a mesh over several processes
(``fit(distributed=True)``) each process hands over its own rows instead
(``_shard_process_rows``), and the program is the same.

Group losses (ranking) run split only over several processes, with one device each
(``row_devices``): every process's queries index its own rows, so each device's
groups are local and the loss needs nothing from the others.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgbt.core.config import BoostConfig
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.core.tracing import is_traced
from jaxgbt.data.distributed import check_agree, gather_rows
from jaxgbt.engine.chunk import train_chunk
from jaxgbt.engine.padding import real_rows


def row_devices(grouped: bool) -> list:
    """The devices of every process that ``fit(distributed=True)`` splits rows over:
    all of them, or for a loss over groups of rows the first of each process (a ranking
    loss's queries stay whole on one device; Cox's one group of all rows then trains on
    one device when there is one process, and is refused over several by
    ``spec.check_mesh``)."""
    if not grouped:
        return jax.devices()
    return [next(d for d in jax.devices() if d.process_index == p)
            for p in range(jax.process_count())]


def _row_specs(config: BoostConfig, data: TrainData) -> TrainData:
    """How each array of ``data`` is split: the bins u8[F, N] by column, the labels and
    weights by row, a group loss's queries i32[Q, M] by query (each device's local)."""
    rows = P(config.axis_name)
    groups = None if data.group_index is None else rows
    return TrainData(bins=P(None, config.axis_name), y=jax.tree.map(lambda _: rows, data.y),
                     weight=rows, group_index=groups, group_mask=groups)


def sharded_chunk(config: BoostConfig, mesh: Mesh, params: BoostParams, data: TrainData,
                  raw: jax.Array, first_round: jax.Array, n_trees: jax.Array):
    """``chunk.train_chunk`` with the rows of ``data`` and ``raw`` f32[N, K] split over
    ``mesh`` (N a multiple of its devices, see ``shard_rows``); the trees are replicated."""
    rows = P(config.axis_name)
    sharded = jax.shard_map(functools.partial(train_chunk, config), mesh=mesh,
                            in_specs=(P(), _row_specs(config, data), rows, P(), P()),
                            out_specs=(rows, P()), check_vma=False)
    return sharded(params, data, raw, first_round, n_trees)


def _pad_rows(data: TrainData, n_pad: int, missing_bin: int) -> TrainData:
    """Appends n_pad rows of weight 0 (missing features, the first row's label)."""
    if n_pad == 0:
        return data
    bins = jnp.pad(data.bins, ((0, 0), (0, n_pad)), constant_values=missing_bin)
    y = jax.tree.map(lambda a: jnp.concatenate([a, jnp.repeat(a[:1], n_pad, axis=0)]), data.y)
    weight = jnp.pad(data.weight, (0, n_pad))
    return data._replace(bins=bins, y=y, weight=weight)


def _zero_rows(raw: jax.Array, n_pad: int) -> jax.Array:
    """Margins (f32[N, K], or each order's f32[N, P, K]) with n_pad rows of 0 after."""
    return jnp.pad(raw, ((0, n_pad),) + ((0, 0),) * (raw.ndim - 1))


def shard_rows(data: TrainData, raw: jax.Array, mesh: Mesh, config: BoostConfig
               ) -> tuple[TrainData, jax.Array]:
    """Pads rows to a multiple of the device count and places them on the mesh.

    Args:
      data: the fit's data, N rows.
      raw: f32[N, K], the starting margins.

    Returns:
      The data and margins with N rounded up to a multiple of the devices (padding rows of
      weight 0 and margin 0, last), split over ``mesh`` as ``_row_specs`` says.
    """
    if mesh.is_multi_process:
        return _shard_process_rows(data, raw, mesh, config)
    n_rows = data.weight.shape[0]
    n_pad = -n_rows % mesh.devices.size
    data = _pad_rows(data, n_pad, config.n_bins - 1)
    raw = _zero_rows(raw, n_pad)
    rows = NamedSharding(mesh, P(config.axis_name))
    feature_rows = NamedSharding(mesh, P(None, config.axis_name))
    data = data._replace(bins=jax.device_put(data.bins, feature_rows),
                         y=jax.device_put(data.y, rows), weight=jax.device_put(data.weight, rows))
    return data, jax.device_put(raw, rows)


def _shard_process_rows(data: TrainData, raw: jax.Array, mesh: Mesh, config: BoostConfig
                        ) -> tuple[TrainData, jax.Array]:
    """``shard_rows`` on a mesh over several processes, each passing its own N_p rows.

    Every process pads its rows to the same count (the largest N_p rounded up to a
    multiple of its devices; padding rows weigh 0) and contributes them as its block of
    the global row axis, in process order: N = P x that count.
    """
    local_devices = len(mesh.local_devices)
    check_agree(local_devices, "numbers of devices")
    n_rows = data.weight.shape[0]
    longest = int(gather_rows([np.zeros((1,), np.int64) + n_rows])[0].max())
    per_process = -(-longest // local_devices) * local_devices
    data = _pad_rows(data, per_process - n_rows, config.n_bins - 1)
    raw = _zero_rows(raw, per_process - n_rows)
    n_global = per_process * jax.process_count()

    def place(local, spec, row_axis=0):
        local = np.asarray(local)
        shape = (*local.shape[:row_axis], n_global, *local.shape[row_axis + 1:])
        return jax.make_array_from_process_local_data(NamedSharding(mesh, spec), local, shape)

    rows = P(config.axis_name)
    data = data._replace(bins=place(data.bins, P(None, config.axis_name), row_axis=1),
                         y=jax.tree.map(lambda a: place(a, rows), data.y),
                         weight=place(data.weight, rows))
    if data.group_index is not None:
        index, mask = _padded_queries(data.group_index, data.group_mask)
        n_queries = index.shape[0] * jax.process_count()
        place_queries = functools.partial(
            jax.make_array_from_process_local_data, NamedSharding(mesh, rows))
        data = data._replace(group_index=place_queries(index, (n_queries, index.shape[1])),
                             group_mask=place_queries(mask, (n_queries, index.shape[1])))
    return data, place(raw, rows)


def _padded_queries(index: jax.Array, mask: jax.Array) -> tuple[np.ndarray, np.ndarray]:
    """This process's queries (i32[Q_p, M_p] rows of each, bool[Q_p, M_p] which are
    rows) padded to the largest Q and M of all processes, so that every device holds the
    same shape; padding entries point at row 0 and are masked out, as in a short query.
    Each process has one device (``row_devices``), so its rows are its device's rows."""
    index, mask = np.asarray(index), np.asarray(mask)
    largest = gather_rows([np.asarray([index.shape], np.int64)])[0].max(axis=0)
    padding = ((0, int(largest[0]) - index.shape[0]), (0, int(largest[1]) - index.shape[1]))
    return np.pad(index, padding), np.pad(mask, padding)


def process_rows(margins: jax.Array, n_rows: int) -> jax.Array:
    """f32[N_p, K]: this process's rows of margins f32[N, K] placed by ``shard_rows``
    (all of them on a mesh within one process), padding dropped."""
    if is_traced(margins) or margins.is_fully_addressable:
        return real_rows(margins, n_rows)  # on the host: no slicing program per row count
    shards = sorted(margins.addressable_shards, key=lambda s: s.index[0].start)
    return jax.device_put(np.concatenate([np.asarray(s.data) for s in shards])[:n_rows])
