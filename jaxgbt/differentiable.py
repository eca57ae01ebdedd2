"""A fitted model as a differentiable function: its arrays as parameters, soft trees, fine-tuning.

``Booster.predict_raw`` is a pure function of the model's arrays and X, so ``jax.grad`` of
any loss of the predictions reaches the leaf values, and a model can sit inside a larger
JAX program. Hard routing (``x > threshold``) is piecewise constant, so its gradient with
respect to thresholds and inputs is zero almost everywhere; ``soft_predict_raw`` replaces
each split by a sigmoid of a temperature, which is differentiable in thresholds and inputs
and equals the hard model as the temperature goes to 0. ``finetune`` refits the float
arrays end to end with optax on a loss of the whole batch (non-decomposable losses such as
``pairwise_auc_loss`` included). Dimension names are those of ``core/dtypes.py``.
"""

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxgbt.core.layout import Layout
from jaxgbt.data.validation import check_predict_X, is_traced
from jaxgbt.model import Booster

if TYPE_CHECKING:  # optax is imported by ``finetune_trace`` itself: ``import jaxgbt`` skips it
    import optax

# The float arrays a user may train; the integer structure (feature, default_left) stays.
PARAMS = ("leaf_value", "threshold", "base_score")
# Trees per step of the soft-prediction scan: the [N, S, L] leaf weights of S trees live at once.
_TREES_PER_STEP = 8
# Rows per block of the pairwise AUC surrogate: memory is O(block * N), not O(N^2).
_PAIR_BLOCK = 512

_WHAT = ("leaves", "thresholds")

_MSG_THRESHOLDS_NEED_TEMPERATURE = """\
finetune(what={what!r}) needs a temperature: hard routing (x > threshold) is piecewise
constant in the thresholds, so their gradient is zero and they would not move. Train them
through the soft model, for instance

    jaxgbt.finetune(model, loss_fn, X, y, what=("leaves", "thresholds"),
                    temperature=0.1 * X.std(axis=0))   # per-feature scale, f32[F]

and read docs/research.md for the gap between the soft model and the hard one returned.
"""


# Parameters ------------------------------------------------------------------------------


def params_of(model: Booster) -> dict[str, jax.Array]:
    """The model's trainable float arrays: ``{"leaf_value": f32[T, L, K],
    "threshold": f32[T, D], "base_score": f32[K]}``."""
    return {name: getattr(model, name) for name in PARAMS}


def with_params(model: Booster, params: dict[str, jax.Array]) -> Booster:
    """A new Booster with some of its float arrays replaced (names as in ``params_of``)."""
    unknown = set(params) - set(PARAMS)
    if unknown:
        raise ValueError(f"with_params: unknown parameter(s) {sorted(unknown)}; a model's "
                         f"trainable arrays are {PARAMS}.")
    for name, value in params.items():
        if jnp.shape(value) != getattr(model, name).shape:
            raise ValueError(f"with_params: {name} has shape {jnp.shape(value)}; the model's "
                             f"has shape {getattr(model, name).shape}.")
    return dataclasses.replace(model, **params)


def as_function(model: Booster, temperature: Any = None) -> Callable[[dict, jax.Array], jax.Array]:
    """The model as a pure function ``fn(params, X) -> raw margins``, for use in larger models.

    ``params`` is a dict with any of the keys of ``params_of(model)``; missing keys keep the
    model's arrays. The integer structure (features, missing-value directions) is fixed.

    Args:
      model: a fitted Booster.
      temperature: None for the hard model (``predict_raw``: gradients reach leaf values and
        base score only), else the soft model's temperature (``soft_predict_raw``: gradients
        reach thresholds and X too), a scalar or f32[F].

    Returns:
      ``fn(params, X)`` with X of shape (N, F), returning f32[N] (or f32[N, K] for vector
      outputs). Jit, grad and vmap it as any JAX function.

    Example::

        fn = jaxgbt.as_function(model)
        params = jaxgbt.differentiable.params_of(model)
        grads = jax.grad(lambda p: jnp.mean((fn(p, X) - y) ** 2))(params)
    """

    def fn(params: dict, X) -> jax.Array:
        updated = with_params(model, params)
        if temperature is None:
            return updated.predict_raw(X)
        return soft_predict_raw(updated, X, temperature)

    return fn


# Soft trees ------------------------------------------------------------------------------


