"""The fitted model: stacked trees with float thresholds, as a pytree.

A ``Booster`` holds only what prediction needs. Its arrays are pytree leaves, so a
model can be passed through ``jit``, stacked by ``vmap``, and differentiated:
``predict_raw`` is a pure function of the leaf values and X.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.layout import Layout, Oblivious, layout
from jaxgbt.data import frames, sparse
from jaxgbt.data.categorical import Encoder
from jaxgbt.data.transfer import batch_rows, to_device, zero_padded_rows
from jaxgbt.data.validation import (
    check_base_margin,
    check_classes,
    check_predict_X,
    is_traced,
    keywords_checked,
    unmasked,
)
from jaxgbt.explain import importance, interop, shap
from jaxgbt.io import dump as tree_dump
from jaxgbt.io import model_format
from jaxgbt.io import onnx as onnx_graph
from jaxgbt.objectives import Objective, by_name

# XGBoost's, LightGBM's and CatBoost's options of predict, answered with jaxgbt's way to
# the same result (``data.validation.keywords_checked``): another method, or a keyword.
_PREDICT_CHECKED = keywords_checked(
    renamed={**dict.fromkeys(("num_iteration", "iteration_range", "ntree_limit", "ntree_end"),
                             "n_trees, the count of first trees to use"),
             "init_score": "base_margin"},
    instead={**dict.fromkeys(("output_margin", "raw_score"),
                             "predict_raw(X) gives the margins"),
             "prediction_type": "predict_raw(X) gives the margins, predict(X) the "
                                "loss's predictions (probabilities for logistic)",
             "pred_contrib": "shap_values(X) gives them",
             "pred_interactions": "shap_interaction_values(X) gives them",
             "pred_leaf": "leaf_index(X) gives them"})

# The attribute that holds a model's copy padded for prediction (``Booster._bucketed``).
_BUCKETED = "_bucketed_for_prediction"


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Booster:
    """A boosted ensemble of oblivious (or depthwise) trees.

    Attributes:
      feature: i32[T, M], the feature tested at each level (oblivious trees, M = D) or
        at each node in heap order (depthwise trees, M = 2**D - 1: node j of level d
        at index 2**d - 1 + j, its children nodes 2j and 2j + 1 of level d + 1).
      threshold: f32[T, M]; a row goes left at a split when ``x <= threshold``.
      default_left: bool[T, M], where a missing (NaN) value goes.
      split_gain: f32[T, M], the training gain of each split (0 for a pass-through
        split, which sends every row left).
      leaf_value: f32[T, L, K], leaf values with the learning rate applied.
      base_score: f32[K], the starting margin.
      objective: the Objective the model was trained with (static).
      n_features: F (static).
      vector_output: whether margins have shape (N, K) rather than (N,) (static).
      grow_policy: "oblivious", "depthwise" or "lossguide" (stored as depthwise trees),
        the layout of the split arrays (static).
      feature_names: the names of the F columns of X (a training DataFrame's, or fit's
        ``feature_names=``), or None (static). With names, ``predict`` reads a DataFrame's
        columns by name, in any order.
      best_round: i32[], the round of the best validation score when the fit had an
        eval_set and early stopping, else None. ``predict`` uses trees 0..best_round
        unless told otherwise.
      history: {"<set>:<metric>": f32[T]}: validation scores after each round, or None.
      encoder: maps raw X (N, F) to the columns the trees split on when the model has
        categorical features (``jaxgbt.data.categorical``), else None; ``feature`` then
        indexes its output, of width ``n_split_features``.
      cover: f32[T, L], each leaf's cover: the Hessian sum (sample-weighted, summed over
        the K outputs) of the training rows that reached it when its tree was grown
        (XGBoost's cover). An internal node's cover is the sum over its leaves. Read by
        TreeSHAP and ``feature_importance("cover")``, never by ``predict``; None for
        models loaded from files written before covers were stored.
      classes: the class labels of a classification model, or None (static): label k is
        class k's, the one whose probability is column k of ``predict`` (two labels for a
        one-output model, whose ``predict`` is the probability of the second). Set by
        ``JaxGBTClassifier`` and the command line, which train on class indices
        0..K-1 in place of labels of any type (``with_classes``).
    """

    feature: jax.Array
    threshold: jax.Array
    default_left: jax.Array
    split_gain: jax.Array
    leaf_value: jax.Array
    base_score: jax.Array
    objective: Objective = dataclasses.field(metadata=dict(static=True))
    n_features: int = dataclasses.field(metadata=dict(static=True))
    vector_output: bool = dataclasses.field(default=False, metadata=dict(static=True))
    grow_policy: str = dataclasses.field(default="oblivious", metadata=dict(static=True))
    feature_names: tuple[str, ...] | None = dataclasses.field(default=None,
                                                             metadata=dict(static=True))
    best_round: jax.Array | None = None
    history: dict[str, jax.Array] | None = None
    encoder: Encoder | None = None
    cover: jax.Array | None = None
    classes: tuple | None = dataclasses.field(default=None, metadata=dict(static=True))

    def __getstate__(self) -> dict:
        """The fields for pickle, a built-in objective by its name: built-ins hold
        jitted links (``jax.nn.sigmoid``) and closures (``quantile@0.9``), which pickle
        cannot find by reference. A user's objective is pickled as it is."""
        state = dict(self.__dict__)
        state.pop(_BUCKETED, None)
        if by_name(self.objective.name) == self.objective:
            state["objective"] = self.objective.name
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state["objective"], str):
            state = {**state, "objective": by_name(state["objective"])}
        for name, value in state.items():
            object.__setattr__(self, name, value)  # the dataclass is frozen

    @property
    def n_trees(self) -> int:
        return self.feature.shape[-2]

    @property
    def layout(self) -> Layout:
        """The growth policy's layout of the split arrays (``jaxgbt.core.layout``)."""
        return layout(self.grow_policy)

    @property
    def depth(self) -> int:
        return self.layout.depth_of(self.feature.shape[-1])

    @property
    def n_outputs(self) -> int:
        return self.leaf_value.shape[-1]

    @property
    def n_split_features(self) -> int:
        """Columns the trees split on: F, or the encoder's output width."""
        return self.n_features if self.encoder is None else self.encoder.n_encoded

    def _check_one_model(self) -> None:
        if self.feature.ndim > 2:
            raise ValueError(f"this Booster stacks {self.feature.shape[0]} models (from "
                             "fit_many, cv or jax.vmap(fit)); predict with one member, "
                             "model[i].predict(X), or all at once with "
                             "jax.vmap(lambda m: m.predict(X))(model).")

    def read_rows(self, X) -> np.ndarray:
        """X read on the host as [N, F] numbers: a DataFrame's columns by name, masked
        cells as NaN, labelled categorical columns as the encoder's codes; a
        scipy.sparse X densified (``predict`` densifies it in blocks of rows instead)."""
        self._check_one_model()
        X = unmasked(X)
        if sparse.is_sparse(X):
            check_predict_X(X, self.n_features)
            X = sparse.densified(X)
        if self.feature_names is not None:
            X = frames.select_columns(X, self.feature_names)  # a DataFrame's columns, by name
        if self.encoder is not None:
            return self.encoder.to_codes(X)
        if frames.is_frame(X):  # pandas, polars, pyarrow: their numbers as one matrix
            X = frames.read(X).numbers()
        return check_predict_X(X, self.n_features)  # a list of rows as an array too

    def _check_X(self, X) -> jax.Array:
        """X as the trees read it: f32[N, n_split_features] on the device. A device or
        traced array is read by position (categorical columns as the encoder's codes,
        ``encoder.to_codes``), so that predictions work under jit."""
        if is_traced(X) or isinstance(X, jax.Array):
            self._check_one_model()
            check_predict_X(X, self.n_features)  # shape and dtype: known when traced too
            X = jnp.asarray(X, jnp.float32)
        else:
            X = to_device(self.read_rows(X), np.float32)  # one copy, on every core
        return X if self.encoder is None else self.encoder.encode(X)

    def leaf_index(self, X) -> jax.Array:
        """i32[N, T]: the leaf each row reaches in each tree."""
        if sparse.is_sparse(X):  # blocks of rows densified, never the whole matrix
            check_predict_X(X, self.n_features)
            return jnp.concatenate([self.leaf_index(rows) for rows in sparse.row_blocks(X)])
        X = self._check_X(X)
        return _compiled_leaf_index(_for_prediction(self), X)

    @_PREDICT_CHECKED
    def predict_raw(self, X, n_trees: int | None = None, base_margin=None) -> jax.Array:
        """Raw margins: f32[N] for scalar models, f32[N, K] for vector outputs.

        Args:
          X: array of shape (N, F) or a DataFrame (pandas, polars, pyarrow); NaN or
            null is a missing value. With categorical features also an object array
            holding their labels. When the model has ``feature_names``, a DataFrame's
            columns are matched by name: it must hold exactly those columns, in any order.
          n_trees: use only the first n_trees trees (default: all of them, or those up
            to ``best_round`` when early stopping chose one; pass ``self.n_trees`` to
            use every tree then).
          base_margin: f32[N] (f32[N, K] for vector outputs): each row's starting
            margin, used instead of ``base_score`` (XGBoost's convention): the result
            is ``base_margin`` plus the trees. A model fitted with ``base_margin`` has
            ``base_score`` 0, so without one it gives the trees alone.
        """
        return self._predictions(X, n_trees, linked=False, base_margin=base_margin)

    @_PREDICT_CHECKED
    def predict(self, X, n_trees: int | None = None, base_margin=None) -> jax.Array:
        """Predictions: the objective's inverse link applied to ``predict_raw``
        (probabilities for ``logistic``); the raw margins when it has none.
        ``base_margin`` as for ``predict_raw``."""
        return self._predictions(X, n_trees, linked=True, base_margin=base_margin)

    def _predictions(self, X, n_trees: int | None, linked: bool,
                     base_margin=None) -> jax.Array:
        """``predict_raw`` (``linked=False``) or ``predict``.

        X read on the host (arrays, DataFrames) is padded to a bucket of rows
        (``data.transfer.batch_rows``) before it goes to the device, and the padding is cut from the
        result on the host: batches of 1 to 100,000 rows then run through at most 14
        compiled programs instead of one per batch size. A device array or a traced X
        is used as it is; a scipy.sparse X is predicted in dense blocks of rows
        (``sparse.row_blocks``).
        """
        if sparse.is_sparse(X):
            check_predict_X(X, self.n_features)
            return jnp.concatenate([self._predictions(rows, n_trees, linked)
                                    for rows in sparse.row_blocks(X)])
        if is_traced(X) or isinstance(X, jax.Array):
            X, n_rows, encoded = self._check_X(X), None, True
            margin = self._start_margin(base_margin, X.shape[0], X.shape[0])
        else:
            X = self.read_rows(X)
            n_rows, encoded = X.shape[0], False
            margin = self._start_margin(base_margin, n_rows, batch_rows(n_rows))
            X = to_device(zero_padded_rows(X), np.float32)
        if not is_traced(X) and not any(is_traced(a) for a in jax.tree.leaves(self)):
            out = _compiled_margins(self._bucketed(), X, margin,
                                    np.int32(self._trees_used(n_trees)), encoded=encoded)
        else:
            out = _compiled_margins(_for_prediction(self._cut_inside_trace(n_trees)), X,
                                    margin, encoded=encoded)
        if linked and self.objective.link is not None:
            # Outside the compiled margins, as it always was: fused into them, the link
            # rounded some predictions differently (by 6e-8).
            out = self.objective.link(out)
        if n_rows is None:
            return out
        if is_traced(out):  # the model is traced (jax.vmap over models)
            return out[:n_rows]
        return jax.device_put(np.asarray(out)[:n_rows])  # sliced on the host: no compile

    def _bucketed(self) -> "Booster":
        """The model as prediction reads it, its trees padded to a bucket on the device
        (``_padded_to_bucket``); made once per model (a Booster is immutable) and kept
        out of pickles."""
        bucketed = self.__dict__.get(_BUCKETED)
        if bucketed is None:
            bucketed = jax.device_put(_padded_to_bucket(_for_prediction(self)))
            object.__setattr__(self, _BUCKETED, bucketed)
        return bucketed

    def _check_n_trees(self, n_trees) -> None:
        if isinstance(n_trees, bool) or not isinstance(n_trees, (int, np.integer)):
            raise TypeError(f"n_trees must be an integer number of trees; got {n_trees!r}.")
        if not 0 <= n_trees <= self.n_trees:
            raise ValueError(f"n_trees={n_trees} is outside [0, {self.n_trees}], the trees "
                             "this model has.")

    def _trees_used(self, n_trees: int | None) -> int:
        """How many of the first trees a prediction sums: ``n_trees``, else those up to
        the best round, else all."""
        if n_trees is not None:
            self._check_n_trees(n_trees)
            return int(n_trees)
        return self.n_trees if self.best_round is None else int(self.best_round) + 1

    def _cut_inside_trace(self, n_trees: int | None) -> "Booster":
        """The model cut to the trees a prediction sums, inside a trace (where a
        traced ``best_round`` masks the later trees' leaves instead)."""
        if n_trees is not None:
            return self.first_trees(n_trees)
        if self.best_round is None:
            return self
        kept = jnp.arange(self.n_trees) <= self.best_round[..., None]
        return dataclasses.replace(
            self, leaf_value=jnp.where(kept[..., None, None], self.leaf_value, 0.0))

    def _start_margin(self, base_margin, n_rows: int, padded_rows: int):
        """``base_margin`` checked (``predict``'s argument), as f32[padded_rows, K]
        with zeros in the padding rows; None when not given."""
        if base_margin is None:
            return None
        margin = check_base_margin(base_margin, n_rows, self.n_outputs, self.vector_output)
        if is_traced(margin) or padded_rows == n_rows:
            return margin
        return np.concatenate([margin, np.zeros((padded_rows - n_rows, self.n_outputs),
                                                np.float32)])

    def with_classes(self, classes) -> "Booster":
        """The model with its class labels (``classes``): a sequence of distinct labels,
        strings, numbers or booleans, one per output (two for a one-output model).

        Raises:
          ValueError: the wrong number of labels, repeated labels, or a label that is
            not a string, a finite number or a boolean.
        """
        self._check_one_model()
        return dataclasses.replace(self, classes=check_classes(classes, self.n_outputs))

    def first_trees(self, n_trees: int) -> "Booster":
        """The model made of the first n_trees trees."""
        self._check_n_trees(n_trees)
        cut = {name: getattr(self, name)[..., :n_trees, :]
               for name in ("feature", "threshold", "default_left", "split_gain")}
        history = (None if self.history is None
                   else {name: values[..., :n_trees] for name, values in self.history.items()})
        cover = None if self.cover is None else self.cover[..., :n_trees, :]
        return dataclasses.replace(self, leaf_value=self.leaf_value[..., :n_trees, :, :],
                                   best_round=None, history=history, cover=cover, **cut)

    def staged_predict_raw(self, X) -> jax.Array:
        """f32[T, N] (or f32[T, N, K]): margins after each round, for learning curves."""
        X = self._check_X(X)
        leaves = _compiled_leaf_index(_for_prediction(self), X)  # [N, T]
        per_tree = jnp.take_along_axis(self.leaf_value, leaves.T[:, :, None], axis=1)  # [T, N, K]
        staged = self.base_score[None, None] + jnp.cumsum(per_tree, axis=0)
        return staged if self.vector_output else staged[..., 0]

    def __getitem__(self, index) -> "Booster":
        """Member ``index`` of a stacked model (from ``jaxgbt.fit_many``, ``jaxgbt.cv``
        or ``jax.vmap(jaxgbt.fit)``): an ordinary Booster. Slices and index arrays give
        stacked models."""
        if self.feature.ndim <= 2:
            raise TypeError("this Booster is one model; only stacked models (from fit_many, "
                            "cv or jax.vmap(fit)) can be indexed.")
        n_members = self.feature.shape[0]
        if isinstance(index, (int, np.integer)):
            # Past the end raises (JAX would clamp it), which also ends iteration.
            if not -n_members <= index < n_members:
                raise IndexError(f"member {index} is out of range: the model stacks "
                                 f"{n_members}.")
            return _compiled_member(self, jnp.asarray(index % n_members, jnp.int32))
        return jax.tree.map(lambda a: a[index], self)

    def feature_importance(self, kind: str = "gain", n_trees: int | None = None
                           ) -> np.ndarray:
        """f64[F] (f64[..., F] for stacked models): how much each column of X is used.

        Args:
          kind: "gain", the summed training gain of the splits on each column (as
            LightGBM's ``importance_type="gain"``; XGBoost's ``"total_gain"``); "split",
            how many splits test it (an oblivious level counts once); "cover", the summed
            cover of the nodes split on it (the training Hessian reaching them, as
            XGBoost's ``"total_cover"``; an oblivious level covers its whole tree).
          n_trees: the first n_trees trees (default: as ``predict``, up to
            ``best_round`` when early stopping chose one).

        A categorical column is credited with the splits on all of its encoded columns.
        Pass-through splits (gain 0, every row sent left) count for nothing.
        """
        importance.check_kind(kind)
        if n_trees is None and self.best_round is not None:
            if self.feature.ndim > 2:
                raise ValueError("stacked models may stop at different rounds: pass n_trees, "
                                 "or index a member first (model[i]).")
            n_trees = int(self.best_round) + 1
        model = self if n_trees is None else self.first_trees(n_trees)
        if kind == "cover":
            weight = importance.split_cover(
                importance.require_cover(model.cover, 'feature_importance("cover")'),
                self.layout, self.depth)
        else:
            weight = None if kind == "split" else np.asarray(model.split_gain)
        return importance.split_importance(model.feature, model.split_gain, weight,
                                           self._raw_columns(), self.n_features)

    def shap_values(self, X, n_trees: int | None = None, background=None) -> jax.Array:
        """f32[N, F] (f32[N, F, K] for vector outputs): exact TreeSHAP values of rows X.

        Each row's values and ``expected_value`` add up to its margin:
        ``shap_values(X).sum(axis=1) + expected_value == predict_raw(X)`` up to float32
        rounding. They are the path-dependent Shapley values of XGBoost's
        ``pred_contribs`` and ``shap.TreeExplainer``: a column outside a coalition is
        averaged out along the trees, each split weighing its subtrees by their training
        cover (``Booster.cover``); missing values take the learned default branch. A
        categorical column gets the value of all its encoded columns
        (``jaxgbt.explain.shap`` has the math).

        Args:
          X: rows as for ``predict_raw`` (arrays, DataFrames, categorical labels).
          n_trees: the first n_trees trees (default: as ``predict``, up to
            ``best_round`` when early stopping chose one).
          background: rows (as X) for interventional SHAP instead: the Shapley values of
            ``v(S) = mean over background rows b of f(x_S, b_rest)`` (shap's
            ``feature_perturbation="interventional"``), which need no covers; they add
            up to ``predict_raw(X) - predict_raw(background).mean(0)``. Oblivious trees
            and depthwise trees of moderate size (8**D leaf games per tree; an error says
            when there would be too many); the cost grows with the background's size only
            through its leaf ids (answer patterns).
        """
        return self._shap(X, n_trees, interactions=False, background=background)

    def shap_interaction_values(self, X, n_trees: int | None = None, background=None
                                ) -> jax.Array:
        """f32[N, F, F] (f32[N, F, F, K] for vector outputs): SHAP interaction values.

        Symmetric in the two column axes; entry (i, j), i != j, is half the Shapley
        interaction index of columns i and j (shap's and XGBoost's
        ``pred_interactions`` convention), and the diagonal holds the rest of each
        column's SHAP value, so ``shap_interaction_values(X).sum(axis=2) ==
        shap_values(X)``. Arguments as ``shap_values``.
        """
        return self._shap(X, n_trees, interactions=True, background=background)

    def explain(self, X, n_trees: int | None = None):
        """A ``shap.Explanation`` of rows X (needs the ``shap`` package): the SHAP values,
        ``expected_value`` as the base values, X as the data (categorical columns as
        codes) and the column names, so that ``shap.plots.beeswarm``, ``waterfall``,
        ``bar`` and ``scatter`` draw them. Arguments as ``shap_values``."""
        try:
            import shap as _  # noqa: F401 - fail before any work when shap is missing
        except ImportError:
            raise ImportError(interop.MSG_NO_SHAP.format(what="Booster.explain")) from None
        values = self.shap_values(X, n_trees)
        data = (np.asarray(X, np.float32) if isinstance(X, jax.Array)
                else np.asarray(self.read_rows(X), np.float32))
        model = self if n_trees is None else self.first_trees(n_trees)
        return interop.explanation(np.asarray(values), np.asarray(model.expected_value), data,
                                   self.column_names)

    @property
    def column_names(self) -> tuple[str, ...]:
        """The F column names: ``feature_names``, or ``x0, x1, ...`` when there are none."""
        return self.feature_names or tuple(f"x{j}" for j in range(self.n_features))

    @property
    def expected_value(self) -> jax.Array:
        """f32[] (f32[K] for vector outputs): the margin TreeSHAP starts from, the base
        score plus every tree's cover-weighted mean leaf value (the trees ``predict``
        uses)."""
        model = self._explained(None, "expected_value")
        value = _compiled_expected_value(_for_explaining(model), self._raw_columns())
        return value if self.vector_output else value[0]

    def _explained(self, n_trees: int | None, what: str, needs_cover: bool = True
                   ) -> "Booster":
        """The model whose trees an explanation reads (as ``predict``), checked."""
        if self.feature.ndim > 2:
            raise TypeError(f"{what} explains one model; this Booster stacks "
                            f"{self.feature.shape[0]}: index a member first (model[i]).")
        if needs_cover:
            importance.require_cover(self.cover, what)
        if n_trees is None and self.best_round is not None:
            n_trees = int(self.best_round) + 1
        return self if n_trees is None else self.first_trees(n_trees)

    def _shap(self, X, n_trees: int | None, interactions: bool, background=None
              ) -> jax.Array:
        what = "shap_interaction_values" if interactions else "shap_values"
        model = self._explained(n_trees, what, needs_cover=background is None)
        X = self._check_X(X)
        if model.n_trees == 0:  # no trees: nothing to share out
            width = (self.n_features,) * (2 if interactions else 1)
            values = jnp.zeros((X.shape[0],) + width + (self.n_outputs,), jnp.float32)
        elif background is None:
            values = _compiled_shap(_for_explaining(model), X, self._raw_columns(),
                                    interactions)
        else:
            if not isinstance(model.layout, Oblivious) and not shap.interventional_fits(
                    model.n_trees, model.depth, interactions):
                raise ValueError(f"{what}(X, background=...) on depthwise trees of depth "
                                 f"{model.depth} would play {8**model.depth:,} leaf games per "
                                 "tree; it is limited to shallower trees. Leave background "
                                 "out for the path-dependent values.")
            try:
                background = self._check_X(background)
            except (ValueError, TypeError) as error:  # the message says X: say which
                raise type(error)(f"background: {error}") from None
            if background.shape[0] == 0:
                raise ValueError("background must hold at least one row.")
            values = _compiled_interventional(_for_explaining(model), X, background,
                                              self._raw_columns(), interactions)
        return values if self.vector_output else values[..., 0]

    def _raw_columns(self) -> tuple[int, ...]:
        """For each split column, the column of X it is made from."""
        if self.encoder is None:
            return tuple(range(self.n_features))
        return tuple(raw for raw in range(self.n_features)
                     for _ in self.encoder.encoded_columns(raw))

    def save(self, path) -> None:
        """Writes the model to ``path`` (see ``jaxgbt.io.model_format`` for the format)."""
        model_format.save(self, path)

    def __repr__(self) -> str:
        # The default layout is left out, as it was before depthwise trees existed.
        policy = "" if isinstance(self.layout, Oblivious) else f", grow_policy={self.grow_policy!r}"
        return (f"Booster(objective={self.objective.name!r}, n_trees={self.n_trees}, "
                f"depth={self.depth}{policy}, n_features={self.n_features}, "
                f"n_outputs={self.n_outputs})")

    def to_onnx(self, X_sample=None, **options):
        """The model as an ``onnx.ModelProto`` (``jaxgbt.io.onnx.to_onnx``; needs the
        ``onnx`` extra)."""
        return onnx_graph.to_onnx(self, X_sample, **options)

    def dump(self, path=None) -> dict:
        """Every tree as readable JSON (``jaxgbt.io.dump.dump``), written to ``path``
        when given."""
        return tree_dump.dump(self, path)


