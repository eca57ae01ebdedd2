"""Random forests: bootstrap rows and sampled features per tree, trees grown in
parallel (vmap over seeds), predictions averaged; out-of-bag predictions and score.

A forest tree is ``jaxgbt.fit`` with one round: learning rate 1, a small ``l2``, a start
at the label mean, Poisson(1) bootstrap counts as row weights (``sampling="poisson"``)
and ``colsample_bylevel`` features per level (``colsample_bynode`` per node for
depthwise trees, as scikit-learn draws ``max_features`` per node). With squared error a
leaf is then the bootstrap mean of its labels, and a level's gain is the decrease in squared error;
for classification the labels are one-hot, so leaves hold class frequencies and the
gain, summed over classes, is the decrease in Gini impurity (as in scikit-learn's
``RandomForestClassifier``). ``fit_many`` grows every tree in one vmapped program over
the trees' seeds; the members' trees are then stacked into one Booster with leaves
scaled by 1/T, so ``predict`` is the forest's average.

A tree's bootstrap counts are drawn inside ``fit`` from its seed (round 0's row key,
``jaxgbt.core.sampling``), so ``bootstrap_counts`` draws them again, exactly, for the
out-of-bag predictions: each row averaged over the trees that did not see it.

Poisson(1) counts are the bootstrap's large-N limit (scikit-learn draws N rows with
replacement: multinomial counts); a row is left out of a tree with probability
e^-1 = 0.368 in both.
"""

import dataclasses
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt import objectives, spec
from jaxgbt.core.layout import GROW_POLICIES, layout
from jaxgbt.core.sampling import SamplingParams, round_keys, row_multiplier
from jaxgbt.data import categorical, frames
from jaxgbt.data import validation as check
from jaxgbt.data.dataset import read_shared_X
from jaxgbt.model import Booster
from jaxgbt.sweeps import fit_many, max_batch_size


class Forest(NamedTuple):
    """What ``fit_forest`` returns.

    Attributes:
      model: a Booster of T trees whose ``predict`` is the average of the trees:
        f32[N] for regression (f32[N, K] for K targets), class probabilities f32[N, C]
        for classification.
      oob_prediction: the same shape for the training rows, each averaged over the trees
        whose bootstrap left it out; NaN for a row every tree saw.
      oob_score: R^2 (regression, averaged over targets) or accuracy (classification)
        of ``oob_prediction`` on the rows that have one.
      seeds: u32[T], tree t's seed (it draws the tree's bootstrap and features).
      classes: the sorted class labels (classification), else None.
    """

    model: Booster
    oob_prediction: np.ndarray
    oob_score: float
    seeds: np.ndarray
    classes: np.ndarray | None

    def __getattr__(self, name: str):
        # Called only for a name the forest lacks: a model's methods (``forest.predict``,
        # as on scikit-learn's forests) are answered with the model that has them.
        missing = f"'Forest' object has no attribute {name!r}"
        if name in ("predict", "predict_proba"):
            raise AttributeError(
                f"{missing}; the fitted trees are forest.model, a Booster: "
                "forest.model.predict(X) averages them (class probabilities f32[N, C] for "
                "classification, columns in the order of forest.classes)")
        if not name.startswith("_") and hasattr(Booster, name):
            raise AttributeError(f"{missing}; the fitted trees are forest.model, a Booster: "
                                 f"use forest.model.{name}")
        raise AttributeError(missing)


