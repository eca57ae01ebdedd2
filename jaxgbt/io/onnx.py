"""A model as an ONNX graph, for runtimes without JAX (onnxruntime and others).

``to_onnx(model)`` builds an ``onnx.ModelProto`` with one input and two outputs:

  X            float32 (N, F), N any: the columns ``predict`` reads, by position;
               missing values as NaN; a labelled categorical column as its codes
               (``Booster.read_rows(frame)`` gives them, and the graph's metadata holds
               each column's labels in code order);
  raw          float32 (N,) or (N, K): the margins of ``predict_raw``;
  prediction   float32, shaped as raw: the objective's inverse link applied (sigmoid,
               softmax, exp...), as ``predict``. Left out when the link has no ONNX form
               (a custom loss's own link): the graph then gives margins only.

The trees become one ai.onnx.ml ``TreeEnsembleRegressor`` (opset 3 of that domain):
every tree as a full binary tree in heap order (an oblivious level repeated at each of
its nodes), tested ``x <= threshold`` (``BRANCH_LEQ``: jaxgbt sends a row left when
``x <= threshold``), the true branch on the left, a NaN taking the split's learned
default side (``nodes_missing_value_tracks_true`` = ``default_left``). Leaf values
already hold the learning rate (and a forest's 1/T); the base score is the operator's
``base_values``; each of the K outputs is a target id. Categorical columns are encoded
in the graph before the trees, as ``Encoder.encode`` does: one-hot columns as
``Equal`` against the known values, target statistics as a ``Gather`` from the table of
statistics by the row of the category (missing and unseen categories have rows of their
own). Standard operators come from ai.onnx opset ``BASE_OPSET``.

The graph is exact up to float32 rounding of the link: both sides compare the same
float32 values with the same thresholds, and add float32 leaf values (in another order).
"""

import json
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.layout import Oblivious, layout
from jaxgbt.data import categorical
from jaxgbt.objectives import by_name, exponential
from jaxgbt.version import __version__

# ai.onnx opset of the standard operators: 17 is read by every onnxruntime since 1.13.
BASE_OPSET = 17
ML_DOMAIN = "ai.onnx.ml"
ML_OPSET = 3  # TreeEnsembleRegressor with nodes_values_as_tensor and friends
TARGETS = ("ai.onnx.ml",)
INPUT, RAW, PREDICTION = "X", "raw", "prediction"

MSG_NO_ONNX = ("jaxgbt.to_onnx needs the onnx package: pip install 'jaxgbt[onnx]' (or onnx; "
               "add onnxruntime to run the graph).")
_MSG_STACKED = ("to_onnx exports one model; this Booster stacks {n} models (from fit_many, "
                "cv or jax.vmap(fit)). Export one member: to_onnx(model[i]).")


