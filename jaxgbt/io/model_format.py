"""Saving and loading models: a zip of a JSON header and .npy arrays, no pickle.

Format ``jaxgbt.model`` version 3 (documented in docs/model_format.md):

  header.json   {"format": "jaxgbt.model", "version": 3, "objective": NAME,
                 "custom_link": bool, "n_features": F, "n_trees": T, "depth": D,
                 "n_outputs": K, "vector_output": bool, "jaxgbt_version": STR,
                 "arrays": {NAME: {"dtype": STR, "shape": [..]}},
                 "sha256": {MEMBER: HEX}}
  NAME.npy      one per array of the Booster, read with allow_pickle=False

A depthwise or lossguide model adds the optional header field "grow_policy": "depthwise"
or "lossguide" (its split arrays then have one entry per node, shape (T, 2**D - 1); a
lossguide tree's nodes that did not split pass every row left); files without it are
oblivious.
A model with categorical features adds the optional header field "categorical", the
arrays categories.npy and category_stats.npy, and labels.json (the category labels);
files without them load as before. A model with column names adds the optional header
field "feature_names" (a list of F distinct strings); files without it load with None.
A classification model that knows its labels adds the optional header field "classes"
(a list of distinct strings, numbers or booleans, one per class); files without it load
with None.
Version 2 adds the array cover.npy (f32[T, 2**D], each leaf's training Hessian sum),
optional: version 1 files, and models without covers, load with ``cover=None``.
Version 3 adds the header field "sha256" (each member's SHA-256, verified before the
member is parsed); version 1 and 2 files, which have none, load unverified.

``save`` writes to a temporary file in the target folder, flushes it to disk and
renames it over the target, so a crash never leaves a half-written model. ``load``
checks every field, shape, dtype and range before building a model, and reads no
member larger than its header says.
"""

import json
import math
import warnings
import zipfile

import jax.numpy as jnp
import numpy as np

from jaxgbt.core.dtypes import MAX_DEPTH, MAX_TREES
from jaxgbt.core.layout import GROW_POLICIES, n_splits
from jaxgbt.data import categorical
from jaxgbt.data.validation import check_classes
from jaxgbt.io.archive import (
    fail,
    header_int,
    open_archive,
    read_array,
    read_checksums,
    read_header,
    verify_member,
    write_archive,
)
from jaxgbt.objectives import Link, Objective, by_name
from jaxgbt.version import __version__

FORMAT = "jaxgbt.model"
VERSION = 3
OLDEST_VERSION = 1  # version 1 files have no cover.npy, versions 1 and 2 no checksums
FIRST_CHECKSUMMED_VERSION = 3
MAX_FEATURES = 10_000_000
MAX_OUTPUTS = 100_000
# Leaf values a loadable model may hold (1 GiB of float32): a zip compresses a model of
# zeros 1000-fold, so this bounds what a small hostile file can make load allocate.
MAX_LEAF_VALUES = 1 << 28
# Categorical features: known categories over all columns, and the bytes of labels.json
# (kept out of header.json, whose 1 MiB would cap a column at some 50,000 labels).
MAX_CATEGORIES = 1 << 24
_LABELS_BYTES = 1 << 26
LABELS_MEMBER = "labels.json"

_DTYPES = {"feature": "int32", "threshold": "float32", "default_left": "bool",
           "split_gain": "float32", "leaf_value": "float32", "base_score": "float32"}
# What save reads of a model besides its arrays.
_MODEL_FIELDS = (*_DTYPES, "objective", "n_features", "vector_output", "grow_policy",
                 "best_round", "history", "encoder")


def _expected_shapes(T: int, D: int, K: int,
                     grow_policy: str = "oblivious") -> dict[str, tuple[int, ...]]:
    per_level = (T, n_splits(D, grow_policy))
    return {"feature": per_level, "threshold": per_level, "default_left": per_level,
            "split_gain": per_level, "leaf_value": (T, 2**D, K), "base_score": (K,)}


