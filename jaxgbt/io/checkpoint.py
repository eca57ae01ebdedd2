"""Checkpoints of a running fit, and resuming from them.

``fit(..., checkpoint_path=P, checkpoint_every=R)`` writes the progress (trees so far,
training margins, round count) to P every R rounds or more, at the end of a compiled
chunk of rounds. Run the same fit again after a crash and it continues from P; the
result equals an uninterrupted fit bit for bit on the same device, because the saved
margins are the exact float32 values the next round starts from.

A checkpoint carries a fingerprint (SHA-256) of everything that decides the model: the
binned data, labels, weights, starting margin, hyperparameters and static settings.
Resuming with anything different is refused rather than silently mixing two fits.

Format ``jaxgbt.checkpoint`` version 2: a zip like a model file (see ``jaxgbt.io.model_format``),
with header fields ``fingerprint``, ``sha256`` (each member's SHA-256, verified on load, so
a file edited on disk is refused; version 1 files have none and resume unverified),
``rounds_done``, ``n_rows``, ``depth``, ``splits``
(per tree: D oblivious, 2**D - 1 depthwise), ``n_outputs`` and one .npy per array: the
bin-space trees (``feature``, ``split_bin``, ``default_left``, ``gain``, ``leaf_value``,
``cover``), ``raw`` f32[N, K] and ``bad_rows``. ``cover`` (f32[T, 2**D], the leaves'
Hessian sums) is optional: a checkpoint written before it was stored resumes with NaN
covers, and the finished model then has no cover (``Booster.cover`` None). A checkpoint
of ordered boosting also has the header field ``ordered: true`` and the array
``raw_ordered`` f32[N, K] (the ordered margins, see ``jaxgbt.core.ordered``); the
fingerprint then includes the boosting mode.

Under ``fit(distributed=True)`` every process holds the same trees but only its own rows'
margins. ``save_checkpoint_of_processes`` gathers the margins of all rows (in process
order) and process 0 alone writes the file; ``load_checkpoint_of_processes`` has process 0
alone read it and sends its decision (start afresh, resume, or fail) and the progress to
the others, each keeping its own rows' margins. The file is the one-process format, its
``raw`` holding every process's rows; the fingerprint is ``data.distributed.agreed_digest``
of each process's own.
"""

import hashlib
import os
import zipfile

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.dtypes import MAX_DEPTH
from jaxgbt.core.tree import BinnedTree
from jaxgbt.data.distributed import from_first_process, gather_rows, process_row_counts
from jaxgbt.engine.loop import Progress
from jaxgbt.io.archive import (
    ZIP_OPEN_ERRORS,
    ModelFormatError,
    header_int,
    read_array,
    read_checksums,
    read_header,
    write_archive,
)
from jaxgbt.io.model_format import MAX_OUTPUTS, MAX_TREES

FORMAT = "jaxgbt.checkpoint"
VERSION = 2
OLDEST_VERSION = 1  # version 1 files have no checksums
_WHAT = "jaxgbt checkpoint"
_MAX_ROWS = 1 << 34
_MAX_ORDERS = 1 << 20


