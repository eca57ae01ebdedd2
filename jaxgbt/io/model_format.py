"""Saving and loading models: a zip of a JSON header and .npy arrays, no pickle.

Format ``jaxgbt.model`` version 1 (documented in docs/model_format.md):

  header.json   {"format": "jaxgbt.model", "version": 1, "objective": NAME,
                 "custom_link": bool, "n_features": F, "n_trees": T, "depth": D,
                 "n_outputs": K, "vector_output": bool, "jaxgbt_version": STR,
                 "arrays": {NAME: {"dtype": STR, "shape": [..]}}}
  NAME.npy      one per array of the Booster, read with allow_pickle=False

A depthwise model adds the optional header field "grow_policy": "depthwise" (its split
arrays then have one entry per node, shape (T, 2**D - 1)); files without it are oblivious.
A model with categorical features adds the optional header field "categorical", the
arrays categories.npy and category_stats.npy, and labels.json (the category labels);
files without them load as before.

``save`` writes to a temporary file in the target folder, flushes it to disk and
renames it over the target, so a crash never leaves a half-written model. ``load``
checks every field, shape, dtype and range before building a model, and reads no
member larger than its header says.
"""

import io as _io
import json
import math
import os
import tempfile
import warnings
import zipfile

import jax.numpy as jnp
import numpy as np

from jaxgbt.core.dtypes import MAX_DEPTH
from jaxgbt.core.layout import GROW_POLICIES, n_splits
from jaxgbt.data import categorical
from jaxgbt.model import Booster, as_numpy
from jaxgbt.objectives import Link, Objective, by_name

FORMAT = "jaxgbt.model"
VERSION = 1
MAX_TREES = 1_000_000
MAX_FEATURES = 10_000_000
MAX_OUTPUTS = 100_000
# Leaf values a loadable model may hold (1 GiB of float32): a zip compresses a model of
# zeros 1000-fold, so this bounds what a small hostile file can make load allocate.
MAX_LEAF_VALUES = 1 << 28
_HEADER_BYTES = 1 << 20
# Categorical features: known categories over all columns, and the bytes of labels.json
# (kept out of header.json, whose 1 MiB would cap a column at some 50,000 labels).
MAX_CATEGORIES = 1 << 24
_LABELS_BYTES = 1 << 26
LABELS_MEMBER = "labels.json"
_NPY_HEADER_SLACK = 4096  # the .npy preamble is at most a few hundred bytes

_DTYPES = {"feature": "int32", "threshold": "float32", "default_left": "bool",
           "split_gain": "float32", "leaf_value": "float32", "base_score": "float32"}


class ModelFormatError(ValueError):
    """A model file that is not a valid jaxgbt model."""


def _expected_shapes(T: int, D: int, K: int,
                     grow_policy: str = "oblivious") -> dict[str, tuple[int, ...]]:
    per_level = (T, n_splits(D, grow_policy))
    return {"feature": per_level, "threshold": per_level, "default_left": per_level,
            "split_gain": per_level, "leaf_value": (T, 2**D, K), "base_score": (K,)}


def save(model: Booster, path) -> None:
    """Writes ``model`` to ``path`` atomically (see the module docstring)."""
    if not isinstance(model, Booster):
        raise TypeError(f"save expects a jaxgbt Booster; got {type(model).__name__}.")
    if model.feature.ndim != 2:
        raise ValueError("save expects one model; this Booster holds a stack of models "
                         f"(feature has shape {model.feature.shape}). Save each member.")
    from jaxgbt import __version__

    arrays = as_numpy(model)
    builtin = by_name(model.objective.name)
    header = {
        "format": FORMAT, "version": VERSION, "objective": model.objective.name,
        "custom_link": model.objective.link is not None
        and (builtin is None or builtin.link is not model.objective.link),
        "n_features": model.n_features, "n_trees": model.n_trees, "depth": model.depth,
        "n_outputs": model.n_outputs, "vector_output": model.vector_output,
        "jaxgbt_version": __version__,
        "best_round": None if model.best_round is None else int(model.best_round),
        "history": None if model.history is None else {
            key: [None if np.isnan(v) else float(v) for v in np.asarray(values, np.float64)]
            for key, values in model.history.items()},
    }
    if model.grow_policy != "oblivious":
        header["grow_policy"] = model.grow_policy
    members = {}
    if model.encoder is not None:
        header["categorical"], encoder_arrays, labels = _encoder_record(model.encoder)
        arrays.update(encoder_arrays)
        if labels:
            members[LABELS_MEMBER] = json.dumps(labels).encode()
    header["arrays"] = {name: {"dtype": str(a.dtype), "shape": list(a.shape)}
                        for name, a in arrays.items()}
    write_archive(path, header, arrays, members)