def save(model, path) -> None:
    """Writes ``model`` (a ``jaxgbt.Booster``, read by its fields) to ``path`` atomically
    (see the module docstring)."""
    if not all(hasattr(model, field) for field in _MODEL_FIELDS):
        raise TypeError(f"save expects a jaxgbt Booster; got {type(model).__name__}.")
    if model.feature.ndim != 2:
        raise ValueError("save expects one model; this Booster holds a stack of models "
                         f"(feature has shape {model.feature.shape}). Save each member.")
    arrays = {field: np.asarray(getattr(model, field)) for field in _DTYPES}
    if getattr(model, "cover", None) is not None:
        arrays["cover"] = np.asarray(model.cover, np.float32)
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
    if getattr(model, "feature_names", None) is not None:
        header["feature_names"] = list(model.feature_names)
    if getattr(model, "classes", None) is not None:
        header["classes"] = list(model.classes)
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
        entry = {"index": index, "kind": column.kind, "n_categories": column.n_categories,
                 "missing": column.missing, "labelled": names is not None}
        if column.one_hot:  # only where it says more than the kind, for earlier readers
            entry["one_hot"] = True
        columns.append(entry)
        if names is not None:
            labels.append(list(names))
    arrays = {"categories": np.asarray(encoder.categories, np.float32),
              "category_stats": np.asarray(encoder.stats, np.float32)}
    return {"n_targets": encoder.n_targets, "columns": columns}, arrays, labels


def read_model(path, link: Link | None = None) -> dict:
    """The fields of a ``Booster`` (keyword arguments) read from a file written by ``save``
    (``jaxgbt.load`` builds the model from them).

    Args:
      path: the file.
      link: the inverse link of a custom loss, if it had one (links are code and are
        not stored; built-in objectives get theirs back by name).

    Raises:
      ModelFormatError: the file is not a valid model (the message says why).
    """
    with open_archive(path) as archive:
        header = read_header(archive, path, FORMAT, VERSION, oldest=OLDEST_VERSION)
        checksums = read_checksums(
            header, path, required=header["version"] >= FIRST_CHECKSUMMED_VERSION)
        F = header_int(header, "n_features", 1, MAX_FEATURES, path)
        T = header_int(header, "n_trees", 0, MAX_TREES, path)
        D = header_int(header, "depth", 1, MAX_DEPTH, path)
        K = header_int(header, "n_outputs", 1, MAX_OUTPUTS, path)
        vector_output = header.get("vector_output")
        name = header.get("objective")
        if not isinstance(vector_output, bool) or not isinstance(name, str):
            fail(path, "vector_output must be a boolean and objective a string")
        if not isinstance(header.get("custom_link", False), bool):
            fail(path, "custom_link must be a boolean")
        grow_policy = header.get("grow_policy", "oblivious")
        if grow_policy not in GROW_POLICIES:
            fail(path, f"grow_policy must be one of {GROW_POLICIES}")
        if not vector_output and K != 1:
            fail(path, f"a scalar-output model must have n_outputs=1, not {K}")
        if T * 2**D * K > MAX_LEAF_VALUES:
            fail(path, f"{T} trees x {2**D} leaves x {K} outputs is too large to load")
        arrays = {field: read_array(archive, field, _DTYPES[field], shape, path,
                                    checksums=checksums)
                  for field, shape in _expected_shapes(T, D, K, grow_policy).items()}
        cover = None
        if "cover.npy" in archive.namelist():
            cover = read_array(archive, "cover", "float32", (T, 2**D), path,
                               checksums=checksums)
            if not np.isfinite(cover).all():
                fail(path, "cover must be finite")
        encoder = _read_encoder(archive, header, F, path, checksums)
    split_features = F if encoder is None else encoder.n_encoded
    if ((arrays["feature"] < 0) | (arrays["feature"] >= split_features)).any():
        fail(path, f"feature indices must lie in [0, {split_features})")
    if np.isnan(arrays["threshold"]).any() or np.isneginf(arrays["threshold"]).any():
        fail(path, "thresholds must be finite or +inf")
    for field in ("leaf_value", "base_score", "split_gain"):
        if not np.isfinite(arrays[field]).all():
            fail(path, f"{field} must be finite")
    # Finite leaves can still add up to an infinite margin. A float32 sum whose absolute
    # terms add up to less than half the float32 maximum cannot overflow.
    leaves = arrays["leaf_value"]
    largest_leaf = np.maximum(leaves.max(axis=1, initial=0), -leaves.min(axis=1, initial=0))
    largest = (np.abs(arrays["base_score"]).astype(np.float64)
               + largest_leaf.astype(np.float64).sum(axis=0))
    if not (largest <= np.finfo(np.float32).max / 2).all():
        fail(path, "leaf values add up to margins beyond the float32 range")
    best_round, history = _read_training_record(header, T, path)
    feature_names = _read_feature_names(header, F, path)
    classes = _read_classes(header, arrays["leaf_value"].shape[-1], path)
    objective = by_name(name)
    if objective is None:
        objective = Objective(name=name, loss=None)
    if link is not None:
        objective = objective._replace(link=link)
    elif header.get("custom_link"):
        warnings.warn(f"{path} was saved with a custom link, which is code and is not stored; "
                      "predict returns raw margins unless you pass load(path, link=...).",
                      stacklevel=2)
    return dict(**{k: jnp.asarray(v) for k, v in arrays.items()}, objective=objective,
                n_features=F, vector_output=vector_output, grow_policy=grow_policy,
                feature_names=feature_names, best_round=best_round, history=history,
                encoder=encoder, cover=None if cover is None else jnp.asarray(cover),
                classes=classes)