def soft_predict_raw(model: Booster, X, temperature: Any, n_trees: int | None = None) -> jax.Array:
    """Margins of the soft model: each split a sigmoid of a temperature.

    At a split testing feature f with threshold t, a row goes right with probability
    ``p = sigmoid((x_f - t) / temperature)`` and left with ``1 - p``; a leaf's weight is the
    product of p or 1 - p over the splits on its path (one per level; for depthwise trees
    the nodes the path passes; the leaf index has the first level as its high bit, as in
    ``predict_raw``), and a tree outputs
    the weighted sum of its leaf values. A missing x (NaN) takes the split's default
    direction with probability 1, as in the hard model, and so does every row at an
    infinite threshold. As the temperature goes to 0 the weights become the hard 0/1
    routing, except for rows with x exactly at a threshold (p = 1/2 there, where the hard
    model goes left). Thresholds are float32 bin edges that may sit one float32 step from
    training values, so the soft model reaches the hard one only once the temperature is
    well below that step (about 1e-8 |x|); see docs/research.md.

    Args:
      model: a fitted Booster.
      X: array of shape (N, F); NaN is a missing value. Float64 X (under
        ``jax.enable_x64``) computes in float64; anything else in float32.
      temperature: a positive scalar, or f32[F] per feature, in the units of X (features
        on different scales want a per-feature temperature, e.g. ``0.1 * X.std(axis=0)``).
      n_trees: use only the first n_trees trees (default: as ``predict_raw``, all trees or
        those up to ``best_round``).

    Returns:
      f32[N] margins (f32[N, K] for vector outputs), differentiable in X, thresholds, leaf
      values, base score and temperature.
    """
    if not is_traced(temperature):
        values = np.asarray(temperature, np.float64)
        if not (np.isfinite(values) & (values > 0)).all():
            raise ValueError(f"soft_predict_raw: temperature={temperature!r} must be finite "
                             "and > 0 (the hard model is its limit at 0).")
    X = _soft_X(model, X)
    model = _active_trees(model, n_trees)
    temperature = jnp.asarray(temperature, X.dtype)
    if temperature.ndim == 1 and temperature.shape != (model.n_features,):
        raise ValueError(f"soft_predict_raw: temperature has shape {temperature.shape}; use a "
                         f"scalar or one value per feature, shape ({model.n_features},).")
    if temperature.ndim > 1:
        raise ValueError(f"soft_predict_raw: temperature has shape {temperature.shape}; use a "
                         "scalar or one value per feature.")
    raw = _soft_raw(model, X, temperature)
    return raw if model.vector_output else raw[:, 0]


def _soft_X(model: Booster, X) -> jax.Array:
    if getattr(model, "encoder", None) is not None:
        raise ValueError("this model encodes categorical features before its trees; the soft "
                         "model and finetune read raw numeric columns only. Encode first: "
                         "use model.encoder.encode(model.encoder.to_codes(X)) with a model "
                         "rebuilt without its encoder, or fit without categorical features.")
    if not is_traced(X):
        X = check_predict_X(X, model.n_features)  # a list or object array read as numbers
    X = jnp.asarray(X)
    return X if X.dtype == jnp.float64 else X.astype(jnp.float32)


def _active_trees(model: Booster, n_trees: int | None) -> Booster:
    """The trees ``predict_raw`` would use: the first n_trees, or those up to best_round."""
    if n_trees is not None:
        return model.first_trees(n_trees)
    if model.best_round is None:
        return model
    # Masked, as in predict_raw, so that a traced best_round (vmapped models) works.
    kept = jnp.arange(model.n_trees) <= model.best_round[..., None]
    return dataclasses.replace(model, leaf_value=jnp.where(kept[..., None, None],
                                                           model.leaf_value, 0.0))


def _soft_leaf_weights(x: jax.Array, threshold: jax.Array, default_left: jax.Array,
                       temperature: jax.Array, layout: Layout) -> jax.Array:
    """f[N, S, L]: each row's weight on each leaf of S trees.

    Args:
      x: f[N, S, M], the feature each split tests, per row (M = D levels of oblivious
        trees, or 2**D - 1 nodes of depthwise trees in heap order).
      threshold, default_left, temperature: [S, M].
      layout: the trees' layout (``Booster.layout``).
    """
    missing = jnp.isnan(x)
    # A threshold of +-inf (an unused bin's edge) sends every row one way, as in the hard model.
    infinite = jnp.isinf(threshold)[None]
    hard = missing | infinite
    hard_right = jnp.where(missing, ~default_left[None], threshold[None] < 0)
    # Double where: NaN and inf never enter the sigmoid, so they cannot make gradients NaN.
    safe_threshold = jnp.where(infinite, 0, threshold[None])
    z = (jnp.where(hard, safe_threshold, x) - safe_threshold) / temperature[None]
    # sigmoid(-z) rather than 1 - sigmoid(z): keeps the digits of small left probabilities.
    p_right = jnp.where(hard, hard_right.astype(x.dtype), jax.nn.sigmoid(z))
    p_left = jnp.where(hard, (~hard_right).astype(x.dtype), jax.nn.sigmoid(-z))
    weights = jnp.ones(x.shape[:2] + (1,), x.dtype)
    for level in range(layout.depth_of(x.shape[2])):
        # One split per level, or one per node of the level (node j = weights index j).
        at = layout.level_splits(level)
        # New index = old index * 2 + (1 if right): the first level ends as the high bit.
        weights = jnp.stack([weights * p_left[..., at], weights * p_right[..., at]], axis=-1)
        weights = weights.reshape(x.shape[:2] + (-1,))
    return weights


