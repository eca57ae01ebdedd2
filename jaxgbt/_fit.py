"""``fit``: validate -> bin -> train -> Booster, on the host, with one compiled loop."""

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt import _validation as check
from jaxgbt._derivatives import grad_hess, newton_constant
from jaxgbt.binning import apply_bins, compute_thresholds
from jaxgbt.boosting import BoostParams, TrainData, train
from jaxgbt.checkpoint import fingerprint, load_checkpoint, save_checkpoint
from jaxgbt.config import ROW_AXIS, BoostConfig
from jaxgbt.model import Booster
from jaxgbt.objectives import Link, Loss, Objective, resolve
from jaxgbt.resources import check_fit_memory
from jaxgbt.split import SplitParams


def fit(loss: "str | Objective | Loss", X, y, *, n_trees: int = 200, depth: int = 6,
        learning_rate=0.1, n_bins: int = 256, l2=1.0, l1=0.0, min_split_gain=0.0,
        min_child_weight=1.0, base_score=None, sample_weight=None, seed: int = 0,
        n_outputs: int | None = None, link: Link | None = None,
        devices: "str | Sequence[jax.Device] | None" = None, checkpoint_path=None,
        checkpoint_every: int = 100) -> Booster:
    """Fits a boosted ensemble of oblivious trees to any differentiable loss.

    Args:
      loss: a built-in name (``"squared_error"``, ``"logistic"``), an Objective, or a
        function ``loss(y_i, f_i) -> scalar`` for one row written in ``jax.numpy``.
        Gradients and Hessians come from ``jax.grad``.
      X: array of shape (N, F); NaN marks a missing value.
      y: labels, shape (N,) (or (N, ...) for a custom loss that reads more per row).
      n_trees: T, boosting rounds.
      depth: D, levels per oblivious tree (2**D leaves).
      learning_rate: shrinkage, a float or a schedule ``round -> float`` (optax).
      n_bins: B, histogram bins per feature including the missing bin, 3..256.
      l2: lambda, L2 penalty on leaf values.
      l1: alpha, L1 penalty on leaf values.
      min_split_gain: gamma; a level is split only if its summed gain exceeds it.
      min_child_weight: least Hessian sum a child must hold for its node's gain to
        count.
      base_score: starting margin; default: the constant minimising the loss.
      sample_weight: array of shape (N,), non-negative.
      seed: seeds every random choice of the fit (the rows used for binning).
      n_outputs: K for a vector-output loss, whose ``f_i`` then has shape (K,).
      link: inverse link for a custom loss, applied by ``predict``.
      devices: None for the default device, ``"all"`` for every local device, or a
        list of devices; rows are split over them and histograms summed.
      checkpoint_path: a file to save progress to every ``checkpoint_every`` rounds;
        if it already holds a checkpoint of this same fit, training resumes from it
        (see ``jaxgbt.checkpoint``).
      checkpoint_every: rounds between checkpoints (saved at the end of a compiled
        chunk of 16 rounds).

    Returns:
      A Booster.

    Raises:
      ValueError, TypeError: bad input, before anything is traced.
      MemoryError: the fit would not fit in the device's free memory.
      FloatingPointError: the loss gave NaN or infinite gradients.
    """
    objective = resolve(loss, link)
    check.check_params(n_trees, depth, n_bins)
    vector_output = n_outputs is not None
    n_outputs = 1 if n_outputs is None else check.check_int(n_outputs, "n_outputs", 1)
    X = check.check_X(X)
    y = check.check_y(y, X.shape[0], objective)
    weight = (sample_weight if check.is_traced(sample_weight)
              else check.check_sample_weight(sample_weight, X.shape[0]))
    params = _params(learning_rate, l2, l1, min_split_gain, min_child_weight)
    _check_loss_output(objective, y, n_outputs, vector_output)
    if checkpoint_path is not None:
        check.check_int(checkpoint_every, "checkpoint_every", 1)
        if any(check.is_traced(p) for p in jax.tree.leaves((params, weight, base_score))):
            raise ValueError("checkpoint_path cannot be used inside jax.vmap or jax.jit: a "
                             "checkpoint is written from the host. Fit without it there.")
    mesh = _mesh(devices)
    check_fit_memory(X.shape[0], X.shape[1], n_bins, depth, n_outputs,
                     [jax.devices()[0]] if mesh is None else list(mesh.devices.flat))

    binning_weight = None if check.is_traced(weight) else weight
    thresholds = compute_thresholds(X, n_bins, binning_weight, seed)
    bins = apply_bins(X, thresholds)
    data = TrainData(bins=jnp.asarray(bins), y=jnp.asarray(y), weight=jnp.asarray(weight))
    start = _base_score(objective, base_score, data, n_outputs, vector_output)

    config = BoostConfig(loss=objective.loss, depth=depth, n_bins=n_bins, n_outputs=n_outputs,
                         vector_output=vector_output,
                         learning_rate_schedule=learning_rate if callable(learning_rate) else None,
                         axis_name=None if mesh is None else ROW_AXIS)
    resume, on_chunk = None, None
    if checkpoint_path is not None:
        key = fingerprint(bins, y, weight, start, params, objective.name, config.depth,
                          config.n_bins, config.n_outputs, config.vector_output,
                          repr(config.learning_rate_schedule))
        resume = load_checkpoint(checkpoint_path, key)
        if resume is not None and resume.rounds_done > n_trees:
            resume = None  # a longer fit's checkpoint: its first rounds are this fit's
        on_chunk = _checkpointer(checkpoint_path, checkpoint_every, key,
                                 0 if resume is None else resume.rounds_done, n_trees)
    progress = train(config, params, data, start, n_trees, mesh, resume, on_chunk)
    trees = progress.trees

    # Split bins are at most B - 2, the last value bin, whose threshold is +inf.
    threshold = jnp.asarray(thresholds)[trees.feature, trees.split_bin]
    model = Booster(feature=trees.feature, threshold=threshold,
                    default_left=trees.default_left, split_gain=trees.gain,
                    leaf_value=trees.leaf_value, base_score=start, objective=objective,
                    n_features=X.shape[1], vector_output=vector_output)
    if not check.is_traced(model.leaf_value):
        _check_finite(model, np.asarray(progress.bad_rows), X.shape[0])
    return model