def _read_feature_names(header: dict, n_features: int, path) -> tuple[str, ...] | None:
    """The optional column names of a header: F distinct strings (None when absent)."""
    names = header.get("feature_names")
    if names is None:
        return None
    if (not isinstance(names, list) or len(names) != n_features
            or not all(isinstance(name, str) for name in names)):
        fail(path, f"feature_names must be a list of n_features={n_features} strings")
    if len(set(names)) != len(names):
        fail(path, "feature_names must be distinct")
    return tuple(names)


def _read_classes(header: dict, n_outputs: int, path) -> tuple | None:
    """The optional class labels of a header (``check_classes``; None when absent)."""
    classes = header.get("classes")
    if classes is None:
        return None
    if not isinstance(classes, list):
        fail(path, "classes must be a list of labels")
    try:
        return check_classes(classes, n_outputs)
    except ValueError as error:
        fail(path, str(error))


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
        fail(path, "history must be an object of at most 1000 score lists")
    record = {}
    for key, values in history.items():
        if not isinstance(values, list) or len(values) > n_trees or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                for v in values):
            fail(path, f"history[{key!r}] must be a list of at most {n_trees} numbers")
        record[key] = jnp.asarray([np.nan if v is None else v for v in values], jnp.float32)
    return best, record


_COLUMN_KEYS = {"index", "kind", "n_categories", "missing", "labelled", "one_hot"}
# "one_hot" is written only for a target column that keeps its 0/1 columns, so that files
# without such a column read as before (and in versions before the key).
_EARLIER_COLUMN_KEYS = _COLUMN_KEYS - {"one_hot"}