def fingerprint(*parts) -> str:
    """SHA-256 over arrays (bytes, dtype and shape) and plain values (their repr)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, (np.ndarray, jnp.ndarray)):
            array = np.ascontiguousarray(np.asarray(part))
            digest.update(f"{array.dtype}{array.shape}".encode())
            digest.update(array.tobytes())
        else:
            digest.update(repr(part).encode())
    return digest.hexdigest()


def save_checkpoint(path, progress: Progress, key: str) -> None:
    """Writes ``progress`` to ``path`` atomically."""
    # Margins f32[N, K], or with several orders of target statistics f32[N, P, K].
    n_rows, n_outputs = progress.raw.shape[0], progress.raw.shape[-1]
    arrays = {name: np.asarray(value) for name, value in progress.trees._asdict().items()}
    arrays["raw"] = np.asarray(progress.raw)
    arrays["bad_rows"] = np.asarray(progress.bad_rows)
    header = {"format": FORMAT, "version": VERSION, "fingerprint": key,
              "rounds_done": progress.rounds_done, "n_rows": n_rows,
              "splits": int(progress.trees.feature.shape[1]),
              "depth": int(np.log2(progress.trees.leaf_value.shape[1])), "n_outputs": n_outputs}
    if progress.raw.ndim == 3:
        header["statistic_orders"] = int(progress.raw.shape[1])
    if progress.raw_ordered is not None:
        header["ordered"] = True
        arrays["raw_ordered"] = np.asarray(progress.raw_ordered)
    write_archive(path, header, arrays)


def load_checkpoint(path, key: str) -> Progress | None:
    """The progress stored at ``path``, or None when there is no file there.

    Raises:
      ModelFormatError: the file is not a valid checkpoint.
      ValueError: it is a checkpoint of a different fit (another fingerprint).
    """
    if not os.path.exists(path):
        return None
    try:
        archive = zipfile.ZipFile(path)
    except ZIP_OPEN_ERRORS as error:
        raise ModelFormatError(f"{path} is not a valid {_WHAT}: {error}") from error
    with archive:
        header = read_header(archive, path, FORMAT, VERSION, _WHAT, oldest=OLDEST_VERSION)
        if header.get("fingerprint") != key:
            raise ValueError(
                f"checkpoint_path={os.fspath(path)!r} holds a checkpoint of a different fit (its "
                "data, labels, weights or parameters differ). Delete it, or pass another "
                "checkpoint_path, to start this fit afresh.")
        T = header_int(header, "rounds_done", 0, MAX_TREES, path, _WHAT)
        N = header_int(header, "n_rows", 1, _MAX_ROWS, path, _WHAT)
        D = header_int(header, "depth", 1, MAX_DEPTH, path, _WHAT)
        K = header_int(header, "n_outputs", 1, MAX_OUTPUTS, path, _WHAT)
        # Oblivious trees store D splits, depthwise trees 2**D - 1.
        M = header_int(header, "splits", D, 2**D - 1, path, _WHAT)
        shapes = {"feature": ((T, M), "int32"), "split_bin": ((T, M), "int32"),
                  "default_left": ((T, M), "bool"), "gain": ((T, M), "float32"),
                  "leaf_value": ((T, 2**D, K), "float32"), "raw": ((N, K), "float32"),
                  "bad_rows": ((T,), "int32")}
        ordered = header.get("ordered", False)
        if not isinstance(ordered, bool):
            raise ModelFormatError(f"{path} is not a valid {_WHAT}: header field 'ordered' "
                                   f"is {ordered!r}, expected true or false")
        if ordered:
            shapes["raw_ordered"] = ((N, K), "float32")
        if "statistic_orders" in header:
            P = header_int(header, "statistic_orders", 2, _MAX_ORDERS, path, _WHAT)
            shapes["raw"] = ((N, P, K), "float32")
        if "cover.npy" in archive.namelist():
            shapes["cover"] = ((T, 2**D), "float32")
        checksums = read_checksums(header, path, _WHAT, required=header["version"] >= 2)
        arrays = {name: jnp.asarray(read_array(archive, name, dtype, shape, path, _WHAT,
                                               checksums))
                  for name, (shape, dtype) in shapes.items()}
    arrays.setdefault("cover", jnp.full((T, 2**D), jnp.nan, jnp.float32))  # unknown
    trees = BinnedTree(**{name: arrays[name] for name in BinnedTree._fields})
    return Progress(trees=trees, raw=arrays["raw"], bad_rows=arrays["bad_rows"],
                    raw_ordered=arrays.get("raw_ordered"))


# What process 0 met reading or writing a checkpoint, sent to the others as a code so that
# every process raises the same kind of error (ModelFormatError first: a ValueError too).
_FAILURES = (ModelFormatError, ValueError, OSError)


def _raised_everywhere(failure: Exception | None) -> None:
    """Raises process 0's ``failure`` (None on the others) on every process; returns
    when process 0 had none. Every process must call it at the same point."""
    message = b"" if failure is None else str(failure).encode()
    code = 0 if failure is None else 1 + next(
        i for i, kind in enumerate(_FAILURES) if isinstance(failure, kind))
    code, length = from_first_process([np.asarray([code, len(message)], np.int64)])[0]
    if code == 0:
        return
    mine = np.frombuffer(message, np.uint8) if failure is not None else np.zeros(length, np.uint8)
    text = from_first_process([mine])[0].tobytes().decode() if length else ""
    if failure is not None:
        raise failure
    raise _FAILURES[int(code) - 1](f"distributed=True, on process 0: {text}")


def save_checkpoint_of_processes(path, progress: Progress, key: str) -> None:
    """``save_checkpoint`` of a distributed fit: every process calls it with its own
    rows' margins ``progress.raw`` f32[N_p, K]; process 0 writes the margins of all
    rows (in process order) to ``path``, the others write nothing. A write that fails
    on process 0 raises on every process."""
    # Ordered margins exist only on one device (``spec.ordered``): one process.
    margins = [m for m in (progress.raw, progress.raw_ordered) if m is not None]
    raw, *raw_ordered = gather_rows([np.asarray(m) for m in margins])
    failure = None
    if jax.process_index() == 0:
        try:
            everyone = progress._replace(raw=raw, raw_ordered=(raw_ordered or [None])[0])
            save_checkpoint(path, everyone, key)
        except OSError as error:
            failure = error
    _raised_everywhere(failure)


def _read_on_first_process(path, key: str, n_rows: int) -> tuple:
    """(progress or None, failure or None) of process 0's reading; (None, None) on the
    others. n_rows: the rows of all processes, which the file's margins must have."""
    if jax.process_index() != 0:
        return None, None
    try:
        progress = load_checkpoint(path, key)
    except _FAILURES as error:
        return None, error
    if progress is not None and progress.raw.shape[0] != n_rows:
        return None, ModelFormatError(f"{path} is not a valid {_WHAT} of this fit: it holds "
                                      f"{progress.raw.shape[0]} rows' margins, not {n_rows}")
    return progress, None


