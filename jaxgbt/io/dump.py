"""A readable JSON dump of every tree, for people and other tools.

``dump(model)`` gives a dict (and writes it as JSON when given a path): the model's
facts, how the columns the trees split on are made from X (categorical encodings
included) and each tree as nested nodes. The schema is in docs/model_format.md ("JSON
dump"). It is a description, not a save format: ``jaxgbt.load`` does not read it.

Numbers are the model's float32 values written as exact decimals (``float(np.float32)``),
so a reader comparing float32 inputs with them takes the same branches as ``predict``.
A threshold of +inf (a pass-through split: every number goes left) is written ``null``.
"""

import json
import math
from pathlib import Path

import numpy as np

from jaxgbt.data import categorical
from jaxgbt.io.archive import write_atomically
from jaxgbt.io.onnx import full_tree_splits, link_name
from jaxgbt.version import __version__

FORMAT = "jaxgbt.dump"
VERSION = 1


def dump(model, path=None) -> dict:
    """The model as a JSON-ready dict (see the module docstring); written to ``path``
    (UTF-8 JSON, atomically) when a path is given.

    Args:
      model: a fitted Booster (all its trees; ``best_round`` is recorded, and
        ``predict`` uses trees 0..best_round).
      path: a file to write, or None.

    Returns:
      {"format", "version", "jaxgbt_version", "objective", "link", "base_score",
      "n_features", "feature_names", "n_outputs", "vector_output", "classes",
      "grow_policy", "depth", "n_trees", "best_round", "learning_rate_applied",
      "split_columns", "categorical", "trees"}.
    """
    if np.ndim(model.feature) > 2:
        raise ValueError(f"dump describes one model; this Booster stacks "
                         f"{np.shape(model.feature)[0]} models (from fit_many, cv or "
                         "jax.vmap(fit)). Dump one member: model[i].dump().")
    names = model.feature_names or tuple(f"x{j}" for j in range(model.n_features))
    columns = split_columns(model.encoder, names, model.n_features)
    record = {
        "format": FORMAT, "version": VERSION, "jaxgbt_version": __version__,
        "objective": model.objective.name,
        "link": link_name(model.objective) or "custom",
        "base_score": _floats(model.base_score),
        "n_features": model.n_features,
        "feature_names": list(names),
        "n_outputs": int(np.shape(model.leaf_value)[-1]),
        "vector_output": model.vector_output,
        "classes": None if getattr(model, "classes", None) is None else list(model.classes),
        "grow_policy": model.grow_policy,
        "depth": model.depth,
        "n_trees": model.n_trees,
        "best_round": None if model.best_round is None else int(model.best_round),
        # Leaf values are stored scaled: margin = base_score + sum of the leaves reached.
        "learning_rate_applied": True,
        "split_columns": columns,
        "categorical": _categorical(model.encoder, names),
        "trees": _trees(model, columns),
    }
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, json.dumps(record, indent=1, allow_nan=False).encode())
    return record


def split_columns(encoder, names, n_features: int) -> list[dict]:
    """Per column the trees split on (of F_enc), where it comes from in X:
    {"index", "feature", "name", "kind": "numeric" | "one_hot" | "one_hot_missing" |
    "target_statistic", and "category" (one-hot: the category's label, or its value) or
    "output" (target statistic: the statistic's output m)}."""
    if encoder is None:
        return [{"index": j, "feature": j, "name": names[j], "kind": "numeric"}
                for j in range(n_features)]
    out = []
    known = np.asarray(encoder.categories, np.float64)
    for j, column in enumerate(encoder.columns):
        base = {"feature": j, "name": names[j]}
        if column.kind == categorical.NUMERIC:
            out.append({**base, "kind": "numeric"})
            continue
        if column.n_one_hot:
            values = known[column.offset:column.offset + column.n_categories]
            for value in values:
                out.append({**base, "kind": "one_hot",
                            "category": _category(encoder.labels[j], value)})
            if column.missing:
                out.append({**base, "kind": "one_hot_missing"})
        if column.kind == categorical.TARGET:
            out.extend({**base, "kind": "target_statistic", "output": m}
                       for m in range(encoder.n_targets))
    return [{"index": e, **entry} for e, entry in enumerate(out)]


