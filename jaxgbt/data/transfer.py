"""Host arrays onto the device with one copy.

XLA's CPU client adopts a host buffer without copying when it is aligned to 64 bytes
(``jax.device_put`` then aliases it); any other buffer it copies, single-threaded. A
NumPy array is usually 16-byte aligned, so ``jnp.asarray`` copies it. Copying it here
instead, into a 64-byte-aligned buffer of our own (converted to the wanted dtype on the
way, in row blocks on every core), makes that the only copy, and the jax.Array never
shares memory with anything the caller holds. On accelerators the aligned buffer is
copied to the device as any other would be.
"""

import os
from concurrent.futures import ThreadPoolExecutor

import jax
import numpy as np

_ALIGNMENT = 64
# Batches of host rows (a prediction's X, rows to encode) are padded to these row counts:
# powers of two from 16 up to 2**17, then multiples of 2**16, so a batch wastes at most
# half its rows (a tenth from 600k rows up) and a process compiles a handful of programs,
# not one per size.
_MIN_BATCH_ROWS = 16
_POWER_BATCHES_UP_TO = 2**17
_LARGE_BATCH_STEP = 2**16
# Arrays smaller than this are copied in one piece: threads cost more than they save.
_PARALLEL_BYTES = 1 << 22


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
    dtype = np.dtype(dtype)
    n_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n_bytes + _ALIGNMENT, np.uint8)
    offset = -raw.ctypes.data % _ALIGNMENT
    return raw[offset:offset + n_bytes].view(dtype).reshape(shape)


def aligned_copy(array: np.ndarray, dtype) -> np.ndarray:
    """A 64-byte-aligned C-contiguous copy of ``array`` in ``dtype``.

    Large arrays are copied in blocks of rows, one thread per core (NumPy releases the
    GIL while it copies).
    """
    array = np.asarray(array)
    out = aligned_empty(array.shape, dtype)
    n_threads = os.cpu_count() or 1
    if array.ndim == 0 or out.nbytes < _PARALLEL_BYTES or n_threads == 1:
        np.copyto(out, array, casting="unsafe")
        return out
    bounds = np.linspace(0, array.shape[0], n_threads + 1).astype(int)

    def copy_rows(i: int) -> None:
        np.copyto(out[bounds[i]:bounds[i + 1]], array[bounds[i]:bounds[i + 1]],
                  casting="unsafe")

    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        list(pool.map(copy_rows, range(n_threads)))
    return out


def to_device(array, dtype) -> jax.Array:
    """``array`` as a new jax.Array of ``dtype`` on the default device, copied once."""
    return jax.device_put(aligned_copy(array, dtype))


def batch_rows(n_rows: int) -> int:
    """The padded row count of a batch of ``n_rows`` host rows."""
    if n_rows <= _MIN_BATCH_ROWS:
        return _MIN_BATCH_ROWS
    if n_rows <= _POWER_BATCHES_UP_TO:
        return 1 << (n_rows - 1).bit_length()
    return -(-n_rows // _LARGE_BATCH_STEP) * _LARGE_BATCH_STEP


def zero_padded_rows(X: np.ndarray) -> np.ndarray:
    """X [N, ...] followed by rows of zeros up to ``batch_rows(N)`` rows (X itself when N
    is a batch size); the caller cuts the padding's results off."""
    n_rows = X.shape[0]
    if batch_rows(n_rows) == n_rows:
        return X
    padded = np.zeros((batch_rows(n_rows),) + X.shape[1:], X.dtype)
    padded[:n_rows] = X
    return padded
