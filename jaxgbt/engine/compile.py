"""Compiling the chunk of rounds (``chunk.train_chunk``) and the round's derivatives.

A chunk runs through one of two compiled forms (``chunk_runner`` picks):
``compiled_chunk``, ``jax.jit`` over the configuration and mesh, for a mesh or traced
arguments (``fit_many``, ``cv``, forests, gradients through ``fit``); and, for fits
outside any trace on one device, a program compiled ahead of time (``chunk_program``)
and kept in a bounded cache by configuration and argument types, so that ``fit`` can
compile it before the data is binned (``compile_ahead``).
"""

import collections
import functools
import os
import threading
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from jaxgbt.core.config import BoostConfig
from jaxgbt.core.dtypes import BIN_DTYPE, MAX_BINS
from jaxgbt.core.histogram import SparseEntries
from jaxgbt.core.ordered import OrderedMargins
from jaxgbt.core.round import (
    BoostParams,
    Margins,
    TrainData,
    round_derivatives,
    round_losses,
)
from jaxgbt.core.tracing import is_traced
from jaxgbt.engine.cache import compiled_and_stored, stored_chunk
from jaxgbt.engine.chunk import train_chunk
from jaxgbt.engine.padding import pad_rows, padded_data, padded_row_count
from jaxgbt.engine.resources import release_free_heap
from jaxgbt.engine.sharding import sharded_chunk
from jaxgbt.objectives.derivatives import Derivatives

# Compiled once per configuration: ``fit`` checks the gradients at the starting margin
# with it (eagerly, a group loss's derivatives would be traced anew on every fit).
_compiled_derivatives = jax.jit(round_derivatives, static_argnames="config")


def _for_derivatives(config: BoostConfig, params: BoostParams, data: TrainData):
    """(config, params, data) with only what ``round_derivatives`` and ``round_losses``
    read: the loss and its settings, the Hessian floor, labels, weights and groups. The
    tree's settings (depth, bins, growth, sampling, constraints, a learning-rate
    schedule) are left at fixed values, so that fits differing only in them share the
    start's programs: a run of the test suite compiled the start check 163 times (34 s)
    this way, 305 times (54 s) with one program per configuration (docs/benchmarks.md,
    "Compile")."""
    config = BoostConfig(loss=config.loss, depth=1, n_bins=2, n_outputs=config.n_outputs,
                         vector_output=config.vector_output, curvature=config.curvature,
                         fisher=config.fisher, grouped=config.grouped)
    params = params._replace(monotone=None, interaction_sets=None, random_strength=None,
                             leaf_shrinkage=None,
                             split=params.split._replace(min_data_in_leaf=None,
                                                         max_delta_step=None))
    return config, params, data._replace(bins=None, order=None, entries=None)


def derivatives_at(config: BoostConfig, params: BoostParams, data: TrainData,
                   raw) -> Derivatives:
    """The derivatives (``round_derivatives``) at margins ``raw`` f32[N, K], compiled
    once per loss setting and data shape, not per tree setting."""
    return _compiled_derivatives(*_for_derivatives(config, params, data), raw)


@functools.partial(jax.jit, static_argnames="config")
def compiled_start_check(config: BoostConfig, params: BoostParams, data: TrainData,
                         raw: jax.Array):
    """(the derivatives, the loss values: ``round_losses``) at the starting margins
    ``raw`` f32[N, K], in one program: ``fit`` checks both on the host before training,
    so a loss that is NaN where its gradient is finite (``log`` of a negative number
    whose argument does not depend on f) is caught without a check in every round."""
    return round_derivatives(config, params, data, raw), round_losses(config, data, raw)