def load_checkpoint_of_processes(path, key: str, n_rows: int) -> Progress | None:
    """``load_checkpoint`` of a distributed fit, called by every process with the same
    ``key`` (``agreed_digest``) and its own row count ``n_rows`` = N_p.

    Process 0 reads ``path`` (the others never open it: their disks need not share it);
    its decision reaches every process, so all resume, all start afresh (None), or all
    raise its error. The trees and round count are process 0's, and the margins f32[N_p,
    K] this process's rows of the file's f32[N, K] (rows in process order).
    """
    counts = process_row_counts(n_rows)
    progress, failure = _read_on_first_process(path, key, int(counts.sum()))
    _raised_everywhere(failure)
    # Whether process 0 resumes, then the shapes the others receive into: rounds done T,
    # split entries M, leaves L, outputs K, and whether there are ordered margins.
    shape = np.zeros(6, np.int64)
    if progress is not None:
        shape[:] = (1, progress.rounds_done, *progress.trees.feature.shape[1:],
                    *progress.trees.leaf_value.shape[1:], progress.raw_ordered is not None)
    found, T, M, L, K, ordered = (int(v) for v in from_first_process([shape])[0])
    if not found:
        return None
    margins = np.zeros((int(counts.sum()), K), np.float32)
    like = Progress(trees=BinnedTree(
        feature=np.zeros((T, M), np.int32), split_bin=np.zeros((T, M), np.int32),
        default_left=np.zeros((T, M), bool), gain=np.zeros((T, M), np.float32),
        leaf_value=np.zeros((T, L, K), np.float32), cover=np.zeros((T, L), np.float32)),
        raw=margins, bad_rows=np.zeros((T,), np.int32),
        raw_ordered=margins if ordered else None)
    mine = like if progress is None else jax.tree.map(np.asarray, progress)
    leaves, treedef = jax.tree.flatten(mine)
    received = jax.tree.unflatten(treedef, from_first_process(leaves))
    first = int(counts[:jax.process_index()].sum())
    rows = jax.tree.map(lambda m: m[first:first + n_rows],
                        (received.raw, received.raw_ordered))
    return jax.device_put(received._replace(raw=rows[0], raw_ordered=rows[1]))