def _checkpointer(path, every: int, key: str, start: int, n_trees: int):
    last_saved = start

    def on_chunk(progress):
        nonlocal last_saved
        done = progress.rounds_done
        if done - last_saved >= every or (done == n_trees and done > last_saved):
            save_checkpoint(path, progress, key)
            last_saved = done

    return on_chunk


def _params(learning_rate, l2, l1, min_split_gain, min_child_weight) -> BoostParams:
    check.check_learning_rate(learning_rate)
    values = dict(l2=l2, l1=l1, min_split_gain=min_split_gain, min_child_weight=min_child_weight)
    for name, value in values.items():
        check.check_nonnegative(value, name)
    as_f32 = {name: jnp.asarray(value, jnp.float32) for name, value in values.items()}
    rate = jnp.asarray(0.0 if callable(learning_rate) else learning_rate, jnp.float32)
    return BoostParams(learning_rate=rate, split=SplitParams(**as_f32))


def _check_loss_output(objective: Objective, y: np.ndarray, n_outputs: int,
                       vector_output: bool) -> None:
    """The loss must map one row (y_i, f_i) to a scalar; checked by shape alone."""
    f_row = jax.ShapeDtypeStruct((n_outputs,) if vector_output else (), jnp.float32)
    y_row = jax.ShapeDtypeStruct(y.shape[1:], jnp.float32)
    try:
        out = jax.eval_shape(objective.loss, y_row, f_row)
    except Exception as error:  # noqa: BLE001 - re-raised with context
        raise TypeError(f"loss {objective.name!r} failed on one row (y_i of shape {y.shape[1:]}, "
                        f"f_i of shape {f_row.shape}): {error}") from error
    if not hasattr(out, "shape") or out.shape != ():
        shape = getattr(out, "shape", type(out).__name__)
        hint = (" For a vector-output loss pass n_outputs=K." if not vector_output else "")
        raise ValueError(f"loss {objective.name!r} must return a scalar for one row "
                         f"(y_i, f_i); it returned shape {shape}.{hint}")


def _base_score(objective: Objective, base_score, data: TrainData, n_outputs: int,
                vector_output: bool) -> jax.Array:
    if base_score is not None:
        start = jnp.broadcast_to(jnp.asarray(base_score, jnp.float32), (n_outputs,))
        if not check.is_traced(start) and not np.isfinite(np.asarray(start)).all():
            raise ValueError(f"base_score={base_score} must be finite.")
        return start
    if objective.init_score is not None:
        start = jnp.broadcast_to(objective.init_score(data.y, data.weight), (n_outputs,))
    else:
        start = newton_constant(objective.loss, vector_output, data.y, data.weight, n_outputs)
    start = start.astype(jnp.float32)
    if not check.is_traced(start):
        g, h = grad_hess(objective.loss, vector_output)(
            data.y, jnp.broadcast_to(start, (data.y.shape[0], n_outputs)))
        bad = ~(jnp.isfinite(g) & jnp.isfinite(h)).all(axis=1)
        if not np.isfinite(np.asarray(start)).all() or bool(bad.any()):
            raise FloatingPointError(
                f"loss {objective.name!r} gives NaN or infinite gradients at the starting margin "
                f"{np.asarray(start)} for {int(bad.sum())} of {bad.shape[0]} rows. Check the loss "
                "on those labels (log of 0, division by 0), or pass a finite base_score.")
    return start


def _check_finite(model: Booster, bad_rows: np.ndarray, n_rows: int) -> None:
    """Raises when any round saw non-finite gradients or produced non-finite leaves."""
    finite = np.isfinite(np.asarray(model.leaf_value)).reshape(model.n_trees, -1).all(axis=1)
    if bad_rows.any():
        first = int(np.argmax(bad_rows > 0))
        raise FloatingPointError(
            f"loss {model.objective.name!r} gave NaN or infinite gradients in round {first} "
            f"for {int(bad_rows[first])} of {n_rows} rows (and in {int((bad_rows > 0).sum())} "
            "rounds in all). The margins grew out of the loss's range: lower learning_rate, "
            "raise l2, or make the loss safe for large margins (logaddexp, clipping).")
    if not finite.all():
        first = int(np.argmin(finite))
        raise FloatingPointError(
            f"loss {model.objective.name!r} produced NaN or infinite leaf values from round "
            f"{first} on ({int((~finite).sum())} of {model.n_trees} trees). The gradient sums "
            "overflowed: lower learning_rate or raise l2.")


def _mesh(devices) -> jax.sharding.Mesh | None:
    if devices is None:
        return None
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices={devices!r}: use None, 'all', or a list of jax devices.")
        devices = jax.local_devices()
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise TypeError("devices must be a non-empty list of jax devices (jax.devices()).")
    if len(devices) == 1:
        return None
    return jax.sharding.Mesh(np.array(devices), (ROW_AXIS,))