def _soft_raw(model: Booster, X: jax.Array, temperature: jax.Array) -> jax.Array:
    """f[N, K]: base score plus every tree's leaf-weighted value."""
    n_steps = -(-model.n_trees // _TREES_PER_STEP)
    pad = n_steps * _TREES_PER_STEP - model.n_trees
    dtype = X.dtype

    def padded(a, value):
        widths = [(0, pad)] + [(0, 0)] * (a.ndim - 1)
        return jnp.pad(a, widths, constant_values=value).reshape(
            (n_steps, _TREES_PER_STEP) + a.shape[1:])

    # Padding trees have leaf value 0, so they add nothing.
    steps = (padded(model.feature, 0), padded(model.threshold.astype(dtype), 0.0),
             padded(model.default_left, True), padded(model.leaf_value.astype(dtype), 0.0))

    # Checkpointed: the backward pass recomputes a step's [N, S, L] weights instead of
    # keeping them for every step (N * T * L floats for the whole ensemble).
    @jax.checkpoint
    def step(total, trees):
        feature, threshold, default_left, leaf_value = trees
        level_temperature = temperature[feature] if temperature.ndim == 1 else (
            jnp.broadcast_to(temperature, feature.shape))
        weights = _soft_leaf_weights(X[:, feature], threshold, default_left, level_temperature,
                                     model.layout)
        return total + jnp.einsum("nsl,slk->nk", weights, leaf_value,
                                  precision=jax.lax.Precision.HIGHEST), None

    start = jnp.broadcast_to(model.base_score.astype(dtype), (X.shape[0], model.n_outputs))
    total, _ = lax.scan(step, start, steps)
    return total


# A non-decomposable loss -----------------------------------------------------------------


def pairwise_auc_loss(y, f, *, scale: float = 1.0) -> jax.Array:
    """A smooth 1 - AUC: the mean over (positive, negative) pairs of
    ``sigmoid((f_neg - f_pos) / scale)``, the soft share of misranked pairs.

    It does not decompose over rows, so boosting cannot use it, but ``finetune`` can. It is
    unchanged by adding a constant to every margin (the base score gets no gradient) and
    falls as margins spread apart, so it says nothing about calibration: pair it with a
    log loss when probabilities matter.

    Args:
      y: f32[N] labels; ``y > 0`` marks positives.
      f: f32[N] margins.
      scale: sigmoid width in margin units; as scale -> 0 the loss tends to 1 - AUC (ties
        counted one half).

    Returns:
      f32[] the loss in [0, 1]; NaN when y holds one class only.

    References:
      Yan et al. (2003), "Optimizing classifier performance via an approximation to the
      Wilcoxon-Mann-Whitney statistic"; Herschtal & Raskutti (2004).
    """
    f = jnp.asarray(f)
    dtype = f.dtype if f.dtype == jnp.float64 else jnp.float32
    f = f.astype(dtype)
    positive = (jnp.asarray(y) > 0).astype(dtype)
    negative = 1 - positive
    n_rows = f.shape[0]
    n_blocks = -(-n_rows // _PAIR_BLOCK)
    # Blocks by a clipped gather plus a mask, not jnp.pad: XLA:CPU in jaxlib 0.10.2 (its
    # YNNPACK fusion) returns NaN for a pad fused into the pairwise reduction.
    rows = jnp.arange(n_blocks * _PAIR_BLOCK)
    inside = rows < n_rows
    rows = jnp.minimum(rows, n_rows - 1)
    f_blocks = f[rows].reshape(n_blocks, _PAIR_BLOCK)
    positive_blocks = jnp.where(inside, positive[rows], 0).reshape(n_blocks, _PAIR_BLOCK)

    # Checkpointed so that the backward pass keeps O(block * N) memory, not O(N^2).
    @jax.checkpoint
    def misranked(block):
        f_pos, is_pos = block
        pair = is_pos[:, None] * negative[None, :]
        return jnp.sum(pair * jax.nn.sigmoid((f[None, :] - f_pos[:, None]) / scale))

    total = jnp.sum(lax.map(misranked, (f_blocks, positive_blocks)))
    return total / (jnp.sum(positive) * jnp.sum(negative))


# Fine-tuning -----------------------------------------------------------------------------


class FinetuneTrace(NamedTuple):
    """What ``finetune_trace`` returns.

    Attributes:
      model: the fine-tuned Booster (the step with the best validation loss when an
        eval_set was given, else the last step).
      train_loss: f32[steps], the training objective (loss plus penalty) before each
        update; NaN after an early stop.
      valid_loss: f32[steps + 1], the hard model's loss on the eval_set after 0, 1, ...
        updates (entry 0 is the model as given); NaN without an eval_set or after a stop.
      best_step: the number of updates in the returned model.
    """

    model: Booster
    train_loss: np.ndarray
    valid_loss: np.ndarray
    best_step: int


def finetune(model: Booster, loss_fn: Callable[[Any, jax.Array], jax.Array], X, y, *,
             optimizer: "optax.GradientTransformation | None" = None, steps: int = 200,
             what: Sequence[str] = ("leaves",), temperature: Any = None,
             eval_set: tuple[Any, Any] | None = None, patience: int | None = None,
             l2: float = 0.0, batch_size: int | None = None, seed: int = 0) -> Booster:
    """Refits a model's float arrays end to end with optax on a loss of the whole batch.

    See ``finetune_trace`` for the arguments; this returns only the new model. The model
    given is not changed.
    """
    return finetune_trace(model, loss_fn, X, y, optimizer=optimizer, steps=steps, what=what,
                          temperature=temperature, eval_set=eval_set, patience=patience,
                          l2=l2, batch_size=batch_size, seed=seed).model


def finetune_trace(model: Booster, loss_fn: Callable[[Any, jax.Array], jax.Array], X, y, *,
                   optimizer: "optax.GradientTransformation | None" = None, steps: int = 200,
                   what: Sequence[str] = ("leaves",), temperature: Any = None,
                   eval_set: tuple[Any, Any] | None = None, patience: int | None = None,
                   l2: float = 0.0, batch_size: int | None = None,
                   seed: int = 0) -> FinetuneTrace:
    """Refits a model's float arrays with optax, and says how the losses went.

    The tree structure (features, missing-value directions) stays. ``what=("leaves",)``
    trains the leaf values and base score through the hard model (``predict_raw``).
    Thresholds get no gradient there, so ``"thresholds"`` in ``what`` trains through
    ``soft_predict_raw`` at ``temperature``; the model returned predicts with hard splits
    at the tuned thresholds, which is not the soft model that was trained, and the
    validation loss (always of the hard model) is what tells whether it helped.

    Args:
      model: a fitted Booster; not modified.
      loss_fn: ``loss_fn(y, raw) -> scalar`` over the whole batch (or minibatch), with raw
        the margins f32[N] (f32[N, K] for vector outputs). It need not decompose over rows:
        ``pairwise_auc_loss``, a listwise ranking loss or a calibration penalty work.
      X: array of shape (N, F).
      y: labels, any pytree whose leaves have N rows; only loss_fn reads it.
      optimizer: an optax GradientTransformation (default ``optax.adam(1e-2)``).
      steps: optimizer updates at most.
      what: any of "leaves" (leaf values and base score) and "thresholds".
      temperature: None to train through the hard model, else the soft model's
        temperature (scalar or f32[F]); required with "thresholds".
      eval_set: (X_val, y_val). With it, the hard model's loss_fn on it is computed after
        every update and the best step's model is returned (possibly the model given, if
        no update helps).
      patience: stop after this many updates without a better validation loss (needs
        eval_set; None runs every step).
      l2: penalty ``l2 * sum((p - p0)^2)`` on the change of every trained array from the
        boosted model's, added to the training loss.
      batch_size: rows per step drawn without replacement (None: all rows every step).
      seed: seeds the minibatch draws.

    Returns:
      FinetuneTrace(model, train_loss, valid_loss, best_step).

    Long because the updates run as one jitted ``lax.while_loop`` whose step closes over
    the loss, the minibatch draw and the early-stopping record defined beside it.
    """
    trained = _trained_names(what, temperature)
    if patience is not None and eval_set is None:
        raise ValueError("finetune: patience needs an eval_set to watch; pass "
                         "eval_set=(X_val, y_val) or patience=None.")
    if steps < 0:
        raise ValueError(f"finetune: steps={steps}; use a count >= 0.")
    X = _soft_X(model, X)
    n_rows = X.shape[0]
    if batch_size is not None and not 1 <= batch_size <= n_rows:
        raise ValueError(f"finetune: batch_size={batch_size} is outside [1, {n_rows}], the "
                         "rows of X; use None for the whole batch.")
    X_val, y_val = (None, None) if eval_set is None else eval_set
    if X_val is not None:
        X_val = _soft_X(model, X_val)
    import optax

    optimizer = optax.adam(1e-2) if optimizer is None else optimizer
    start = {name: getattr(model, name) for name in trained}

    def predict(params, X_rows, soft: bool):
        updated = dataclasses.replace(model, **params)
        if soft:
            return soft_predict_raw(updated, X_rows, temperature)
        return updated.predict_raw(X_rows)

    def objective(params, X_rows, y_rows):
        loss = loss_fn(y_rows, predict(params, X_rows, temperature is not None))
        if l2:
            change = jax.tree.map(lambda p, p0: jnp.sum((p - p0) ** 2), params, start)
            loss = loss + l2 * sum(jax.tree.leaves(change))
        return loss

    def valid_loss(params, X_val, y_val):
        if X_val is None:
            return jnp.float32(jnp.nan)
        return jnp.asarray(loss_fn(y_val, predict(params, X_val, False)), jnp.float32)

    def batch(key, X, y):
        if batch_size is None:
            return X, y
        rows = jax.random.choice(key, n_rows, (batch_size,), replace=False)
        return X[rows], jax.tree.map(lambda a: jnp.asarray(a)[rows], y)

    @jax.jit
    def run(params, X, y, X_val, y_val):
        class Carry(NamedTuple):
            step: jax.Array
            params: dict
            opt_state: Any
            best_params: dict
            best_loss: jax.Array
            best_step: jax.Array
            train_loss: jax.Array
            valid_loss: jax.Array

        first = valid_loss(params, X_val, y_val)
        carry = Carry(jnp.int32(0), params, optimizer.init(params), params, first, jnp.int32(0),
                      jnp.full(steps, jnp.nan, jnp.float32),
                      jnp.full(steps + 1, jnp.nan, jnp.float32).at[0].set(first))
        key = jax.random.key(seed)

        def go_on(c: Carry):
            more = c.step < steps
            if patience is not None:
                more &= c.step - c.best_step < patience
            return more

        def update(c: Carry):
            X_rows, y_rows = batch(jax.random.fold_in(key, c.step), X, y)
            loss, grads = jax.value_and_grad(objective)(c.params, X_rows, y_rows)
            updates, opt_state = optimizer.update(grads, c.opt_state, c.params)
            params = optax.apply_updates(c.params, updates)
            seen = valid_loss(params, X_val, y_val)
            # Without an eval_set every step is "best", so the last step is returned.
            better = (seen < c.best_loss) | (X_val is None)
            pick = lambda new, old: jax.tree.map(lambda a, b: jnp.where(better, a, b), new, old)  # noqa: E731
            return Carry(c.step + 1, params, opt_state, pick(params, c.best_params),
                         jnp.where(better, seen, c.best_loss),
                         jnp.where(better, c.step + 1, c.best_step),
                         c.train_loss.at[c.step].set(jnp.asarray(loss, jnp.float32)),
                         c.valid_loss.at[c.step + 1].set(seen))

        c = lax.while_loop(go_on, update, carry)
        return c.best_params, c.train_loss, c.valid_loss, c.best_step

    params, train_loss, valid_losses, best_step = run(start, X, y, X_val, y_val)
    tuned = dataclasses.replace(model, **{k: v.astype(getattr(model, k).dtype)
                                          for k, v in params.items()})
    return FinetuneTrace(tuned, np.asarray(train_loss), np.asarray(valid_losses),
                         int(best_step))


def _trained_names(what: Sequence[str], temperature) -> tuple[str, ...]:
    """The Booster fields that ``what`` trains, checked on the host."""
    if isinstance(what, str):
        what = (what,)
    unknown = [w for w in what if w not in _WHAT]
    if unknown or not what:
        raise ValueError(f"finetune: what={tuple(what)!r}; choose one or more of {_WHAT}.")
    if "thresholds" in what and temperature is None:
        raise ValueError(_MSG_THRESHOLDS_NEED_TEMPERATURE.format(what=tuple(what)))
    names = ("leaf_value", "base_score") if "leaves" in what else ()
    return names + (("threshold",) if "thresholds" in what else ())