def start_check(config: BoostConfig, params: BoostParams, data: TrainData,
                raw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(g, h f32[N, K] and the loss values f32[N], or f32[G] per group) at the starting
    margins ``raw`` f32[N, K], on the host. The rows are padded to their bucket as the
    training chunk pads them (``padding``), so that fits on nearby row counts share this
    program as they share the chunk; the padding rows are cut from the results."""
    n_rows = data.weight.shape[0]
    n_padded = padded_row_count(config, data, raw, None)
    config, params, data = _for_derivatives(config, params, data)
    derivatives, losses = compiled_start_check(config, params, padded_data(data, n_padded),
                                               pad_rows(raw, n_padded))
    g, h, losses = np.asarray(derivatives.g), np.asarray(derivatives.h), np.asarray(losses)
    if n_padded == n_rows:  # nothing padded (a group loss's values are per group)
        return g, h, losses
    return g[:n_rows], h[:n_rows], losses[:n_rows]


def _compiled_chunk(config, mesh, params, data, raw, first_round, n_trees):
    if mesh is None:
        return train_chunk(config, params, data, raw, first_round, n_trees)
    return sharded_chunk(config, mesh, params, data, raw, first_round, n_trees)


# XLA:CPU hands matrix products and reductions to a kernel library (YNNPACK's "library
# fusions") by default. The split search's prefix sums are products of small blocks
# (``core.split.prefix_sums``: [F x nodes x 2K x 16, 17] x [17, 16]), and there the
# library's calls cost more than XLA's own loops: with products left to XLA (reductions
# still the library's), warm fits at 2,000 rows (20 to 500 features, one or three
# outputs) took 3-18% less time, 20,000 x 180 three classes 5% less, and 20,000 x 500,
# 28 features from 200,000 rows and depthwise trees the same (docs/benchmarks.md,
# "Products left to XLA:CPU's own loops").
# Options of the chunk's compilation alone: every other program keeps XLA's defaults.
CPU_CHUNK_OPTIONS = (("xla_cpu_experimental_ynn_fusion_type", "LIBRARY_FUSION_TYPE_REDUCE"),)

# XLA:CPU's loops use 256-bit vectors by default, also on processors with 512-bit ones
# (AVX-512). On an AMD EPYC with AVX-512, 512-bit vectors made warm fits of 256 bins up
# to 10% faster at 2,000 rows, 2-4% at 20,000 x 180 and 200,000 x 28 and the same at
# 20,000 x 500, but fits of three classes on 0/1 columns (4 bins) 8-10% slower
# (docs/benchmarks.md, "512-bit vectors"). So they are given from this many bins, where
# the search's loops run over long bin axes. On an Intel Xeon with AVX-512 they were up to
# 13% faster at 200,000 x 28 in one of two rounds and 5-10% slower at 2,000 x 180
# (docs/benchmarks.md, "The Intel kind again"), so Intel processors keep XLA's default.
WIDE_VECTOR_OPTIONS = (("xla_cpu_prefer_vector_width", 512),)
WIDE_VECTOR_MIN_BINS = 64


def processor_fields(cpuinfo: str | None = None) -> dict[str, list[str]]:
    """The first processor's fields in the text of Linux's /proc/cpuinfo (``cpuinfo``,
    or the file), each a list of its words ("flags": the instruction sets); empty where
    the file cannot be read."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo") as file:
                cpuinfo = file.read(1 << 16)
        except OSError:
            return {}
    first = cpuinfo.split("\n\n")[0]
    return {name.strip(): value.split()
            for name, value in (line.split(":", 1) for line in first.splitlines()
                                if ":" in line)}


def wide_vectors_measured(cpuinfo: str | None = None) -> bool:
    """Whether the processor is of the kind 512-bit vectors were measured faster on: an
    AMD processor with AVX-512 (``processor_fields`` of ``cpuinfo``; where it cannot be
    read, no)."""
    fields = processor_fields(cpuinfo)
    return fields.get("vendor_id") == ["AuthenticAMD"] and "avx512f" in fields.get("flags", [])


@functools.cache
def chunk_compiler_options(platform: str, n_bins: int = MAX_BINS) -> tuple:
    """The options a chunk of histograms of ``n_bins`` bins is compiled with on
    ``platform``, as (name, value) pairs: ``CPU_CHUNK_OPTIONS`` on CPU, and
    ``WIDE_VECTOR_OPTIONS`` from ``WIDE_VECTOR_MIN_BINS`` bins where they were measured
    (``wide_vectors_measured``); none elsewhere. An option the user's XLA_FLAGS set is
    left to them, and one this XLA does not know is not given (one is experimental: a
    trivial program is compiled with them once, to ask: ``_known_options``)."""
    if platform != "cpu" or jax.default_backend() != "cpu":
        return ()
    flags = os.environ.get("XLA_FLAGS", "")
    wide = n_bins >= WIDE_VECTOR_MIN_BINS and wide_vectors_measured()
    wanted = CPU_CHUNK_OPTIONS + (WIDE_VECTOR_OPTIONS if wide else ())
    options = tuple(option for option in wanted if option[0] not in flags)
    if len(options) > 1 and _known_options(options):  # one probe where all are known
        return options
    return tuple(option for option in options if _known_options((option,)))