def _read_encoder(archive: zipfile.ZipFile, header: dict, n_features: int, path,
                  checksums: dict[str, str] | None):
    """The optional categorical Encoder of a model file (None when absent), checked:
    column layout, sizes, finite statistics, increasing categories, and labels (each
    member against its SHA-256 in ``checksums`` when given)."""
    record = header.get("categorical")
    if record is None:
        return None
    if not isinstance(record, dict) or set(record) != {"n_targets", "columns"}:
        fail(path, "categorical must be an object with keys n_targets and columns")
    n_targets = header_int(record, "n_targets", 1, MAX_OUTPUTS, path)
    entries = record["columns"]
    if not isinstance(entries, list) or not 1 <= len(entries) <= n_features:
        fail(path, f"categorical columns must be a list of 1 to {n_features} entries")
    described = {}  # index -> (its Column, offsets not yet set; whether it is labelled)
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) not in (_COLUMN_KEYS, _EARLIER_COLUMN_KEYS):
            fail(path, "each categorical column must have the keys "
                       f"{sorted(_EARLIER_COLUMN_KEYS)}, and may have one_hot")
        index = header_int(entry, "index", 0, n_features - 1, path)
        size = header_int(entry, "n_categories", 0, MAX_CATEGORIES, path)
        kind, missing, labelled = entry["kind"], entry["missing"], entry["labelled"]
        one_hot = entry.get("one_hot", kind == categorical.ONE_HOT)
        if (kind not in (categorical.ONE_HOT, categorical.TARGET)
                or not all(isinstance(flag, bool) for flag in (missing, labelled, one_hot))
                or (kind == categorical.ONE_HOT and not one_hot)
                or (kind == categorical.TARGET and missing and not one_hot)):
            fail(path, "a categorical column's kind must be one_hot or target, and missing, "
                        "labelled and one_hot booleans (one_hot true for one_hot; missing "
                        "false for target without one_hot)")
        if index in described or (described and index < max(described)):
            fail(path, "categorical column indices must be increasing")
        described[index] = (categorical.Column(
            kind, size, 0, missing, one_hot=one_hot and kind == categorical.TARGET), labelled)
    read = [column for column, _ in described.values()]
    n_categories = sum(column.n_categories for column in read)
    n_stats = sum(column.n_categories + 2 for column in read
                  if column.kind == categorical.TARGET)
    width = n_features + sum(
        column.n_one_hot + (n_targets if column.kind == categorical.TARGET else 0) - 1
        for column in read)
    if n_categories > MAX_CATEGORIES or n_stats * n_targets > MAX_LEAF_VALUES \
            or not 1 <= width <= MAX_FEATURES:
        fail(path, "the categorical encoding is too large to load")
    known = read_array(archive, "categories", "float32", (n_categories,), path,
                       checksums=checksums)
    stats = read_array(archive, "category_stats", "float32", (n_stats, n_targets), path,
                       checksums=checksums)
    if not np.isfinite(known).all() or not np.isfinite(stats).all():
        fail(path, "categories and category_stats must be finite")
    labels = _read_labels(archive, [column.n_categories for column, labelled
                                    in described.values() if labelled], path, checksums)
    columns, all_labels, offset, stats_offset = [], [], 0, 0
    for index in range(n_features):
        if index not in described:
            columns.append(categorical.Column(categorical.NUMERIC))
            all_labels.append(None)
            continue
        column, labelled = described[index]
        kind, size = column.kind, column.n_categories
        values = known[offset:offset + size]
        if labelled and not np.array_equal(values, np.arange(size, dtype=np.float32)):
            fail(path, f"the categories of labelled column {index} must be 0, 1, ..., {size - 1}")
        if (np.diff(values) <= 0).any():
            fail(path, f"the categories of column {index} must be increasing")
        columns.append(column._replace(
            offset=offset, stats_offset=stats_offset if kind == categorical.TARGET else 0))
        all_labels.append(labels.pop(0) if labelled else None)
        offset += size
        stats_offset += size + 2 if kind == categorical.TARGET else 0
    return categorical.Encoder(jnp.asarray(known), jnp.asarray(stats), tuple(columns),
                               tuple(all_labels))


def _read_labels(archive: zipfile.ZipFile, sizes: list[int], path,
                 checksums: dict[str, str] | None) -> list[tuple]:
    """labels.json: one list of distinct labels (str, int or finite float) per labelled
    column, of the sizes the header gives, verified against ``checksums`` when given."""
    if not sizes:
        return []
    try:
        info = archive.getinfo(LABELS_MEMBER)
    except KeyError:
        fail(path, f"it has labelled categorical columns but no {LABELS_MEMBER}")
    if info.file_size > _LABELS_BYTES:
        fail(path, f"{LABELS_MEMBER} declares {info.file_size} bytes (limit {_LABELS_BYTES})")
    try:
        data = archive.read(info)
    except Exception as error:  # noqa: BLE001 - bad CRC, bad compression, truncation
        fail(path, f"{LABELS_MEMBER} could not be read ({type(error).__name__}: {error})")
    verify_member(data, LABELS_MEMBER, checksums, path)
    try:
        labels = json.loads(data.decode("utf-8"))
    except Exception as error:  # noqa: BLE001 - not UTF-8, not JSON, too deep
        fail(path, f"{LABELS_MEMBER} could not be read ({type(error).__name__}: {error})")
    if not isinstance(labels, list) or [len(x) if isinstance(x, list) else -1
                                        for x in labels] != sizes:
        fail(path, f"{LABELS_MEMBER} must hold one list per labelled column, of sizes {sizes}")
    for names in labels:
        if not all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool))
                   or (isinstance(v, float) and math.isfinite(v)) for v in names):
            fail(path, f"{LABELS_MEMBER} labels must be strings or finite numbers")
        if len(set(names)) != len(names):
            fail(path, f"{LABELS_MEMBER} labels of a column must be distinct")
    return [tuple(names) for names in labels]