def _goes_right(x: jax.Array, threshold: jax.Array, default_left: jax.Array) -> jax.Array:
    """bool: which float values x take the right branch (NaN: the split's default)."""
    return jnp.where(jnp.isnan(x), ~default_left, x > threshold)


# Prediction (margins and leaf ids alike) works on blocks of rows small enough to stay
# in cache: each block is transposed to feature-major, so a level's test reads one
# contiguous row of it, and trees go in steps of _TREES_PER_STEP. Two blocks at a time
# are independent programs, which XLA's CPU runtime runs side by side on its threads.
# docs/benchmarks.md (levers table) has the measurements against one pass over all rows.
_TREES_PER_STEP = 8
_BLOCK_ROWS = 16384
_PARALLEL_BLOCKS = 2


# The values a padding tree holds in each array: a pass-through split with leaves of 0,
# so it adds nothing to any margin.
_PADDING_TREE = dict(feature=0, threshold=0.0, default_left=True, split_gain=0.0,
                     leaf_value=0.0)


def _tree_steps(model: "Booster") -> tuple[jax.Array, ...]:
    """The split and leaf arrays padded to whole steps: [n_steps, S, ...] each."""
    n_steps = -(-model.n_trees // _TREES_PER_STEP)
    pad = n_steps * _TREES_PER_STEP - model.n_trees

    def padded(a, value):
        widths = [(0, pad)] + [(0, 0)] * (a.ndim - 1)
        return jnp.pad(a, widths, constant_values=value).reshape(
            (n_steps, _TREES_PER_STEP) + a.shape[1:])

    return tuple(padded(getattr(model, name), _PADDING_TREE[name])
                 for name in ("feature", "threshold", "default_left", "leaf_value"))


def _block_leaves(model: "Booster", x_t: jax.Array, feature, threshold, default_left
                  ) -> jax.Array:
    """i32[S, B]: the leaf of each of a block's rows (features ``x_t`` f32[F, B]) in S
    trees (split arrays [S, M])."""
    return model.layout.leaf_ids(x_t, (feature, threshold, default_left), model.depth,
                                 _goes_right)


def _predict_block(model: "Booster", steps, n_used: jax.Array | None, x: jax.Array
                   ) -> jax.Array:
    """f32[B, K]: the sum of every tree's leaf value for a block of rows x f32[B, F]; with
    ``n_used``, only the steps that hold the first ``n_used`` trees are run."""
    x_t = x.T

    def step(total, trees):
        feature, threshold, default_left, leaf_value = trees
        leaves = _block_leaves(model, x_t, feature, threshold, default_left)  # [S, B]
        values = leaf_value[jnp.arange(_TREES_PER_STEP)[:, None], leaves]  # [S, B, K]
        return total + jnp.sum(values, axis=0), None

    zeros = jnp.zeros((x.shape[0], model.n_outputs), jnp.float32)
    if n_used is None:
        total, _ = jax.lax.scan(step, zeros, steps)
        return total
    # The same steps in the same order as the scan (so the same floats), as a loop whose
    # trip count is traced: a bucket's padding trees are never visited.
    n_steps = (n_used + _TREES_PER_STEP - 1) // _TREES_PER_STEP
    return jax.lax.fori_loop(0, n_steps, lambda i, total: step(
        total, tuple(a[i] for a in steps))[0], zeros)


def _block_leaf_index(model: "Booster", steps, x: jax.Array) -> jax.Array:
    """i32[B, T]: the leaf of each row of a block x f32[B, F] in every tree."""
    x_t = x.T

    def step(carry, trees):
        feature, threshold, default_left, _ = trees
        return carry, _block_leaves(model, x_t, feature, threshold, default_left)  # [S, B]

    _, leaves = jax.lax.scan(step, None, steps)  # [n_steps, S, B]
    return leaves.reshape(-1, x.shape[0])[:model.n_trees].T


def _by_blocks(block_fn, X: jax.Array, width: int, dtype) -> jax.Array:
    """[N, width]: ``block_fn`` (rows f32[B, F] -> [B, width]) over X f32[N, F], in
    blocks of rows, _PARALLEL_BLOCKS at a time."""
    n_rows = X.shape[0]
    # A symbolic row count (jax.export with batch size "n") takes one block of all rows.
    if not isinstance(n_rows, int) or n_rows <= _BLOCK_ROWS:
        return block_fn(X)
    per_step = min(_BLOCK_ROWS * _PARALLEL_BLOCKS, n_rows)
    block_rows = -(-per_step // _PARALLEL_BLOCKS)

    def parallel_blocks(out, i):
        # Rows are read in place (no padded copy of X): the last step starts early
        # enough to end at the last row, and so may redo rows of the step before
        # it, writing the same results again.
        first = jnp.minimum(i * per_step, n_rows - per_step)
        xs = jax.lax.dynamic_slice_in_dim(X, first, per_step, axis=0)
        results = jnp.concatenate([block_fn(xs[j * block_rows:(j + 1) * block_rows])
                                   for j in range(_PARALLEL_BLOCKS)])
        return jax.lax.dynamic_update_slice_in_dim(out, results, first, axis=0), None

    out, _ = jax.lax.scan(parallel_blocks, jnp.zeros((n_rows, width), dtype),
                          jnp.arange(-(-n_rows // per_step)))
    return out


def _predict_raw(model: Booster, X: jax.Array, n_used: jax.Array | None = None) -> jax.Array:
    """f32[N, K]: base score plus the sum of every tree's leaf value, or of the first
    ``n_used`` (i32[], traced) trees' when given."""
    if n_used is not None:  # the later trees' leaves add exact zeros in the last step
        used = jnp.arange(model.n_trees) < n_used
        model = dataclasses.replace(
            model, leaf_value=jnp.where(used[:, None, None], model.leaf_value, 0.0))
    steps = _tree_steps(model)
    total = _by_blocks(functools.partial(_predict_block, model, steps, n_used), X,
                       model.n_outputs, jnp.float32)
    return model.base_score.astype(jnp.float32)[None] + total


def _leaf_index(model: Booster, X: jax.Array) -> jax.Array:
    """i32[N, T]: the leaf each row reaches in each tree, by the blocks of ``_predict_raw``."""
    steps = _tree_steps(model)
    return _by_blocks(functools.partial(_block_leaf_index, model, steps), X, model.n_trees,
                      jnp.int32)


def _for_prediction(model: Booster) -> Booster:
    """The model without its training record, names and covers, which prediction does
    not read (so that models differing only in them share one compiled program)."""
    return dataclasses.replace(model, best_round=None, history=None, feature_names=None,
                               cover=None, classes=None)


def _for_explaining(model: Booster) -> Booster:
    """The model without the fields explanations do not read (its covers kept)."""
    return dataclasses.replace(model, best_round=None, history=None, feature_names=None,
                               classes=None)


@functools.partial(jax.jit, static_argnames=("raw_columns", "interactions"))
def _compiled_shap(model: Booster, X: jax.Array, raw_columns: tuple[int, ...],
                   interactions: bool) -> jax.Array:
    """f32[N, F, K] (or [N, F, F, K]): TreeSHAP (interaction) values of rows X f32[N, F_split].

    Oblivious trees gather from a table of their L answer patterns, by the rows' leaves
    (``_leaf_index``); depthwise trees answer each path's splits row by row."""
    paths = shap.tree_paths(model.feature, model.cover, model.leaf_value,
                            jnp.asarray(raw_columns, jnp.int32), model.layout, model.depth)
    leaves = _leaf_index(model, X) if isinstance(model.layout, Oblivious) else None
    return shap.tree_shap(paths, X, leaves, (model.feature, model.threshold, model.default_left),
                          model.layout, model.depth, model.n_features, interactions)


@functools.partial(jax.jit, static_argnames="raw_columns")
def _compiled_expected_value(model: Booster, raw_columns: tuple[int, ...]) -> jax.Array:
    """f32[K]: ``shap.expected_value`` of the model's trees, as one program: eagerly, its
    two dozen small operations compiled one program each."""
    paths = shap.tree_paths(model.feature, model.cover, model.leaf_value,
                            jnp.asarray(raw_columns, jnp.int32), model.layout, model.depth)
    return shap.expected_value(paths, model.base_score)


@functools.partial(jax.jit, static_argnames=("raw_columns", "interactions"))
def _compiled_interventional(model: Booster, X: jax.Array, background: jax.Array,
                             raw_columns: tuple[int, ...], interactions: bool) -> jax.Array:
    """f32[N, F, K] (or [N, F, F, K]): interventional SHAP (interaction) values of rows X
    against background rows f32[B, F_split], for oblivious trees: the background enters
    as the share of its rows at each leaf."""
    n_leaves = 2**model.depth
    cover = jnp.ones((model.n_trees, n_leaves), jnp.float32)  # the games read no cover
    paths = shap.tree_paths(model.feature, cover, model.leaf_value,
                            jnp.asarray(raw_columns, jnp.int32), model.layout, model.depth)
    trees = jnp.arange(model.n_trees)
    splits = (model.feature, model.threshold, model.default_left)
    if isinstance(model.layout, Oblivious):
        leaves = _leaf_index(model, background)  # [B, T]
        counts = jnp.zeros((model.n_trees, n_leaves), jnp.float32).at[
            trees[None, :], leaves].add(1.0)
        rows_leaves = _leaf_index(model, X)
    else:  # per leaf, the background's answer patterns along its path
        patterns = shap.path_patterns(*splits, background, model.layout, model.depth)
        counts = jnp.zeros((model.n_trees, n_leaves, n_leaves), jnp.float32).at[
            trees[None, :, None], jnp.arange(n_leaves)[None, None, :], patterns].add(1.0)
        rows_leaves = None
    return shap.tree_shap(paths, X, rows_leaves, splits, model.layout, model.depth,
                          model.n_features, interactions,
                          background_share=counts / background.shape[0])


# Compiled once per model shape and X shape: eagerly, each prediction would dispatch the
# scan and gathers op by op.
_compiled_predict_raw = jax.jit(_predict_raw)


@jax.jit
def _compiled_member(models: Booster, index: jax.Array) -> Booster:
    """Member ``index`` (i32[], in range) of stacked models, as one program for every
    index: eagerly, each array's slice and squeeze compiled programs of their own."""
    return jax.tree.map(lambda a: jax.lax.dynamic_index_in_dim(a, index, keepdims=False),
                        models)


@functools.partial(jax.jit, static_argnames="encoded")
def _compiled_margins(model: Booster, X: jax.Array, start_margin: jax.Array | None = None,
                      n_used: jax.Array | None = None, *, encoded: bool) -> jax.Array:
    """f32[N] (f32[N, K] for vector outputs): the margins of X f32[N, F] (categorical
    columns as raw codes unless ``encoded``), as one program; with ``start_margin``
    f32[N, K], that margin replaces ``base_score``; with ``n_used`` i32[], only the
    first ``n_used`` trees count (``_padded_to_bucket``)."""
    if not encoded and model.encoder is not None:
        X = model.encoder.encode(X)
    if start_margin is not None:
        model = dataclasses.replace(model, base_score=jnp.zeros_like(model.base_score))
    raw = _predict_raw(model, X, n_used)
    if start_margin is not None:
        raw = raw + start_margin
    return raw if model.vector_output else raw[:, 0]


def bucket_trees(n_trees: int) -> int:
    """The tree slots a model is padded to for prediction: a power of two of whole
    steps of ``_TREES_PER_STEP`` trees."""
    n_steps = max(1, -(-n_trees // _TREES_PER_STEP))
    return _TREES_PER_STEP << (n_steps - 1).bit_length()


def _padded_to_bucket(model: Booster) -> Booster:
    """A concrete model's trees padded on the host to ``bucket_trees`` slots (zero
    leaves): models of 65 to 128 trees, and every ``n_trees`` they are predicted with,
    share one compiled program, whose loop stops after the trees in use."""
    n_slots = bucket_trees(model.n_trees)

    def padded(name):
        a = np.asarray(getattr(model, name))
        out = np.full((n_slots, *a.shape[1:]), _PADDING_TREE[name], a.dtype)
        out[:a.shape[0]] = a
        return out

    return dataclasses.replace(model, **{name: padded(name) for name in _PADDING_TREE})

_compiled_leaf_index = jax.jit(_leaf_index)


def load(path, link=None) -> Booster:
    """The model written to ``path`` by ``Booster.save`` / ``jaxgbt.save``; ``link`` and
    the errors raised are those of ``io.model_format.read_model``."""
    return Booster(**model_format.read_model(path, link))