@functools.cache
def _known_options(options: tuple) -> bool:
    """Whether this XLA compiles a program with ``options``, (name, value) pairs (a
    trivial program: about 25 ms in a fresh process)."""
    try:
        jax.jit(_identity).lower(np.float32(0)).compile(compiler_options=dict(options))
    except jax.errors.JaxRuntimeError:
        return False
    return True


def _identity(x):
    return x


@functools.cache
def _chunk_jit(options: tuple) -> Callable:
    return jax.jit(_compiled_chunk, static_argnames=("config", "mesh"),
                   compiler_options=dict(options) or None)


def compiled_chunk(mesh: Mesh | None = None, traced: bool = False,
                   n_bins: int = MAX_BINS) -> Callable:
    """The chunk under ``jax.jit``, ``fn(config, mesh, params, data, raw, first_round,
    n_trees)``, compiled with the options of the platform it runs on, the mesh's or the
    default backend's, for histograms of ``n_bins`` bins (``chunk_compiler_options``).
    With ``traced`` arguments (under ``vmap`` or an outer ``jit``), where JAX takes
    compiler options only from the outermost program, with XLA's defaults."""
    if traced:
        return _chunk_jit(())
    platform = (mesh.devices.flat[0].platform if mesh is not None
                else jax.default_backend())
    return _chunk_jit(chunk_compiler_options(platform, n_bins))


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

# Each compiled XLA:CPU program holds about 20 memory maps and Linux allows a process
# 65,530 (vm.max_map_count): past that, LLVM stops compiling ("Cannot allocate memory"),
# as it did in one process fitting 19 datasets x 3 variants x 5 splits. Before compiling
# a chunk in a process that holds more maps than this, every compiled program is dropped.
MAPS_BEFORE_CLEARING = 50_000


def clear_caches() -> None:
    """Drops every program compiled in this process, jaxgbt's chunks and JAX's own
    (``jax.clear_caches``); the next fit of each shape compiles again, or reads the
    persistent compilation cache. For long searches over many data shapes and settings
    in one process, whose compiled programs would otherwise use up the memory maps Linux
    allows it; ``fit`` does it by itself, with a warning, when the maps near that limit."""
    with _CHUNK_PROGRAMS_LOCK:
        _CHUNK_PROGRAMS.clear()
    jax.clear_caches()


def memory_maps() -> int:
    """The memory maps this process holds (0 where /proc/self/maps does not exist)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


def _argument_types(tree) -> tuple:
    """The pytree structure and each leaf's (shape, dtype, weak type): what decides
    whether a compiled program accepts the arguments."""
    leaves, treedef = jax.tree.flatten(tree)
    avals = [jax.typeof(leaf) for leaf in leaves]  # as jit sees them (Python scalars weak)
    return treedef, tuple((aval.shape, aval.dtype, aval.weak_type) for aval in avals)


def _any_traced(params: BoostParams, data: TrainData, raw) -> bool:
    """Whether any of the chunk's arguments is traced (under ``vmap`` or ``jit``)."""
    return any(is_traced(leaf) for leaf in jax.tree.leaves((params, data, raw)))


def _ahead_of_time(params: BoostParams, data: TrainData, raw, mesh: Mesh | None) -> bool:
    """Whether ``train`` runs these arguments through ``chunk_program``: on one device,
    nothing traced."""
    return mesh is None and not _any_traced(params, data, raw)