@spec.keywords_checked
def fit_forest(X, y, *, task: str = "regression", n_trees: int = 100, depth: int = 8,
               grow_policy: str = "oblivious", max_leaves: int | None = None,
               max_features: "float | str | None" = None, n_bins: int = 64,
               min_child_weight: float = 1.0, l2: float = 1e-3, seed: int = 0,
               batch_size: int | None = None) -> Forest:
    """Fits a random forest of oblivious (or depthwise) trees.

    Example::

        forest = jaxgbt.fit_forest(X, y, task="classification", n_trees=200, depth=8)
        proba = forest.model.predict(X_test)          # f32[N_test, C]
        forest.oob_score                              # out-of-bag accuracy

    Args:
      X: array of shape (N, F) or a DataFrame (as for ``jaxgbt.fit``: categorical
        columns are found and encoded); NaN marks a missing value.
      y: f32[N] (or f32[N, K] targets) for regression; labels f32[N] for
        classification.
      task: "regression" or "classification".
      n_trees: T.
      depth: D, levels per tree (2**D leaves; oblivious trees need more levels than
        ordinary ones for the same fit).
      grow_policy: "oblivious", "depthwise" (each node its own split, as in
        scikit-learn's forests but grown to a fixed depth) or "lossguide" (each node
        its own split, the leaf that gains most first, up to ``max_leaves`` leaves).
      max_leaves: for "lossguide", as in ``jaxgbt.fit``.
      max_features: fraction of the features each level (oblivious) or node
        (depthwise, lossguide) may choose from, or "sqrt" for sqrt(F) of them; default: "sqrt" for
        classification, 1.0 for regression (scikit-learn's defaults).
      n_bins: B, histogram bins per feature including the missing bin. A forest tree
        costs about F x 2**D x B per level whatever N is, so fewer bins than for
        boosting (256) keep small-data forests fast.
      min_child_weight: least bootstrap count in a child for its node's gain to count.
      l2: L2 penalty on leaves: a leaf is sum(w y) / (sum(w) + l2) around the start, so
        keep it small.
      seed: seeds the trees' seeds.
      batch_size: trees grown together (see ``jaxgbt.fit_many``); None grows as many
        at once as the free memory holds (all T on small data).

    Returns:
      A Forest.
    """
    if task not in ("regression", "classification"):
        raise ValueError(f"task={task!r}: use 'regression' or 'classification'.")
    check.check_int(n_trees, "n_trees", 1)
    check.check_int(seed, "seed", 0, 2**32 - 1)
    check.check_choice(grow_policy, "grow_policy", GROW_POLICIES)
    X = read_shared_X(X)  # read once for every batch of trees
    target, classes, objective = _targets(task, y, X.shape[0])
    colsample = _feature_fraction(max_features, task, X.shape[1])
    seeds = np.random.SeedSequence(seed).generate_state(n_trees)  # u32[T]
    start = target.mean(axis=0)  # an empty leaf predicts the label mean
    if batch_size is None:  # as many trees at once as memory allows
        n_outputs = target.shape[1] if target.ndim == 2 else 1
        fits = max_batch_size(X.shape[0], X.shape[1], n_outputs,
                              dict(n_bins=n_bins, depth=depth))[0]
        n_batches = -(-n_trees // fits)
        batch_size = -(-n_trees // n_batches)  # equal batches: little padding
    # The bootstrap counts' program (1.5-2 s to compile: jax.random.poisson's two
    # samplers) compiles on another thread while the trees grow.
    with ThreadPoolExecutor(max_workers=1) as pool:
        counts_program = pool.submit(_counts_program, len(seeds), X.shape[0])
        members = _grown_trees(objective, X, target, seeds, batch_size, depth, n_bins, l2,
                               min_child_weight, start, grow_policy, max_leaves, colsample)
        counts = counts_program.result()(jnp.asarray(seeds))
    model = _average(members)
    # The rows as the trees read them (categorical columns as codes, a sparse X
    # densified), under jit.
    rows = model.read_rows(X)
    oob = _compiled_oob(model, jnp.asarray(rows), counts)
    return Forest(model, np.asarray(oob), _oob_score(task, target, oob), seeds, classes)


def _grown_trees(objective, X, target, seeds, batch_size, depth, n_bins, l2,
                 min_child_weight, start, grow_policy, max_leaves, colsample) -> Booster:
    """The forest's trees: T one-round fits, vmapped over their seeds (stacked)."""
    return fit_many(objective, X, target, params={"seed": seeds}, batch_size=batch_size,
                       n_trees=1, depth=depth, n_bins=n_bins, learning_rate=1.0, l2=l2,
                       min_child_weight=min_child_weight, base_score=start,
                       sampling="poisson", subsample=1.0, grow_policy=grow_policy,
                       max_leaves=max_leaves,
                       # A random forest's trees split on their best candidates, and
                       # only where that lowers the impurity, as scikit-learn's nodes do.
                       random_strength=0.0, min_split_gain=0.0,
                       # One-round trees: the target statistics' orders (the reason for
                       # them below 5,000 rows) need many rounds, so columns stay one-hot.
                       one_hot_max_size=categorical.ONE_HOT_MAX_SIZE,
                       **{layout(grow_policy).finest_colsample: colsample})


@functools.cache
def _counts_program(n_trees: int, n_rows: int):
    """``bootstrap_counts`` compiled for T seeds and N rows."""
    seeds = jax.ShapeDtypeStruct((n_trees,), jnp.uint32)
    return jax.jit(bootstrap_counts, static_argnums=1).lower(seeds, n_rows).compile()


def bootstrap_counts(seeds, n_rows: int, subsample: float = 1.0) -> jax.Array:
    """f32[T, N]: each tree's Poisson bootstrap count per row, drawn again from its seed
    exactly as ``fit(..., sampling="poisson", seed=seeds[t])`` drew them in round 0."""

    def counts(seed):
        one = jnp.float32(1.0)
        params = SamplingParams(key=jax.random.PRNGKey(seed), subsample=jnp.float32(subsample),
                                colsample_bytree=one, colsample_bylevel=one,
                                goss_top_rate=one, goss_other_rate=one)
        row_key, _ = round_keys(params, jnp.int32(0))
        return row_multiplier(row_key, "poisson", params, jnp.zeros((n_rows, 1), jnp.float32))

    return jax.vmap(counts)(jnp.asarray(seeds, jnp.uint32))


def oob_predict(model: Booster, X, counts: jax.Array) -> jax.Array:
    """Out-of-bag predictions of a forest: row i averaged over the trees t with
    ``counts[t, i] == 0``; NaN where there is none.

    Args:
      model: a forest from ``fit_forest`` (leaves scaled by 1/T).
      X: the training rows, f32[N, F].
      counts: f32[T, N], from ``bootstrap_counts``.

    Returns:
      f32[N] (f32[N, K] for vector outputs).
    """
    leaves = model.leaf_index(X)  # [N, T]
    # Tree t alone predicts base + T * leaf_value[t] (the forest stores leaves / T).
    per_tree = model.n_trees * jnp.take_along_axis(model.leaf_value, leaves.T[:, :, None],
                                                   axis=1)  # [T, N, K]
    out_of_bag = (counts == 0).astype(jnp.float32)  # [T, N]
    n_oob = jnp.sum(out_of_bag, axis=0)  # [N]
    total = jnp.einsum("tn,tnk->nk", out_of_bag, per_tree, precision=jax.lax.Precision.HIGHEST)
    mean = model.base_score[None] + total / jnp.maximum(n_oob, 1.0)[:, None]
    mean = jnp.where((n_oob > 0)[:, None], mean, jnp.nan)
    return mean if model.vector_output else mean[:, 0]


@jax.jit
def _compiled_oob(model: Booster, X: jax.Array, counts: jax.Array) -> jax.Array:
    # One program for the averages (eagerly, each op compiles alone).
    return oob_predict(model, X, counts)


def _targets(task: str, y, n_rows: int):
    """(f32 training targets, classes or None, objective)."""
    if task == "classification":
        labels = frames.as_array(y)
        if labels.shape == (n_rows, 1):  # a column vector, a one-column DataFrame
            labels = labels[:, 0]
        if labels.shape != (n_rows,):
            raise ValueError(f"task='classification' needs one label per row, shape "
                             f"({n_rows},); got {labels.shape}.")
        classes = np.unique(labels)
        if classes.size < 2:
            raise ValueError(f"task='classification' needs at least 2 classes in y; got "
                             f"{classes.tolist()}.")
        one_hot = (labels[:, None] == classes[None]).astype(np.float32)
        return one_hot, classes, objectives.multi_squared_error
    target = check._as_numeric_array(y, "y").astype(np.float32)
    if target.ndim not in (1, 2) or target.shape[0] != n_rows:
        raise ValueError(f"y must have shape ({n_rows},) or ({n_rows}, K); got {target.shape}.")
    if not np.isfinite(target).all():
        raise ValueError("y contains NaN or infinite values; the forest needs finite targets.")
    objective = objectives.multi_squared_error if target.ndim == 2 else objectives.squared_error
    return target, None, objective


def _feature_fraction(max_features, task: str, n_features: int) -> float:
    if max_features is None:
        max_features = "sqrt" if task == "classification" else 1.0
    if max_features == "sqrt":
        return float(np.sqrt(n_features) / n_features)
    if isinstance(max_features, str):
        raise ValueError(f"max_features={max_features!r}: use a fraction in (0, 1] or 'sqrt'.")
    return float(check.check_rate(max_features, "max_features"))


def _average(members: Booster) -> Booster:
    """One Booster of the members' single trees, leaves scaled by 1/T: its margin is the
    members' average."""
    n_trees = members.feature.shape[0]

    # On the host: on the device each reshape, slice and division would compile a
    # program of its own, for every new T.
    def flat(a):  # [T, 1, ...] -> [T, ...]
        a = np.asarray(a)
        return a.reshape((n_trees,) + a.shape[2:])

    # Member 0 supplies every field the trees do not (base score, objective, ...).
    first = jax.tree.map(lambda a: jax.device_put(np.asarray(a)[0]), members)
    leaf_value = flat(members.leaf_value) / np.float32(n_trees)
    return dataclasses.replace(
        first, **{name: jax.device_put(flat(getattr(members, name)))
                  for name in ("feature", "threshold", "default_left", "split_gain")},
        leaf_value=jax.device_put(leaf_value),
        cover=None if members.cover is None else jax.device_put(flat(members.cover)))


def _oob_score(task: str, target: np.ndarray, oob: jax.Array) -> float:
    oob = np.asarray(oob, np.float64)
    seen = ~np.isnan(oob.reshape(oob.shape[0], -1)).any(axis=1)
    truth, oob = target[seen].astype(np.float64), oob[seen]
    if task == "classification":
        return float(np.mean(np.argmax(oob, axis=1) == np.argmax(truth, axis=1)))
    truth, oob = truth.reshape(truth.shape[0], -1), oob.reshape(oob.shape[0], -1)
    residual = np.sum((truth - oob) ** 2, axis=0)
    total = np.sum((truth - truth.mean(axis=0)) ** 2, axis=0)
    return float(np.mean(1.0 - residual / total))