def _encoder_record(encoder: categorical.Encoder):
    """(the header's "categorical" field, its arrays, the labels of labelled columns)."""
    columns, labels = [], []
    for index, (column, names) in enumerate(zip(encoder.columns, encoder.labels, strict=True)):
        if column.kind == categorical.NUMERIC:
            continue
        columns.append({"index": index, "kind": column.kind,
                        "n_categories": column.n_categories, "missing": column.missing,
                        "labelled": names is not None})
        if names is not None:
            labels.append(list(names))
    arrays = {"categories": np.asarray(encoder.categories, np.float32),
              "category_stats": np.asarray(encoder.stats, np.float32)}
    return {"n_targets": encoder.n_targets, "columns": columns}, arrays, labels


def write_archive(path, header: dict, arrays: dict[str, np.ndarray],
                  members: dict[str, bytes] | None = None) -> None:
    """Writes header.json, one .npy per array and any other ``members`` (name: bytes)
    into a zip at ``path``, atomically: a temporary file in the same folder, flushed and
    fsynced, then renamed."""
    buffer = _io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("header.json", json.dumps(header, indent=1))
        for name, array in arrays.items():
            member = _io.BytesIO()
            np.save(member, array, allow_pickle=False)
            archive.writestr(f"{name}.npy", member.getvalue())
        for name, data in (members or {}).items():
            archive.writestr(name, data)
    write_atomically(path, buffer.getvalue())


