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
"""

import hashlib
import os
import zipfile

import jax.numpy as jnp
import numpy as np

from jaxgbt.core.dtypes import MAX_DEPTH
from jaxgbt.core.tree import BinnedTree
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
    n_rows, n_outputs = progress.raw.shape
    arrays = {name: np.asarray(value) for name, value in progress.trees._asdict().items()}
    arrays["raw"] = np.asarray(progress.raw)
    arrays["bad_rows"] = np.asarray(progress.bad_rows)
    header = {"format": FORMAT, "version": VERSION, "fingerprint": key,
              "rounds_done": progress.rounds_done, "n_rows": n_rows,
              "splits": int(progress.trees.feature.shape[1]),
              "depth": int(np.log2(progress.trees.leaf_value.shape[1])), "n_outputs": n_outputs}
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