def to_onnx(model, X_sample=None, *, opset: int | None = None, target: str = "ai.onnx.ml",
            link: bool | None = None):
    """The model's predictions as an ONNX graph (see the module docstring).

    Args:
      model: a fitted Booster (its trees up to ``best_round`` when early stopping chose
        one, as ``predict`` uses them).
      X_sample: optional rows, as ``predict`` takes them; when given (and onnxruntime is
        installed) the graph is run on them and its margins checked against
        ``model.predict_raw``, and a difference larger than float32 rounding raises.
      opset: the ai.onnx.ml opset of the tree operator: None or 3 (``TreeEnsembleRegressor``).
      target: the operator set the trees are written in: "ai.onnx.ml".
      link: None: the ``prediction`` output when the objective's link has an ONNX form,
        else margins only, with a warning; True: the link is required (an error when it
        has no ONNX form); False: margins only.

    Returns:
      An ``onnx.ModelProto``; ``model.SerializeToString()`` is the file's bytes.
    """
    onnx = _import_onnx()
    _check_arguments(model, opset, target, link)
    trees = _used_trees(model)
    link_ops = _link_ops(model.objective)
    if link is True and link_ops is None:
        raise ValueError(f"to_onnx(link=True): the objective {model.objective.name!r} has a "
                         "link with no ONNX form (a custom link is code). Export the margins "
                         "with link=False and apply the link to output 'raw' yourself.")
    if link is None and link_ops is None:
        warnings.warn(f"to_onnx: the objective {model.objective.name!r} has a custom link with no "
                      "ONNX form; the graph gives margins only (output 'raw'). Pass "
                      "link=False to silence this.", UserWarning, stacklevel=2)
    with_link = link is not False and link_ops is not None

    nodes, initializers = [], []
    encoded = _encoding(model.encoder, nodes, initializers) if model.encoder is not None else INPUT
    nodes.append(onnx.helper.make_node(
        "TreeEnsembleRegressor", [encoded], ["margins_nk"], domain=ML_DOMAIN,
        **_tree_attributes(*trees, model.grow_policy, np.asarray(model.base_score))))
    if model.vector_output:
        nodes.append(onnx.helper.make_node("Identity", ["margins_nk"], [RAW]))
    else:
        initializers.append(_constant("flat_shape", np.array([-1], np.int64)))
        nodes.append(onnx.helper.make_node("Reshape", ["margins_nk", "flat_shape"], [RAW]))
    outputs = [_value_info(RAW, model)]
    if with_link:
        nodes.extend(link_ops(RAW, PREDICTION, initializers))
        outputs.append(_value_info(PREDICTION, model))
    x_info = onnx.helper.make_tensor_value_info(INPUT, onnx.TensorProto.FLOAT,
                                                ["N", model.n_features])
    graph = onnx.helper.make_graph(nodes, "jaxgbt", [x_info], outputs, initializers)
    proto = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", BASE_OPSET),
                              onnx.helper.make_opsetid(ML_DOMAIN, ML_OPSET)],
        producer_name="jaxgbt", producer_version=__version__)
    # make_model writes the newest IR version this onnx knows; runtimes read older ones.
    proto.ir_version = 8
    onnx.helper.set_model_props(proto, _metadata(model, trees[0].shape[0], with_link))
    onnx.checker.check_model(proto)
    if X_sample is not None:
        _check_on_sample(proto, model, X_sample)
    return proto


def _import_onnx():
    try:
        import onnx
    except ImportError:
        raise ImportError(MSG_NO_ONNX) from None
    return onnx


def _check_arguments(model, opset, target, link) -> None:
    fields = ("feature", "threshold", "default_left", "leaf_value", "base_score", "objective",
              "n_features", "vector_output", "grow_policy", "encoder", "best_round")
    if not all(hasattr(model, field) for field in fields):
        raise TypeError(f"to_onnx expects a jaxgbt Booster; got {type(model).__name__}.")
    if np.ndim(model.feature) > 2:
        raise ValueError(_MSG_STACKED.format(n=np.shape(model.feature)[0]))
    if opset not in (None, ML_OPSET):
        raise ValueError(f"to_onnx: opset={opset!r}; the trees are written with the "
                         f"ai.onnx.ml opset {ML_OPSET} (TreeEnsembleRegressor): pass None or "
                         f"{ML_OPSET}.")
    if target not in TARGETS:
        raise ValueError(f"to_onnx: target={target!r}; use one of {TARGETS}.")
    if link not in (None, True, False):
        raise TypeError(f"to_onnx: link={link!r}; use None, True or False.")


def _used_trees(model) -> tuple[np.ndarray, ...]:
    """(feature, threshold, default_left, leaf_value) of the trees ``predict`` uses."""
    arrays = [np.asarray(getattr(model, name))
              for name in ("feature", "threshold", "default_left", "leaf_value")]
    if model.best_round is not None:
        arrays = [a[:int(model.best_round) + 1] for a in arrays]
    return tuple(arrays)


def full_tree_splits(feature: np.ndarray, grow_policy: str) -> np.ndarray:
    """[T, 2**D - 1]: per heap-order node, the index of its entry in a tree's split
    arrays (M entries): the node's level for oblivious trees, the node itself for
    depthwise and lossguide ones."""
    n_trees, n_entries = feature.shape
    if not isinstance(layout(grow_policy), Oblivious):
        return np.broadcast_to(np.arange(n_entries), (n_trees, n_entries))
    depth = n_entries
    node = np.arange(2**depth - 1)
    level = np.floor(np.log2(node + 1)).astype(np.int64)  # node i of the heap sits at level
    return np.broadcast_to(level, (n_trees, node.size))


