"""How much memory a fit needs, estimated before anything is allocated, and handing
freed host memory back.

``fit`` calls ``check_fit_memory`` after validating its input and before binning. When the
estimate exceeds what the device has free, it raises ``MemoryError`` naming the part that
dominates and the parameter to lower, instead of failing deep inside XLA.
"""

import ctypes
import functools
import os
import sys
from typing import NamedTuple

import jax

from jaxgbt.core.dtypes import BIN_DTYPE, FLOAT_DTYPE
from jaxgbt.core.ordered import block_size

# Temporaries of one level's split search, in units of the histogram itself: the
# per-feature outputs and their stack, the cumulative sums, and the left and right
# candidate sums for both missing directions (measured from the compiled program's
# buffer sizes at depth 6 and 10; rounded up).
_HISTOGRAM_COPIES = 8
# Per-row f32 arrays live at once in a round, per output: margins in and out, g, h,
# the weighted (g, h) pair; plus i32 node ids and the label and weight.
_ROW_FLOATS_PER_OUTPUT = 6
_ROW_FLOATS = 4
# Ordered boosting (``jaxgbt.core.ordered``) adds per row and output: the ordered margins in
# and out, g and h at the second margins, and the (g, h) pairs in sigma's order with
# their running sums; plus the i32 order, leaf ids in that order and block ids, and a
# row of the block mask (``ordered.block_size`` floats).
_ORDERED_ROW_FLOATS_PER_OUTPUT = 8
_ORDERED_ROW_FLOATS = 3
# Target statistics under P orders (``jaxgbt.core.statistic_orders``) add per row and
# order: its margins in and out per output, and the i32 leaf of the tree in that order.
_ORDER_ROW_FLOATS_PER_OUTPUT = 2
_ORDER_ROW_FLOATS = 1
_FLOAT_BYTES = FLOAT_DTYPE().itemsize


class FitMemory(NamedTuple):
    """Bytes a fit needs on one device, by part."""

    binned: int  # the u8[F, N] binned matrix
    rows: int  # per-row state of a round
    histograms: int  # one level's histograms and split-search temporaries

    @property
    def total(self) -> int:
        return self.binned + self.rows + self.histograms


def estimate_fit_memory(n_rows: int, n_features: int, n_bins: int, depth: int, n_outputs: int,
                        n_devices: int = 1, ordered: bool = False,
                        gathered_rows: int | None = None,
                        statistic_orders: int = 1, split_features: int | None = None
                        ) -> FitMemory:
    """Bytes on each device for a fit of this size (rows split evenly over devices);
    ``n_features``: the rows of the binned matrix; ``ordered``: with ordered boosting's
    second margins and prefix sums; ``gathered_rows``: the slots a sampled round gathers
    its drawn rows into (``sampling.sample_capacity``), whose bins and (g, h) each round
    copies; ``statistic_orders``: P, each with its own margins; ``split_features``: the
    columns trees split on, when the binned matrix also holds further orders' statistic
    columns (``core.statistic_orders.n_columns``; a round copies the columns of the
    order it grows its tree on), else None for all ``n_features``."""
    rows = -(-n_rows // n_devices)
    split_features = n_features if split_features is None else split_features
    binned = n_features * rows * BIN_DTYPE().itemsize
    row_state = rows * (_ROW_FLOATS + _ROW_FLOATS_PER_OUTPUT * n_outputs) * _FLOAT_BYTES
    if gathered_rows is not None:
        row_state += gathered_rows * (split_features * BIN_DTYPE().itemsize
                                      + (2 + 2 * n_outputs) * _FLOAT_BYTES)
    if split_features < n_features:  # a round's copy of its order's columns
        binned += split_features * rows * BIN_DTYPE().itemsize
    if statistic_orders > 1:
        row_state += rows * statistic_orders * (
            _ORDER_ROW_FLOATS + _ORDER_ROW_FLOATS_PER_OUTPUT * n_outputs) * _FLOAT_BYTES
    if ordered:
        row_state += rows * (_ORDERED_ROW_FLOATS + block_size(2**depth)
                             + _ORDERED_ROW_FLOATS_PER_OUTPUT * n_outputs) * _FLOAT_BYTES
    histogram = split_features * 2 ** (depth - 1) * n_bins * 2 * n_outputs * _FLOAT_BYTES
    return FitMemory(binned, row_state, _HISTOGRAM_COPIES * histogram)


def available_bytes(device: jax.Device) -> int | None:
    """Free memory of a device: the allocator's limit on accelerators, MemAvailable on
    the host for CPU devices; None when it cannot be told."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    if stats and "bytes_limit" in stats:
        return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _gib(n_bytes: int) -> str:
    return f"{n_bytes / 2**30:.2f} GiB"


def check_fit_memory(n_rows: int, n_features: int, n_bins: int, depth: int, n_outputs: int,
                     devices: list[jax.Device], ordered: bool = False,
                     gathered_rows: int | None = None, statistic_orders: int = 1,
                     split_features: int | None = None) -> FitMemory:
    """Raises MemoryError when the estimate exceeds the smallest free memory of ``devices``.

    Host CPU devices share one memory, so their estimates add up.
    """
    need = estimate_fit_memory(n_rows, n_features, n_bins, depth, n_outputs, len(devices),
                               ordered, gathered_rows, statistic_orders, split_features)
    free = [available_bytes(d) for d in devices]
    if any(f is None for f in free):
        return need
    on_host = all(d.platform == "cpu" for d in devices)
    total_need = need.total * (len(devices) if on_host else 1)
    room = min(free)
    if total_need <= room:
        return need
    if need.histograms >= max(need.binned, need.rows):
        split_features = n_features if split_features is None else split_features
        advice = (f"the histograms ({_gib(need.histograms)} per device: {split_features} "
                  f"features x 2**{depth - 1} nodes x {n_bins} bins x {n_outputs} output(s)) "
                  "dominate; lower depth (each level less halves them) or n_bins")
    else:
        advice = (f"the binned data and per-row state ({_gib(need.binned + need.rows)} per device "
                  f"for {n_rows} rows) dominate; use fewer rows or features, or split the rows "
                  "over more devices with devices=[...]"
                  + (f", or lower statistic_orders={statistic_orders}"
                     if statistic_orders > 1 else ""))
    raise MemoryError(f"this fit needs about {_gib(total_need)} but {_gib(room)} is free: "
                      f"{advice}.")


@functools.cache
def _malloc_trim():
    """glibc's ``malloc_trim``, or None where the C library has none (macOS, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


# Binned matrices of at least this many cells (rows x binned columns) have the heap's
# free pages handed back after binning: the binning threads' copies of the columns
# (sorted, transposed: about 8 bytes a cell) are then worth the call; below, the call
# (1-5 ms) would cost a small fit more than the few MB it returns.
TRIMMED_BINNING_CELLS = 2**22


def release_free_heap() -> None:
    """Hands the C heap's free pages back to the system, where the C library can.

    XLA's CPU compiler and runtime allocate from the C heap, and glibc keeps what they
    free (each thread's arena apart) for later allocations. After ``fit``'s compilation,
    about 100 MB it no longer uses would otherwise stay resident under the binned data
    (``docs/benchmarks.md``, peak memory). A call is cheap next to a fit (same page).
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