def write_atomically(path, data: bytes) -> None:
    """Writes ``data`` to ``path`` so that a crash leaves the old file or the new one,
    never part of one: a temporary file in the same folder, flushed and fsynced, then
    renamed over the target (a killed process may leave a ``.jaxgbt-*.tmp`` behind)."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".jaxgbt-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        # mkstemp creates the file private (0600); give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _fail(path, message: str, what: str = "jaxgbt model"):
    raise ModelFormatError(f"{path} is not a valid {what}: {message}")


def read_header(archive: zipfile.ZipFile, path, format_name: str = FORMAT,
                version: int = VERSION, what: str = "jaxgbt model") -> dict:
    """header.json of an archive, checked to be a JSON object of the given format."""
    try:
        info = archive.getinfo("header.json")
    except KeyError:
        _fail(path, "it has no header.json", what)
    if info.file_size > _HEADER_BYTES:
        _fail(path, f"header.json declares {info.file_size} bytes (limit {_HEADER_BYTES})", what)
    try:
        raw = archive.read(info)
    except Exception as error:  # noqa: BLE001 - bad CRC, bad compression, truncation
        _fail(path, f"header.json could not be read ({type(error).__name__}: {error})", what)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        _fail(path, f"header.json is not JSON ({type(error).__name__}: {error})", what)
    if not isinstance(header, dict):
        _fail(path, "header.json is not a JSON object", what)
    if header.get("format") != format_name:
        _fail(path, f"format is {header.get('format')!r}, expected {format_name!r}", what)
    if header.get("version") != version:
        _fail(path, f"format version {header.get('version')!r} is not supported (this jaxgbt "
                    f"reads version {version}); load it with the jaxgbt that wrote it", what)
    return header


def header_int(header: dict, key: str, low: int, high: int, path,
               what: str = "jaxgbt model") -> int:
    value = header.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        _fail(path, f"{key}={value!r} must be an integer in [{low}, {high}]", what)
    return value


def read_array(archive: zipfile.ZipFile, name: str, dtype: str, shape: tuple, path,
               what: str = "jaxgbt model") -> np.ndarray:
    """One .npy member, read without pickle and checked against dtype and shape."""
    member = f"{name}.npy"
    try:
        info = archive.getinfo(member)
    except KeyError:
        _fail(path, f"it has no {member}", what)
    expected_bytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if info.file_size > expected_bytes + _NPY_HEADER_SLACK:
        _fail(path, f"{member} declares {info.file_size} bytes, more than its header allows",
              what)
    try:
        with archive.open(info) as stream:
            array = np.lib.format.read_array(_io.BytesIO(stream.read()), allow_pickle=False)
    except Exception as error:  # noqa: BLE001 - any decoding failure is a format error
        _fail(path, f"{member} could not be read ({type(error).__name__}: {error})", what)
    if str(array.dtype) != dtype or tuple(array.shape) != tuple(shape):
        _fail(path, f"{member} has dtype {array.dtype} and shape {array.shape}; expected "
                    f"{dtype} and {tuple(shape)}", what)
    return array


def load(path, link: Link | None = None) -> Booster:
    """Reads a model written by ``save``.

    Args:
      path: the file.
      link: the inverse link of a custom loss, if it had one (links are code and are
        not stored; built-in objectives get theirs back by name).

    Raises:
      ModelFormatError: the file is not a valid model (the message says why).
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        _fail(path, f"it is not a readable zip archive ({error})")
    with archive:
        header = read_header(archive, path)
        F = header_int(header, "n_features", 1, MAX_FEATURES, path)
        T = header_int(header, "n_trees", 0, MAX_TREES, path)
        D = header_int(header, "depth", 1, MAX_DEPTH, path)
        K = header_int(header, "n_outputs", 1, MAX_OUTPUTS, path)
        vector_output = header.get("vector_output")
        name = header.get("objective")
        if not isinstance(vector_output, bool) or not isinstance(name, str):
            _fail(path, "vector_output must be a boolean and objective a string")
        if not isinstance(header.get("custom_link", False), bool):
            _fail(path, "custom_link must be a boolean")
        grow_policy = header.get("grow_policy", "oblivious")
        if grow_policy not in GROW_POLICIES:
            _fail(path, f"grow_policy must be one of {GROW_POLICIES}")
        if not vector_output and K != 1:
            _fail(path, f"a scalar-output model must have n_outputs=1, not {K}")
        if T * 2**D * K > MAX_LEAF_VALUES:
            _fail(path, f"{T} trees x {2**D} leaves x {K} outputs is too large to load")
        arrays = {field: read_array(archive, field, _DTYPES[field], shape, path)
                  for field, shape in _expected_shapes(T, D, K, grow_policy).items()}
        encoder = _read_encoder(archive, header, F, path)
    split_features = F if encoder is None else encoder.n_encoded
    if ((arrays["feature"] < 0) | (arrays["feature"] >= split_features)).any():
        _fail(path, f"feature indices must lie in [0, {split_features})")
    if np.isnan(arrays["threshold"]).any() or np.isneginf(arrays["threshold"]).any():
        _fail(path, "thresholds must be finite or +inf")
    for field in ("leaf_value", "base_score", "split_gain"):
        if not np.isfinite(arrays[field]).all():
            _fail(path, f"{field} must be finite")
    # Finite leaves can still add up to an infinite margin. A float32 sum whose absolute
    # terms add up to less than half the float32 maximum cannot overflow.
    leaves = arrays["leaf_value"]
    largest_leaf = np.maximum(leaves.max(axis=1, initial=0), -leaves.min(axis=1, initial=0))
    largest = (np.abs(arrays["base_score"]).astype(np.float64)
               + largest_leaf.astype(np.float64).sum(axis=0))
    if not (largest <= np.finfo(np.float32).max / 2).all():
        _fail(path, "leaf values add up to margins beyond the float32 range")
    best_round, history = _read_training_record(header, T, path)
    objective = by_name(name)
    if objective is None:
        objective = Objective(name=name, loss=None)
    if link is not None:
        objective = objective._replace(link=link)
    elif header.get("custom_link"):
        warnings.warn(f"{path} was saved with a custom link, which is code and is not stored; "
                      "predict returns raw margins unless you pass load(path, link=...).",
                      stacklevel=2)
    return Booster(**{k: jnp.asarray(v) for k, v in arrays.items()}, objective=objective,
                   n_features=F, vector_output=vector_output, grow_policy=grow_policy,
                   best_round=best_round,
                   history=history, encoder=encoder)


def _read_training_record(header: dict, n_trees: int, path):
    """The optional best_round and validation history of a header (None when absent)."""
    best = header.get("best_round")
    if best is not None:
        best = jnp.asarray(header_int(header, "best_round", 0, max(n_trees - 1, 0), path),
                           jnp.int32)
    history = header.get("history")
    if history is None:
        return best, None
    if not isinstance(history, dict) or len(history) > 1000:
        _fail(path, "history must be an object of at most 1000 score lists")
    record = {}
    for key, values in history.items():
        if not isinstance(values, list) or len(values) > n_trees or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                for v in values):
            _fail(path, f"history[{key!r}] must be a list of at most {n_trees} numbers")
        record[key] = jnp.asarray([np.nan if v is None else v for v in values], jnp.float32)
    return best, record


_COLUMN_KEYS = {"index", "kind", "n_categories", "missing", "labelled"}