def _tree_attributes(feature, threshold, default_left, leaf_value, grow_policy: str,
                     base_score: np.ndarray) -> dict:
    """The TreeEnsembleRegressor attributes of T trees (split arrays [T, M], leaves
    [T, L, K]): each tree as 2L - 1 heap-order nodes, internal nodes first, node i's
    children 2i + 1 (x <= threshold, or missing when default_left) and 2i + 2."""
    if feature.shape[0] == 0:  # no trees: one leaf of zeros keeps the operator valid
        feature = np.zeros((1, feature.shape[1]), np.int32)
        threshold = np.full(feature.shape, np.inf, np.float32)
        default_left = np.ones(feature.shape, bool)
        leaf_value = np.zeros((1,) + leaf_value.shape[1:], np.float32)
    n_trees, n_leaves, n_outputs = leaf_value.shape
    entry = full_tree_splits(feature, grow_policy)  # [T, L - 1]
    rows = np.arange(n_trees)[:, None]
    n_internal = n_leaves - 1
    inner = np.arange(n_internal)
    n_nodes = 2 * n_leaves - 1

    def per_node(internal_values, leaf_fill):
        out = np.empty((n_trees, n_nodes), np.asarray(internal_values).dtype)
        out[:, :n_internal] = internal_values
        out[:, n_internal:] = leaf_fill
        return out.ravel().tolist()

    leaf_nodes = n_internal + np.arange(n_leaves)
    return dict(
        n_targets=n_outputs,
        aggregate_function="SUM",
        post_transform="NONE",
        base_values=np.asarray(base_score, np.float32).tolist(),
        nodes_treeids=np.repeat(np.arange(n_trees), n_nodes).tolist(),
        nodes_nodeids=np.tile(np.arange(n_nodes), n_trees).tolist(),
        nodes_featureids=per_node(feature[rows, entry].astype(np.int64), 0),
        nodes_values=per_node(threshold[rows, entry].astype(np.float32), 0.0),
        nodes_modes=per_node(np.full((n_trees, n_internal), "BRANCH_LEQ"), "LEAF"),
        nodes_truenodeids=per_node(np.broadcast_to(2 * inner + 1, (n_trees, n_internal)), 0),
        nodes_falsenodeids=per_node(np.broadcast_to(2 * inner + 2, (n_trees, n_internal)), 0),
        nodes_missing_value_tracks_true=per_node(
            default_left[rows, entry].astype(np.int64), 0),
        target_treeids=np.repeat(np.arange(n_trees), n_leaves * n_outputs).tolist(),
        target_nodeids=np.tile(np.repeat(leaf_nodes, n_outputs), n_trees).tolist(),
        target_ids=np.tile(np.arange(n_outputs), n_trees * n_leaves).tolist(),
        target_weights=leaf_value.astype(np.float32).ravel().tolist(),
    )


def _encoding(encoder, nodes: list, initializers: list) -> str:
    """Appends the nodes computing ``Encoder.encode`` of the input: (N, F) codes ->
    (N, F_enc). Returns the name of the encoded matrix."""
    helper = _import_onnx().helper
    blocks, run = [], None  # run: first column of the current stretch of numeric columns
    known_all = np.asarray(encoder.categories, np.float32)
    stats_all = np.asarray(encoder.stats, np.float32)
    for j, column in enumerate(encoder.columns + (categorical.Column(categorical.ONE_HOT),)):
        if column.kind == categorical.NUMERIC:
            run = j if run is None else run
            continue
        if run is not None:
            blocks.append(_columns(f"numeric_{run}", range(run, j), nodes, initializers))
            run = None
        if j == encoder.n_features:
            break
        x = _columns(f"column_{j}", [j], nodes, initializers)  # (N, 1)
        known = known_all[column.offset:column.offset + column.n_categories]
        name = f"encoded_{j}"
        if column.n_one_hot:
            initializers.append(_constant(f"known_hot_{j}", known[None, :]))
            nodes.append(helper.make_node("Equal", [x, f"known_hot_{j}"], [f"hot_{j}"]))
            hot = f"hot_{j}"
            if column.missing:
                nodes.append(helper.make_node("IsNaN", [x], [f"missing_{j}"]))
                nodes.append(helper.make_node("Concat", [hot, f"missing_{j}"],
                                              [f"hot_missing_{j}"], axis=1))
                hot = f"hot_missing_{j}"
            hot_name = f"one_hot_{j}" if column.kind == categorical.TARGET else name
            nodes.append(helper.make_node("Cast", [hot], [hot_name], to=_float_type()))
            blocks.append(hot_name)
        if column.kind == categorical.TARGET:
            nodes.extend(_target_statistic_nodes(j, x, known, column, stats_all, initializers))
            blocks.append(name)
    nodes.append(helper.make_node("Concat", blocks, ["encoded"], axis=1))
    return "encoded"


