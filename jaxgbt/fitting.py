"""``fit``: validate -> bin -> train -> Booster, on the host, with one compiled loop."""

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.data import validation as check
from jaxgbt.data import categorical
from jaxgbt.evaluation import metrics as metrics_module
from jaxgbt.objectives.derivatives import CURVATURES, newton_constant
from jaxgbt.data.binning import apply_bins, compute_thresholds
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.engine.compile import compile_ahead, compiled_derivatives
from jaxgbt.engine.loop import train
from jaxgbt.io.checkpoint import fingerprint, load_checkpoint, save_checkpoint
from jaxgbt.core.config import ROW_AXIS, BoostConfig
from jaxgbt.core.constraints import interaction_sets
from jaxgbt.evaluation.evaluator import EvalSet, Evaluator, resolve_metrics
from jaxgbt.model import Booster
from jaxgbt.objectives import Link, Loss, Objective, resolve
from jaxgbt.core.ordered import BOOSTING_TYPES, compiled_row_order
from jaxgbt.engine.resources import check_fit_memory, release_free_heap
from jaxgbt.core.sampling import SamplingParams, sample_capacity
from jaxgbt.core.split import SplitParams
from jaxgbt.core.tree import GROW_POLICIES


def fit(loss: "str | Objective | Loss", X, y, *, n_trees: int = 200, depth: int = 6,
        grow_policy: str = "oblivious", learning_rate=0.1, n_bins: int = 256, l2=1.0, l1=0.0,
        min_split_gain=0.0, min_child_weight=1.0, base_score=None, sample_weight=None,
        seed: int = 0,
        boosting: str = "plain",
        n_outputs: int | None = None, link: Link | None = None, hessian: str | None = None,
        hessian_floor=0.0, group=None, subsample=1.0, sampling: str = "bernoulli",
        goss_top_rate=0.2, goss_other_rate=0.1, colsample_bytree=1.0, colsample_bylevel=1.0,
        colsample_bynode=1.0,
        monotone_constraints=None, interaction_constraints=None, categorical_features=None,
        one_hot_max_size: int = categorical.ONE_HOT_MAX_SIZE,
        eval_set=None, eval_metric=None, early_stopping_rounds: int | None = None,
        callbacks: Sequence = (), verbose: int = 0,
        init_model: Booster | None = None,
        devices: "str | Sequence[jax.Device] | None" = None, checkpoint_path=None,
        checkpoint_every: int = 100) -> Booster:
    """Fits a boosted ensemble of trees (oblivious by default) to any differentiable loss.

    Args:
      loss: a built-in name (see ``jaxgbt.objectives``: ``"squared_error"``,
        ``"logistic"``, ``"softmax"``, ``"quantile@0.9"``, ...), an Objective, or a
        function ``loss(y_i, f_i) -> scalar`` for one row written in ``jax.numpy`` (with
        ``group=``: ``loss(y_q, f_q, mask_q) -> scalar`` for one query). Gradients and
        Hessians come from ``jax.grad``.
      X: array of shape (N, F); NaN marks a missing value.
      y: labels: shape (N,), (N, ...) or a dict of such arrays (a custom loss then sees
        one row of each, e.g. counts with exposures).
      n_trees: T, boosting rounds.
      depth: D, levels per tree (2**D leaves).
      grow_policy: "oblivious" (CatBoost's symmetric trees: one split per level) or
        "depthwise" (XGBoost's level-wise growth: each node its own split); see
        docs/training.md.
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
      boosting: "plain" or "ordered" (CatBoost's ordered boosting, for small data: each
        row's gradient is taken at a margin built only from the rows before it in a random
        order drawn from ``seed``, which removes the optimistic bias of gradients on rows
        the model has already fitted; a tree costs about 1.5 times as much at 50,000
        rows). Per-row losses with Newton leaves on one device only; see
        ``jaxgbt.core.ordered`` and docs/training.md.
      n_outputs: K for a vector-output loss, whose ``f_i`` then has shape (K,)
        (built-in vector objectives infer it from y).
      link: inverse link for a custom loss, applied by ``predict``.
      hessian: curvature: "exact", "full" (vector outputs: K x K Newton leaves),
        "fisher" (the objective's expected Hessian) or "constant"; default: the
        objective's own (see docs/objectives.md).
      hessian_floor: per-row curvature is at least this (>= 0).
      group: query id per row for ranking losses, shape (N,); a query's rows must be
        contiguous.
      subsample: row sampling rate per round, in (0, 1] (see ``jaxgbt.core.sampling``).
      sampling: how rows are sampled: "bernoulli" (keep each row with probability
        ``subsample``), "poisson" (bootstrap counts with mean ``subsample``) or "goss"
        (gradient-based one-side sampling with ``goss_top_rate``/``goss_other_rate``).
      goss_top_rate, goss_other_rate: GOSS's kept fraction of largest gradients and
        sampled fraction of the rest.
      colsample_bytree, colsample_bylevel: fraction of features drawn per tree, and of
        those per level, in (0, 1].
      colsample_bynode: for depthwise trees, fraction of a level's drawn features each
        node may split on, drawn per node, in (0, 1].
      monotone_constraints: per feature +1 (non-decreasing), -1 (non-increasing) or 0,
        as a sequence of length F or a dict {feature index: direction}; predictions are
        then monotone in those features for any input (see ``jaxgbt.core.constraints``).
      interaction_constraints: lists of feature indices allowed in one tree together;
        a feature in no list appears only alone.
      categorical_features: None or "auto" (a DataFrame's ``category`` columns), or a
        list of column indices or DataFrame column names that are categorical (the
        ``category`` columns are always). See ``jaxgbt.data.categorical``.
      one_hot_max_size: a categorical column with at most this many categories (missing
        counted as one) becomes one 0/1 column per category; a larger one becomes
        ordered target statistics.
      eval_set: validation sets, a list of ``(X, y)``, ``(X, y, sample_weight)`` or dicts
        with keys X, y and optionally sample_weight, group, name. Each is scored after
        every round; the model's ``history`` holds the scores.
      eval_metric: a metric name (``jaxgbt.evaluation.metrics.get``), a function, or a list of them;
        default: the objective's usual metric (its own loss for a custom loss).
      early_stopping_rounds: stop when the first metric on the last eval set has not
        improved for this many rounds; ``predict`` then uses the best round.
      callbacks: functions called after every chunk of rounds with an
        ``evaluation.EvalState``; one returning True stops training.
      verbose: 0 silent; 1 logs the scores after every chunk (logger "jaxgbt") and shows
        a progress bar (tqdm, when installed and stderr is a terminal).
      init_model: a Booster to continue: training starts from its predictions on X and
        its trees come first in the result (same depth and outputs; the round count,
        learning-rate schedule and sampling continue from its last round).
      devices: None for the default device, ``"all"`` for every local device, or a
        list of devices; rows are split over them and histograms summed.
      checkpoint_path: a file to save progress to every ``checkpoint_every`` rounds;
        if it already holds a checkpoint of this same fit, training resumes from it
        (see ``jaxgbt.io.checkpoint``).
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
    kind = _kind(objective, group)
    check.check_params(n_trees, depth, n_bins)
    check.check_choice(grow_policy, "grow_policy", GROW_POLICIES)
    check.check_choice(boosting, "boosting", BOOSTING_TYPES)
    X, declared = categorical.read(X, categorical_features)
    X = check.check_X(X)
    y = check.check_y(y, X.shape[0], objective)
    n_outputs, vector_output = _outputs(objective, y, n_outputs, kind)
    curvature = _curvature(objective, hessian, vector_output)
    weight = (sample_weight if check.is_traced(sample_weight)
              else check.check_sample_weight(sample_weight, X.shape[0]))
    group_index, group_mask = _groups(kind, group, X.shape[0])
    params = _params(learning_rate, l2, l1, min_split_gain, min_child_weight, hessian_floor,
                     seed, subsample, goss_top_rate, goss_other_rate, colsample_bytree,
                     colsample_bylevel, colsample_bynode)
    encoder, X = _encode(declared, X, y, weight, objective, vector_output, n_outputs,
                         one_hot_max_size, seed, init_model)
    monotone_constraints, interaction_constraints = _encoded_constraints(
        encoder, monotone_constraints, interaction_constraints)
    row_sampling, column_sampling = _sampling_methods(sampling, subsample, colsample_bytree,
                                                      colsample_bylevel, colsample_bynode,
                                                      grow_policy)
    params = params._replace(**_constraints(monotone_constraints, interaction_constraints,
                                            X.shape[1]))
    _check_loss_output(objective, y, n_outputs, vector_output, kind)
    if checkpoint_path is not None:
        check.check_int(checkpoint_every, "checkpoint_every", 1)
        if any(check.is_traced(p) for p in jax.tree.leaves((params, weight, base_score))):
            raise ValueError("checkpoint_path cannot be used inside jax.vmap or jax.jit: a "
                             "checkpoint is written from the host. Fit without it there.")
    mesh = _mesh(devices)
    if mesh is not None and (kind != "row" or objective.leaf_quantile is not None):
        raise ValueError(f"devices={devices!r}: loss {objective.name!r} needs all rows on one "
                         "device (it couples rows across groups or refreshes leaves from "
                         "sorted residuals); fit it on one device.")
    ordered = _ordered(boosting, objective, kind, curvature, mesh)
    # Sampled rounds grow their trees on the drawn rows alone when their number has a
    # bound known now (jaxgbt.core.sampling); on one device, outside ordered boosting.
    capacity = (None if ordered or mesh is not None
                else sample_capacity(row_sampling, subsample, X.shape[0]))
    check_fit_memory(X.shape[0], X.shape[1], n_bins, depth, n_outputs,
                     [jax.devices()[0]] if mesh is None else list(mesh.devices.flat),
                     ordered=ordered, gathered_rows=capacity)

    data = TrainData(bins=None, y=jax.tree.map(jnp.asarray, y), weight=jnp.asarray(weight),
                     group_index=group_index, group_mask=group_mask)
    if ordered:  # one random order of the rows for the whole fit, from the seed
        data = data._replace(order=compiled_row_order(params.sampling.key, n_rows=X.shape[0]))
    config = BoostConfig(loss=objective.loss, depth=depth, n_bins=n_bins, n_outputs=n_outputs,
                         vector_output=vector_output,
                         learning_rate_schedule=learning_rate if callable(learning_rate) else None,
                         axis_name=None if mesh is None else ROW_AXIS, curvature=curvature,
                         fisher=objective.fisher, grouped=kind != "row",
                         leaf_quantile=objective.leaf_quantile, row_sampling=row_sampling,
                         sample_capacity=capacity,
                         column_sampling=column_sampling, grow_policy=grow_policy,
                         ordered=ordered)
    if init_model is None:
        start = _base_score(objective, base_score, data, config, params)
        start_raw, round_offset = None, 0
    else:
        start, start_raw, round_offset = _warm_start(init_model, base_score, X, config)
    traced = any(check.is_traced(p) for p in jax.tree.leaves((params, weight, start)))
    # The training program is compiled before the data is binned, and the memory freed
    # on the way handed back: the first fit's peak is then the larger of compilation's
    # and training's, not their sum (docs/benchmarks.md, peak memory).
    release_free_heap()
    if compile_ahead(config, params, data, start_raw, X.shape, mesh):
        release_free_heap()

    binning_weight = None if check.is_traced(weight) else weight
    # A traced seed (vmap over seeds) cannot pick host rows: binning then uses seed 0.
    binning_seed = 0 if check.is_traced(seed) else seed
    thresholds = compute_thresholds(X, n_bins, binning_weight, binning_seed)
    # device_put adopts the (aligned) binned matrix on CPU: no second copy of it.
    data = data._replace(bins=jax.device_put(apply_bins(X, thresholds)))
    release_free_heap()  # the binning threads' sorted and transposed copies
    evaluator = _evaluator(eval_set, eval_metric, early_stopping_rounds, callbacks, verbose,
                           traced, objective, config, X.shape[1], thresholds, start, kind,
                           init_model, n_trees, encoder)
    resume, on_chunk = None, (evaluator.after_chunk if evaluator.active else None)
    if checkpoint_path is not None:
        key = fingerprint(data.bins, *jax.tree.leaves(y), weight, start, params, objective.name,
                          group_index, config.depth, config.n_bins, config.n_outputs,
                          config.vector_output, config.curvature, config.leaf_quantile,
                          config.row_sampling, config.column_sampling, start_raw,
                          round_offset, repr(config.learning_rate_schedule),
                          config.grow_policy)
        if config.ordered:  # plain fits keep the keys they had before ordered boosting
            key = fingerprint(key, "boosting=ordered")
        resume = load_checkpoint(checkpoint_path, key)
        if resume is not None and resume.rounds_done > n_trees:
            resume = None  # a longer fit's checkpoint: its first rounds are this fit's
        save = _checkpointer(checkpoint_path, checkpoint_every, key,
                             0 if resume is None else resume.rounds_done, n_trees)

        def on_chunk(progress):
            save(progress)
            return evaluator.after_chunk(progress)
    progress = train(config, params, data, start, n_trees, mesh, resume=resume,
                     on_chunk=on_chunk, start_raw=start_raw, round_offset=round_offset)
    trees = progress.trees

    # Split bins are at most B - 2, the last value bin, whose threshold is +inf. Looked up
    # on the host when the trees are concrete (eagerly, each op would compile, and
    # jnp.asarray of a host array compiles a copy for every new number of trees).
    if check.is_traced(trees.feature):
        threshold = jnp.asarray(thresholds)[trees.feature, trees.split_bin]
    else:
        threshold = jax.device_put(np.asarray(thresholds)[np.asarray(trees.feature),
                                                          np.asarray(trees.split_bin)])
    model = Booster(feature=trees.feature, threshold=threshold,
                    default_left=trees.default_left, split_gain=trees.gain,
                    leaf_value=trees.leaf_value, base_score=start, objective=objective,
                    n_features=X.shape[1] if encoder is None else encoder.n_features,
                    vector_output=vector_output, encoder=encoder, grow_policy=grow_policy,
                    best_round=(None if early_stopping_rounds is None or evaluator.best is None
                                else jnp.asarray(evaluator.best + round_offset, jnp.int32)),
                    history=evaluator.history())
    if init_model is not None:
        model = _append(init_model, model)
    if not check.is_traced(model.leaf_value):
        _check_finite(model, np.asarray(progress.bad_rows), X.shape[0])
    return model


def _warm_start(init_model, base_score, X, config):
    """(base score, starting margins f32[N, K], rounds done) of a model to continue."""
    if not isinstance(init_model, Booster):
        raise TypeError(f"init_model must be a jaxgbt Booster; got {type(init_model).__name__}.")
    if init_model.feature.ndim != 2:
        raise ValueError("init_model is a stack of models; continue one member at a time.")
    if base_score is not None:
        raise ValueError("base_score and init_model both set the starting margin; drop "
                         "base_score (the model's predictions are the start).")
    mismatch = {name: (getattr(init_model, attr), value) for name, attr, value in (
        ("n_features", "n_features", X.shape[1]), ("depth", "depth", config.depth),
        ("n_outputs", "n_outputs", config.n_outputs),
        ("vector_output", "vector_output", config.vector_output),
        ("grow_policy", "grow_policy", config.grow_policy)) if getattr(
            init_model, attr) != value}
    if mismatch:
        details = ", ".join(f"{k}: model {a} vs fit {b}" for k, (a, b) in mismatch.items())
        raise ValueError(f"init_model does not match this fit ({details}); continue it with "
                         "the same features, depth, grow_policy and outputs.")
    raw = init_model.predict_raw(X, n_trees=init_model.n_trees)
    raw = raw if config.vector_output else raw[:, None]
    return init_model.base_score, raw.astype(jnp.float32), init_model.n_trees


def _append(first: Booster, then: Booster) -> Booster:
    """One model: the trees of ``first`` followed by those of ``then``."""
    arrays = {name: jnp.concatenate([getattr(first, name), getattr(then, name)])
              for name in ("feature", "threshold", "default_left", "split_gain", "leaf_value")}
    history = None
    if then.history is not None:
        history = {}
        for key, values in then.history.items():
            before = (first.history or {}).get(key)
            if before is None or before.shape[-1] != first.n_trees:
                before = jnp.full((first.n_trees,), jnp.nan, jnp.float32)
            history[key] = jnp.concatenate([before, values])
    return dataclasses.replace(then, base_score=first.base_score, history=history, **arrays)


def _evaluator(eval_set, eval_metric, early_stopping_rounds, callbacks, verbose, traced,
               objective, config, n_features, thresholds, start, kind, init_model,
               n_trees, encoder=None) -> Evaluator:
    """Validates and bins the validation sets; returns the per-chunk evaluator."""
    if early_stopping_rounds is not None:
        check.check_int(early_stopping_rounds, "early_stopping_rounds", 1)
        if not eval_set:
            raise ValueError("early_stopping_rounds needs a validation set: pass "
                             "eval_set=[(X_val, y_val)].")
        if traced:
            raise ValueError("early_stopping_rounds cannot be used inside jax.vmap or jax.jit: "
                             "stopping is decided on the host. The eval_set history is still "
                             "recorded there; pick the round from model.history afterwards.")
    if callbacks and traced:
        raise ValueError("callbacks cannot run inside jax.vmap or jax.jit.")
    if any(not callable(c) for c in callbacks):
        raise TypeError("callbacks must be functions taking an EvalState.")
    sets, starts = [], []
    for i, entry in enumerate(eval_set or []):
        if isinstance(entry, dict):
            unknown = set(entry) - {"X", "y", "sample_weight", "group", "name"}
            if unknown or not {"X", "y"} <= set(entry):
                raise ValueError(f"eval_set[{i}] must have keys X and y (and optionally "
                                 f"sample_weight, group, name); got {sorted(entry)}.")
            fields = entry
        elif isinstance(entry, (tuple, list)) and len(entry) in (2, 3):
            fields = dict(zip(("X", "y", "sample_weight"), entry, strict=False))
        else:
            raise TypeError(f"eval_set[{i}] must be (X, y), (X, y, sample_weight) or a dict; "
                            f"got {type(entry).__name__}.")
        name = str(fields.get("name", f"valid_{i}"))
        X_val = (check.check_X(fields["X"], f"eval_set[{i}] X") if encoder is None
                 else encoder.transform(fields["X"], f"eval_set[{i}] X"))
        if X_val.shape[1] != n_features:
            raise ValueError(f"eval_set[{i}] X has {X_val.shape[1]} features but X has "
                             f"{n_features}; pass the same columns.")
        y_val = check.check_y(fields["y"], X_val.shape[0], objective)
        w_val = fields.get("sample_weight")
        if check.is_traced(w_val):  # under vmap (jaxgbt.cv: one 0/1 mask per fold)
            if w_val.shape != (X_val.shape[0],):
                raise ValueError(f"eval_set[{i}] sample_weight has shape {w_val.shape}; it "
                                 f"needs ({X_val.shape[0]},), one weight per row.")
            if not traced:
                raise ValueError(f"eval_set[{i}] sample_weight is traced but the fit is not: "
                                 "vmap the training parameters or weights along with it.")
        else:
            w_val = check.check_sample_weight(w_val, X_val.shape[0])
        layout = None
        if kind == "group" or fields.get("group") is not None:
            layout = metrics_module.query_layout(check.check_group(fields.get("group"),
                                                                   X_val.shape[0]))
        sets.append(EvalSet(name, jax.device_put(apply_bins(X_val, thresholds)),
                            jax.tree.map(jnp.asarray, y_val), jnp.asarray(w_val), layout))
        if init_model is not None:
            raw = init_model.predict_raw(X_val, n_trees=init_model.n_trees)
            starts.append(raw if config.vector_output else raw[:, None])
    metrics = resolve_metrics(eval_metric, objective, config.vector_output, kind != "row")
    if kind == "dataset" and metrics and any(getattr(m, "on_margin", False) for m in metrics):
        raise ValueError(f"loss {objective.name!r} couples all rows: give eval_metric.")
    return Evaluator(sets, metrics, start, objective.link, config.vector_output, config.n_bins,
                     early_stopping_rounds, callbacks, verbose, traced,
                     starts if init_model is not None else None, n_trees,
                     grow_policy=config.grow_policy)


def _checkpointer(path, every: int, key: str, start: int, n_trees: int):
    last_saved = start

    def on_chunk(progress):
        nonlocal last_saved
        done = progress.rounds_done
        if done - last_saved >= every or (done == n_trees and done > last_saved):
            save_checkpoint(path, progress, key)
            last_saved = done

    return on_chunk


def _encode(declared, X: np.ndarray, y, weight, objective: Objective, vector_output: bool,
            n_outputs: int, one_hot_max_size, seed, init_model):
    """(Encoder or None, the matrix f32[N, F_enc] the trees split on)."""
    categorical.check_one_hot_max_size(one_hot_max_size)
    if init_model is not None and (declared is not None
                                   or getattr(init_model, "encoder", None) is not None):
        raise ValueError("init_model cannot continue a model with categorical features yet: "
                         "their encoding is fitted to the data of one fit. Fit with more "
                         "n_trees instead.")
    if declared is None:
        return None, X
    targets, why = categorical.statistic_targets(y, objective, vector_output, n_outputs)
    # A traced seed (vmap over seeds) cannot draw host permutations: they use seed 0.
    return categorical.fit_encoder(declared, X, targets, why, weight, one_hot_max_size,
                                   0 if check.is_traced(seed) else seed)


def _encoded_constraints(encoder, monotone, interactions):
    """Constraints on raw columns, restated on the encoded columns they become."""
    if encoder is None:
        return monotone, interactions
    _constraints(monotone, interactions, encoder.n_features)  # checks the raw indices
    if monotone is not None:
        directions = (dict(monotone) if isinstance(monotone, dict)
                      else dict(enumerate(np.asarray(monotone).tolist())))
        bad = [j for j, d in directions.items()
               if d != 0 and encoder.columns[j].kind != categorical.NUMERIC]
        if bad:
            raise ValueError(f"monotone_constraints: features {bad} are categorical, whose "
                             "categories have no order; constrain only numeric features.")
        monotone = {encoder.encoded_columns(j)[0]: d for j, d in directions.items() if d != 0}
    if interactions is not None:
        interactions = [sorted({c for j in group for c in encoder.encoded_columns(j)})
                        for group in interactions]
    return monotone, interactions


def _kind(objective: Objective, group) -> str:
    """"row", "group" or "dataset": how the loss sees rows."""
    if objective.kind == "dataset":
        if group is not None:
            raise ValueError(f"group= does not apply to loss {objective.name!r}, which couples "
                             "all rows; drop it.")
        return "dataset"
    if objective.kind == "group" or (group is not None and objective.name.startswith("custom:")):
        if group is None:
            raise ValueError(f"loss {objective.name!r} ranks rows within queries: pass group= "
                             "(one query id per row).")
        return "group"
    if group is not None:
        raise ValueError(f"group= is for ranking losses, but {objective.name!r} is a per-row "
                         "loss; drop group= or use a ranking loss (lambdarank_ndcg, "
                         "pairwise_logistic, listwise_softmax or your own loss(y_q, f_q, mask_q)).")
    return "row"


def _outputs(objective: Objective, y, n_outputs, kind: str) -> tuple[int, bool]:
    """K and whether f_i is a vector."""
    if n_outputs is not None:
        n_outputs = check.check_int(n_outputs, "n_outputs", 1)
    if objective.n_outputs is not None:
        inferred = objective.n_outputs(y)
        if n_outputs is not None and n_outputs != inferred:
            raise ValueError(f"n_outputs={n_outputs} but loss {objective.name!r} reads "
                             f"{inferred} outputs from y; drop n_outputs.")
        if inferred < 2 and objective.name == "softmax":
            raise ValueError("softmax needs at least 2 classes in y; got only class 0.")
        return inferred, True
    if n_outputs is not None and kind != "row":
        raise ValueError(f"n_outputs applies to per-row losses; {objective.name!r} has one score "
                         "per row.")
    return (1, False) if n_outputs is None else (n_outputs, True)


def _ordered(boosting: str, objective: Objective, kind: str, curvature: str, mesh) -> bool:
    """Whether to boost in order (``jaxgbt.core.ordered``); refuses what it does not support."""
    if boosting != "ordered":
        return False
    if mesh is not None:
        raise ValueError("boosting='ordered' needs all rows on one device: each row's ordered "
                         "margin sums the rows before it in one random order. Drop devices= "
                         "or use boosting='plain'.")
    if kind != "row":
        raise ValueError(f"boosting='ordered' is for per-row losses; loss {objective.name!r} "
                         "couples rows (queries or the whole data set), so a row's gradient "
                         "cannot come from the rows before it alone. Use boosting='plain'.")
    if objective.leaf_quantile is not None:
        raise ValueError(f"boosting='ordered' needs Newton leaf values; loss {objective.name!r} "
                         "sets its leaves to quantiles of the residuals. Use boosting='plain', "
                         "or a smooth loss such as 'huber'.")
    if curvature == "full":
        raise ValueError("boosting='ordered' does not support hessian='full' (a K x K solve "
                         "per row and round); use hessian='exact' or boosting='plain'.")
    return True


def _curvature(objective: Objective, hessian, vector_output: bool) -> str:
    curvature = objective.curvature if hessian is None else hessian
    if curvature not in CURVATURES:
        raise ValueError(f"hessian={hessian!r}: use one of {', '.join(CURVATURES)}.")
    if curvature == "full" and not vector_output:
        raise ValueError("hessian='full' is for vector-output losses (n_outputs=K); a scalar "
                         "loss's Hessian is already exact.")
    if curvature == "fisher" and objective.fisher is None:
        raise ValueError(f"hessian='fisher' needs the objective's expected Hessian, which "
                         f"{objective.name!r} does not define; pass an Objective with fisher= "
                         "or use 'exact' or 'constant'.")
    return curvature


def _groups(kind: str, group, n_rows: int):
    """(index i32[Q, M], mask bool[Q, M]) of the rows of each group, or (None, None)."""
    if kind == "row":
        return None, None
    if kind == "dataset":
        return jnp.arange(n_rows, dtype=jnp.int32)[None], jnp.ones((1, n_rows), bool)
    ids = check.check_group(group, n_rows)
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, n_rows])
    positions = np.arange(n_rows) - np.repeat(starts, sizes)
    index = np.zeros((starts.size, sizes.max()), np.int32)
    mask = np.zeros(index.shape, bool)
    query = np.repeat(np.arange(starts.size), sizes)
    index[query, positions] = np.arange(n_rows)
    mask[query, positions] = True
    return jnp.asarray(index), jnp.asarray(mask)


def _constraints(monotone, interactions, n_features: int) -> dict:
    """Checked constraint arrays for BoostParams (absent ones stay None)."""
    out = {}
    if monotone is not None:
        if isinstance(monotone, dict):
            directions = np.zeros(n_features, np.int32)
            for feature, direction in monotone.items():
                check.check_int(feature, "monotone_constraints key", 0, n_features - 1)
                directions[feature] = direction
        else:
            directions = np.asarray(monotone)
            if directions.shape != (n_features,):
                raise ValueError(f"monotone_constraints has {directions.size} entries but X has "
                                 f"{n_features} features; give one of -1, 0, +1 per feature, or "
                                 "a dict {feature index: direction}.")
        if not np.isin(directions, (-1, 0, 1)).all():
            raise ValueError("monotone_constraints must hold only -1, 0 and +1; got "
                             f"{sorted(set(np.asarray(directions).tolist()))}.")
        out["monotone"] = jnp.asarray(directions, jnp.int32)
    if interactions is not None:
        if isinstance(interactions, (str, bytes)) or not all(
                isinstance(group, (list, tuple, set)) for group in interactions):
            raise TypeError("interaction_constraints must be a list of lists of feature "
                            "indices, e.g. [[0, 1], [2, 3, 4]].")
        for group in interactions:
            for feature in group:
                check.check_int(feature, "interaction_constraints entry", 0, n_features - 1)
        out["interaction_sets"] = interaction_sets(interactions, n_features)
    return out


def _sampling_methods(sampling, subsample, colsample_bytree, colsample_bylevel,
                      colsample_bynode=1.0, grow_policy="oblivious"):
    """The static row-sampling method and whether features are sampled."""
    if sampling not in ("bernoulli", "poisson", "goss"):
        raise ValueError(f"sampling={sampling!r}: use 'bernoulli', 'poisson' or 'goss'.")

    def below_one(rate):
        return check.is_traced(rate) or float(rate) < 1.0

    if grow_policy == "oblivious" and below_one(colsample_bynode):
        raise ValueError("colsample_bynode applies to grow_policy='depthwise': an oblivious "
                         "level is one split shared by its nodes. Use colsample_bylevel, or "
                         "grow_policy='depthwise'.")

    if sampling == "bernoulli" and not below_one(subsample):
        row_sampling = "none"
    else:
        row_sampling = sampling
    return row_sampling, (below_one(colsample_bytree) or below_one(colsample_bylevel)
                          or below_one(colsample_bynode))


def _params(learning_rate, l2, l1, min_split_gain, min_child_weight, hessian_floor, seed,
            subsample, goss_top_rate, goss_other_rate, colsample_bytree,
            colsample_bylevel, colsample_bynode=1.0) -> BoostParams:
    check.check_learning_rate(learning_rate)
    rates = dict(subsample=subsample, goss_top_rate=goss_top_rate,
                 goss_other_rate=goss_other_rate, colsample_bytree=colsample_bytree,
                 colsample_bylevel=colsample_bylevel, colsample_bynode=colsample_bynode)
    for name, rate in rates.items():
        check.check_rate(rate, name)
    if not check.is_traced(seed):
        check.check_int(seed, "seed", 0, 2**32 - 1)
    values = dict(l2=l2, l1=l1, min_split_gain=min_split_gain, min_child_weight=min_child_weight)
    for name, value in {**values, "hessian_floor": hessian_floor}.items():
        check.check_nonnegative(value, name)
    as_f32 = {name: jnp.asarray(value, jnp.float32) for name, value in values.items()}
    rate = jnp.asarray(0.0 if callable(learning_rate) else learning_rate, jnp.float32)
    sampling = SamplingParams(key=jax.random.PRNGKey(seed),
                              **{k: jnp.asarray(v, jnp.float32) for k, v in rates.items()})
    return BoostParams(learning_rate=rate, split=SplitParams(**as_f32),
                       hessian_floor=jnp.asarray(hessian_floor, jnp.float32), sampling=sampling)


def _check_loss_output(objective: Objective, y, n_outputs: int, vector_output: bool,
                       kind: str) -> None:
    """The loss must map one row (y_i, f_i), or one group (y_q, f_q, mask_q), to a
    scalar; checked by shapes alone."""
    if kind == "row":
        f_shape = (n_outputs,) if vector_output else ()
        args = (jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape[1:], jnp.float32), y),
                jax.ShapeDtypeStruct(f_shape, jnp.float32))
        what = f"one row (f_i of shape {f_shape})"
    else:
        size = 4
        args = (jax.tree.map(lambda a: jax.ShapeDtypeStruct((size,) + a.shape[1:], jnp.float32),
                             y),
                jax.ShapeDtypeStruct((size,), jnp.float32), jax.ShapeDtypeStruct((size,), bool))
        what = "one group (y_q, f_q, mask_q)"
    try:
        out = jax.eval_shape(objective.loss, *args)
    except Exception as error:  # noqa: BLE001 - re-raised with context
        raise TypeError(f"loss {objective.name!r} failed on {what}: {error}") from error
    if not hasattr(out, "shape") or out.shape != ():
        shape = getattr(out, "shape", type(out).__name__)
        hint = (" For a vector-output loss pass n_outputs=K."
                if kind == "row" and not vector_output else "")
        raise ValueError(f"loss {objective.name!r} must return a scalar for {what}; it "
                         f"returned shape {shape}.{hint}")


def _base_score(objective: Objective, base_score, data: TrainData, config: BoostConfig,
                params: BoostParams) -> jax.Array:
    n_outputs = config.n_outputs
    if base_score is not None:
        start = jnp.broadcast_to(jnp.asarray(base_score, jnp.float32), (n_outputs,))
        if not check.is_traced(start) and not np.isfinite(np.asarray(start)).all():
            raise ValueError(f"base_score={base_score} must be finite.")
        return start
    if objective.init_score is not None:
        try:
            start = _initial_margin(objective.init_score, n_outputs, data.y, data.weight)
        except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
            # An init_score that reads its labels on the host (softmax counts classes).
            start = jnp.broadcast_to(objective.init_score(data.y, data.weight), (n_outputs,))
    elif config.grouped:
        start = jnp.zeros((n_outputs,))  # a group loss is usually shift-invariant
    else:
        start = newton_constant(objective.loss, config.vector_output, data.y, data.weight,
                                n_outputs)
    start = start.astype(jnp.float32)
    if not check.is_traced(start):
        raw = np.broadcast_to(np.asarray(start), (data.weight.shape[0], n_outputs))
        g, h, _ = compiled_derivatives(config, params, data, raw)
        # Checked on the host: eagerly, each device op would compile.
        bad = ~(np.isfinite(np.asarray(g)) & np.isfinite(np.asarray(h))).all(axis=1)
        if not np.isfinite(np.asarray(start)).all() or bool(bad.any()):
            raise FloatingPointError(
                f"loss {objective.name!r} gives NaN or infinite gradients at the starting margin "
                f"{np.asarray(start)} for {int(bad.sum())} of {bad.shape[0]} rows. Check the loss "
                "on those labels (log of 0, division by 0), or pass a finite base_score.")
    return start


@functools.partial(jax.jit, static_argnames=("init_score", "n_outputs"))
def _initial_margin(init_score, n_outputs: int, y, weight) -> jax.Array:
    """f32[K]: an objective's constant start, compiled as one program."""
    return jnp.broadcast_to(init_score(y, weight), (n_outputs,)).astype(jnp.float32)


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