def compile_ahead(config: BoostConfig, params: BoostParams, data: TrainData,
                  start_raw: jax.Array | None, x_shape: tuple[int, int],
                  mesh: Mesh | None) -> bool:
    """Compiles the chunk ``train`` will run on this data before its bins exist.

    Args:
      data: the fit's data without its bins (``bins`` is not read).
      start_raw: the starting margins f32[N, K] ``train`` will get, or None.
      x_shape: (N, rows of the binned matrix: ``Dataset.n_bin_rows``).

    Returns:
      Whether it compiled (or found the program compiled); False when ``train`` will
      compile through jit instead (a mesh, or traced arguments).
    """
    n_rows, n_bin_rows = x_shape
    margins = jax.ShapeDtypeStruct((n_rows, config.n_outputs), jnp.float32)
    if config.statistic_orders > 1:  # every order's (``train`` broadcasts start_raw)
        margins = jax.ShapeDtypeStruct((n_rows, config.statistic_orders, config.n_outputs),
                                       jnp.float32)
    elif start_raw is not None:
        margins = jax.ShapeDtypeStruct(start_raw.shape, start_raw.dtype)
    raw = OrderedMargins(model=margins, ordered=margins) if config.ordered else margins
    data = data._replace(bins=jax.ShapeDtypeStruct((n_bin_rows, n_rows), BIN_DTYPE))
    if config.sparse_group is not None:
        group = config.sparse_group
        entries = (group.n_entries,)
        data = data._replace(entries=SparseEntries(
            jax.ShapeDtypeStruct(entries, jnp.int32), jax.ShapeDtypeStruct(entries, jnp.int32),
            jax.ShapeDtypeStruct(entries, BIN_DTYPE),
            bundles=jax.ShapeDtypeStruct((len(group.bundles), n_rows), BIN_DTYPE)
            if group.bundles else None))
    if is_traced(start_raw) or not _ahead_of_time(params, data, raw, mesh):
        return False
    # The row count ``train`` pads to (``engine.padding``); only the types are needed.
    n_padded = padded_row_count(config, data, raw, mesh)
    data = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), data)
    chunk_program(config, params, padded_data(data, n_padded), pad_rows(raw, n_padded))
    return True


def chunk_program(config: BoostConfig, params: BoostParams, data: TrainData, raw) -> Callable:
    """The compiled chunk, ``program(params, data, raw, first_round, n_trees)``, for
    arguments of these types on the default device: held in this process, else read
    from the executable an earlier process stored (``cache.stored_chunk``), else
    compiled now (and stored).

    ``data`` and ``raw`` may hold ``jax.ShapeDtypeStruct`` in place of arrays (``fit``
    compiles before the bins exist). Not for traced arguments or a mesh: those go
    through ``compiled_chunk`` itself.
    """
    args = (params, data, raw, _ROUND_SPEC, _ROUND_SPEC)
    key = (config, bool(jax.config.jax_enable_x64), str(jax.config.jax_default_device),
           jax.default_backend(), *_argument_types(args))
    with _CHUNK_PROGRAMS_LOCK:  # fits may run in threads
        program = _CHUNK_PROGRAMS.pop(key, None)
    if program is None:
        held = memory_maps()
        if held > MAPS_BEFORE_CLEARING:
            warnings.warn(f"this process holds {held:,} memory maps, near Linux's limit "
                          "(vm.max_map_count, 65,530 by default), most of them compiled "
                          "programs: jaxgbt.clear_caches() dropped them all, and later fits "
                          "compile again what they need.", RuntimeWarning, stacklevel=2)
            clear_caches()
        program = stored_chunk(key)  # by an earlier process: no tracing, no compiling
        if program is None:
            # The heap's free pages handed back before and after: the compiler's working
            # memory (about 100 MB at depth 6) then does not stay resident under the
            # training data. Only here: on a held program the calls cost a small fit 5%.
            release_free_heap()
            # Traced first: tracing runs eager operations whose programs JAX's cache may
            # serve, which must not count as serving the chunk (``compiled_and_stored``).
            lowered = compiled_chunk(n_bins=config.n_bins).lower(config, None, *args)
            program = compiled_and_stored(key, lowered.compile)
            release_free_heap()
    with _CHUNK_PROGRAMS_LOCK:
        _CHUNK_PROGRAMS[key] = program
        while len(_CHUNK_PROGRAMS) > MAX_CHUNK_PROGRAMS:
            _CHUNK_PROGRAMS.popitem(last=False)
    return program


def chunk_runner(config: BoostConfig, params: BoostParams, data: TrainData, raw: Margins,
                 mesh: Mesh | None) -> Callable:
    """``run(params, data, raw, first_round, n_trees)``: the chunk for these arguments,
    held ahead of time where it can be (``chunk_program``), else through jit.

    ``data`` and ``raw`` are already on ``mesh`` when one is given (``sharding.shard_rows``).
    """
    traced = _any_traced(params, data, raw)
    if mesh is None and not traced:  # ``_ahead_of_time``
        return chunk_program(config, params, data, raw)
    return functools.partial(compiled_chunk(mesh, traced, config.n_bins), config, mesh)