def _target_statistic_nodes(j: int, x: str, known: np.ndarray, column, stats_all: np.ndarray,
                            initializers: list) -> list:
    """Nodes giving ``encoded_j`` (N, M) from ``x`` (N, 1): the statistic of each row's
    category.

    The column's C + 2 statistic rows are reordered to [categories, unseen, missing], so
    that ArgMax over [x == known_0, ..., x == known_{C-1}, 0.5] gives a known category's
    row, or C (unseen) when none matches (ArgMax takes the first largest), and needs no
    reduction over the matches."""
    n = column.n_categories
    table = stats_all[column.stats_offset:column.stats_offset + n + 2]
    table = np.concatenate([table[:n], table[n + 1:n + 2], table[n:n + 1]])
    initializers.extend([
        _constant(f"known_{j}", known[None, :]),
        _constant(f"stats_{j}", table),
        _constant(f"half_{j}", np.full((1, 1), 0.5, np.float32)),
        _constant(f"missing_row_{j}", np.array(n + 1, np.int64)),
        _constant(f"axis_1_{j}", np.array([1], np.int64)),
    ])
    return [
        _node("Equal", [x, f"known_{j}"], [f"match_{j}"]),
        _node("Cast", [f"match_{j}"], [f"match_f_{j}"], to=_float_type()),
        _node("Shape", [x], [f"shape_{j}"]),
        _node("Expand", [f"half_{j}", f"shape_{j}"], [f"halves_{j}"]),
        _node("Concat", [f"match_f_{j}", f"halves_{j}"], [f"scores_{j}"], axis=1),
        _node("ArgMax", [f"scores_{j}"], [f"found_{j}"], axis=1, keepdims=1),
        _node("IsNaN", [x], [f"isnan_{j}"]),
        _node("Where", [f"isnan_{j}", f"missing_row_{j}", f"found_{j}"], [f"row_col_{j}"]),
        _node("Squeeze", [f"row_col_{j}", f"axis_1_{j}"], [f"row_{j}"]),
        _node("Gather", [f"stats_{j}", f"row_{j}"], [f"encoded_{j}"], axis=0),
    ]


def _float_type() -> int:
    return _import_onnx().TensorProto.FLOAT


def _columns(name: str, columns, nodes: list, initializers: list) -> str:
    """Appends a Gather of the input's ``columns`` (N, len(columns)); returns its name."""
    helper = _import_onnx().helper
    initializers.append(_constant(f"{name}_index", np.asarray(list(columns), np.int64)))
    nodes.append(helper.make_node("Gather", [INPUT, f"{name}_index"], [name], axis=1))
    return name