def _category(labels, value: float):
    """A category as people read it: its label, or its value for an unlabelled column."""
    if labels is not None:
        return categorical.label_key(labels[int(value)])
    return int(value) if float(value).is_integer() else float(value)


def _categorical(encoder, names) -> list[dict]:
    """Per categorical column of X, how it is encoded (see docs/model_format.md)."""
    if encoder is None:
        return []
    known = np.asarray(encoder.categories, np.float64)
    stats = np.asarray(encoder.stats, np.float32)
    out = []
    for j, column in enumerate(encoder.columns):
        if column.kind == categorical.NUMERIC:
            continue
        values = known[column.offset:column.offset + column.n_categories]
        labels = encoder.labels[j]
        entry = {
            "feature": j, "name": names[j],
            "encoding": "one_hot" if column.kind == categorical.ONE_HOT else "target_statistic",
            "values": [float(v) for v in values],
            "labels": None if labels is None else [categorical.label_key(v) for v in labels],
        }
        if column.n_one_hot:
            entry["missing_column"] = column.missing
        if column.kind == categorical.TARGET:
            entry["one_hot_columns"] = column.one_hot
            n = column.n_categories
            table = stats[column.stats_offset:column.stats_offset + n + 2]
            entry["statistics"] = [_floats(row) for row in table[:n]]
            entry["missing_statistic"] = _floats(table[n])
            entry["unseen_statistic"] = _floats(table[n + 1])
        out.append(entry)
    return out


def _trees(model, columns: list[dict]) -> list[dict]:
    """Each tree as nested nodes, heap-numbered: node i's children are 2i + 1 (yes:
    x <= threshold) and 2i + 2 (no); leaves are nodes 2**D - 1 + leaf index."""
    feature = np.asarray(model.feature)
    entry = full_tree_splits(feature, model.grow_policy)  # [T, 2**D - 1]
    rows = np.arange(feature.shape[0])[:, None]
    split_feature = feature[rows, entry]
    threshold = np.asarray(model.threshold)[rows, entry]
    default_left = np.asarray(model.default_left)[rows, entry]
    gain = np.asarray(model.split_gain)[rows, entry]
    leaf_value = np.asarray(model.leaf_value, np.float32)
    cover = None if model.cover is None else np.asarray(model.cover, np.float64)
    depth = model.depth

    def node(t: int, i: int, level: int) -> dict:
        n_internal = 2**depth - 1
        if i >= n_internal:
            leaf = i - n_internal
            out = {"nodeid": i, "depth": level, "leaf_index": leaf,
                   "leaf": _floats(leaf_value[t, leaf])}
            if cover is not None:
                out["cover"] = float(cover[t, leaf])
            return out
        column = columns[int(split_feature[t, i])]
        out = {"nodeid": i, "depth": level, "split": column["index"],
               "feature": column["feature"], "feature_name": column["name"]}
        if column["kind"] != "numeric":
            out["split_kind"] = column["kind"]
            out.update({k: column[k] for k in ("category", "output") if k in column})
        value = float(threshold[t, i])
        out.update({
            "threshold": None if value == math.inf else value,
            "yes": 2 * i + 1, "no": 2 * i + 2,
            "missing": 2 * i + 1 if default_left[t, i] else 2 * i + 2,
            "default_left": bool(default_left[t, i]),
            "gain": float(gain[t, i]),
        })
        children = [node(t, 2 * i + 1, level + 1), node(t, 2 * i + 2, level + 1)]
        if cover is not None:
            out["cover"] = children[0]["cover"] + children[1]["cover"]
        out["children"] = children
        return out

    return [{"tree": t, **node(t, 0, 0)} for t in range(feature.shape[0])]


def _floats(values) -> list[float]:
    return [float(v) for v in np.asarray(values, np.float32).ravel()]