def _read_encoder(archive: zipfile.ZipFile, header: dict, n_features: int, path):
    """The optional categorical Encoder of a model file (None when absent), checked:
    column layout, sizes, finite statistics, increasing categories, and labels."""
    record = header.get("categorical")
    if record is None:
        return None
    if not isinstance(record, dict) or set(record) != {"n_targets", "columns"}:
        _fail(path, "categorical must be an object with keys n_targets and columns")
    n_targets = header_int(record, "n_targets", 1, MAX_OUTPUTS, path)
    entries = record["columns"]
    if not isinstance(entries, list) or not 1 <= len(entries) <= n_features:
        _fail(path, f"categorical columns must be a list of 1 to {n_features} entries")
    described = {}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != _COLUMN_KEYS:
            _fail(path, f"each categorical column must have the keys {sorted(_COLUMN_KEYS)}")
        index = header_int(entry, "index", 0, n_features - 1, path)
        size = header_int(entry, "n_categories", 0, MAX_CATEGORIES, path)
        kind, missing, labelled = entry["kind"], entry["missing"], entry["labelled"]
        if (kind not in (categorical.ONE_HOT, categorical.TARGET) or not isinstance(missing, bool)
                or not isinstance(labelled, bool) or (kind == categorical.TARGET and missing)):
            _fail(path, "a categorical column's kind must be one_hot or target, and missing "
                        "and labelled booleans (missing false for target)")
        if index in described or (described and index < max(described)):
            _fail(path, "categorical column indices must be increasing")
        described[index] = (kind, size, missing, labelled)
    n_categories = sum(size for _, size, _, _ in described.values())
    n_stats = sum(size + 2 for kind, size, _, _ in described.values()
                  if kind == categorical.TARGET)
    width = n_features + sum((size + missing if kind == categorical.ONE_HOT else n_targets) - 1
                             for kind, size, missing, _ in described.values())
    if n_categories > MAX_CATEGORIES or n_stats * n_targets > MAX_LEAF_VALUES \
            or not 1 <= width <= MAX_FEATURES:
        _fail(path, "the categorical encoding is too large to load")
    known = read_array(archive, "categories", "float32", (n_categories,), path)
    stats = read_array(archive, "category_stats", "float32", (n_stats, n_targets), path)
    if not np.isfinite(known).all() or not np.isfinite(stats).all():
        _fail(path, "categories and category_stats must be finite")
    labels = _read_labels(archive, [size for _, size, _, labelled in described.values()
                                    if labelled], path)
    columns, all_labels, offset, stats_offset = [], [], 0, 0
    for index in range(n_features):
        if index not in described:
            columns.append(categorical.Column(categorical.NUMERIC))
            all_labels.append(None)
            continue
        kind, size, missing, labelled = described[index]
        values = known[offset:offset + size]
        if labelled and not np.array_equal(values, np.arange(size, dtype=np.float32)):
            _fail(path, f"the categories of labelled column {index} must be 0, 1, ..., {size - 1}")
        if (np.diff(values) <= 0).any():
            _fail(path, f"the categories of column {index} must be increasing")
        columns.append(categorical.Column(
            kind, size, offset, missing, stats_offset if kind == categorical.TARGET else 0))
        all_labels.append(labels.pop(0) if labelled else None)
        offset += size
        stats_offset += size + 2 if kind == categorical.TARGET else 0
    return categorical.Encoder(jnp.asarray(known), jnp.asarray(stats), tuple(columns),
                               tuple(all_labels))


def _read_labels(archive: zipfile.ZipFile, sizes: list[int], path) -> list[tuple]:
    """labels.json: one list of distinct labels (str, int or finite float) per labelled
    column, of the sizes the header gives."""
    if not sizes:
        return []
    try:
        info = archive.getinfo(LABELS_MEMBER)
    except KeyError:
        _fail(path, f"it has labelled categorical columns but no {LABELS_MEMBER}")
    if info.file_size > _LABELS_BYTES:
        _fail(path, f"{LABELS_MEMBER} declares {info.file_size} bytes (limit {_LABELS_BYTES})")
    try:
        labels = json.loads(archive.read(info).decode("utf-8"))
    except Exception as error:  # noqa: BLE001 - bad zip data, not UTF-8, not JSON, too deep
        _fail(path, f"{LABELS_MEMBER} could not be read ({type(error).__name__}: {error})")
    if not isinstance(labels, list) or [len(x) if isinstance(x, list) else -1
                                        for x in labels] != sizes:
        _fail(path, f"{LABELS_MEMBER} must hold one list per labelled column, of sizes {sizes}")
    for names in labels:
        if not all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))
                   or (isinstance(v, float) and math.isfinite(v)) for v in names):
            _fail(path, f"{LABELS_MEMBER} labels must be strings or finite numbers")
        if len(set(names)) != len(names):
            _fail(path, f"{LABELS_MEMBER} labels of a column must be distinct")
    return [tuple(names) for names in labels]