def _link_ops(objective):
    """A function (input, output, initializers) -> nodes computing the objective's
    inverse link, or None when the link has no ONNX form. A link is known by identity:
    a built-in's own function (also the same function given as a custom loss's link)."""
    link = objective.link
    if link is None:
        return lambda source, out, initializers: [_node("Identity", [source], [out])]
    builtin = by_name(objective.name)
    known = {id(fn): kind for fn, kind in _known_links().items()}
    kind = known.get(id(link))
    if kind is None and builtin is not None and builtin.link is link:
        kind = known.get(id(builtin.link))
    if kind is None:
        return None
    if kind == "sigmoid_of_twice":
        def twice(source, out, initializers):
            initializers.append(_constant("two", np.array(2.0, np.float32)))
            return [_node("Mul", [source, "two"], ["twice_raw"]),
                    _node("Sigmoid", ["twice_raw"], [out])]
        return twice
    if kind == "Softmax":
        return lambda source, out, initializers: [_node("Softmax", [source], [out], axis=-1)]
    return lambda source, out, initializers: [_node(kind, [source], [out])]


def _known_links() -> dict:
    """The built-in inverse links with an ONNX form: function -> operator (or recipe)."""
    return {jax.nn.sigmoid: "Sigmoid", jax.nn.softmax: "Softmax", jnp.exp: "Exp",
            exponential.link: "sigmoid_of_twice"}


def link_name(objective) -> str | None:
    """The inverse link's name for people and tools: "identity", "sigmoid", "softmax",
    "exp", "sigmoid(2x)", or None for a custom link with no ONNX form."""
    ops = _link_ops(objective)
    if ops is None:
        return None
    if objective.link is None:
        return "identity"
    kinds = {id(fn): kind for fn, kind in _known_links().items()}
    kind = kinds.get(id(objective.link)) or kinds.get(id(by_name(objective.name).link))
    return {"Sigmoid": "sigmoid", "Softmax": "softmax", "Exp": "exp",
            "sigmoid_of_twice": "sigmoid(2x)"}[kind]


def _node(op: str, inputs: list, outputs: list, **attributes):
    return _import_onnx().helper.make_node(op, inputs, outputs, **attributes)


def _constant(name: str, value: np.ndarray):
    return _import_onnx().numpy_helper.from_array(np.asarray(value), name)


def _value_info(name: str, model):
    onnx = _import_onnx()
    shape = ["N", int(np.shape(model.leaf_value)[-1])] if model.vector_output else ["N"]
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, shape)


def _metadata(model, n_trees: int, with_link: bool) -> dict[str, str]:
    """The graph's metadata_props: what the input columns are and what the outputs mean."""
    names = model.feature_names or tuple(f"x{j}" for j in range(model.n_features))
    labels = {}
    if model.encoder is not None:
        labels = {names[j]: [categorical.label_key(v) for v in column_labels]
                  for j, column_labels in enumerate(model.encoder.labels)
                  if column_labels is not None}
    return {
        "jaxgbt_version": __version__,
        "objective": model.objective.name,
        "link": (link_name(model.objective) or "custom") if with_link else "none",
        "n_trees": str(n_trees),
        "feature_names": json.dumps(list(names)),
        # Labelled categorical columns: X holds the label's position in this list.
        "category_labels": json.dumps(labels),
        "outputs": json.dumps([RAW, PREDICTION] if with_link else [RAW]),
    }


def _check_on_sample(proto, model, X_sample) -> None:
    """Runs the graph on X_sample with onnxruntime (when installed) and compares its
    margins with ``model.predict_raw``."""
    try:
        import onnxruntime
    except ImportError:
        warnings.warn("to_onnx: onnxruntime is not installed, so the graph was not checked "
                      "on X_sample (pip install 'jaxgbt[onnx]').", UserWarning, stacklevel=3)
        return
    rows = np.asarray(model.read_rows(X_sample), np.float32)
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    got = session.run([RAW], {INPUT: rows})[0]
    expected = np.asarray(model.predict_raw(X_sample))
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    # float32 sums of the same leaf values in another order: a few ulps per tree.
    tolerance = 1e-5 * scale * max(1, int(np.shape(model.feature)[0])) ** 0.5
    difference = float(np.max(np.abs(got - expected), initial=0.0))
    if not difference <= tolerance:
        raise ValueError(f"to_onnx: on X_sample the ONNX graph's margins differ from "
                         f"predict_raw by up to {difference:.3g} (more than float32 rounding, "
                         f"{tolerance:.3g}); the runtime reads the trees differently. Please "
                         "report this with the model.")
