"""``fit``: spec -> Dataset -> compiled loop -> Booster, on the host, top to bottom.

The arguments are checked by ``jaxgbt.spec`` and the data read by ``data.Dataset``
before anything is traced; the training program is compiled before the data is binned;
``engine.loop.train`` runs the rounds; the trees become a ``Booster``.
"""

import dataclasses
import functools
import warnings
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt import spec
from jaxgbt.core.config import BoostConfig, Boosting, GrowPolicy, NoiseDraws, ScoreFunction
from jaxgbt.core.ordered import compiled_row_order
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.core.statistic_orders import n_columns as split_columns
from jaxgbt.data import categorical
from jaxgbt.data import validation as check
from jaxgbt.data.binning import apply_bins, bin_groups
from jaxgbt.data.chunks import ChunkedData, read_chunked
from jaxgbt.data.dataset import Dataset, read_eval_set
from jaxgbt.data.distributed import (
    agreed_digest,
    check_agree,
    check_queries_apart,
    check_settings_agree,
    check_supported,
    encoded_everywhere,
    gathered_eval_sets,
    gathered_labels,
    merged_thresholds,
)
from jaxgbt.engine.compile import compile_ahead, derivatives_at, start_check
from jaxgbt.engine.loop import train
from jaxgbt.engine.resources import (
    TRIMMED_BINNING_CELLS,
    check_fit_memory,
    release_free_heap,
)
from jaxgbt.engine.sharding import row_devices
from jaxgbt.evaluation import metrics as metrics_module
from jaxgbt.evaluation.evaluator import EvalSet, Evaluator, resolve_metrics
from jaxgbt.io.checkpoint import (
    fingerprint,
    load_checkpoint,
    load_checkpoint_of_processes,
    save_checkpoint,
    save_checkpoint_of_processes,
)
from jaxgbt.model import Booster
from jaxgbt.objectives import Link, Loss, Objective, resolve
from jaxgbt.objectives.derivatives import newton_constant


@spec.keywords_checked
def fit(loss: "str | Objective | Loss", X, y, *, n_trees: int = 200, depth: int = 6,
        grow_policy: str = "oblivious", max_leaves: int | None = None, learning_rate=0.1,
        n_bins: int = 256, l2=None, l1=0.0,
        min_split_gain=None, min_child_weight=1.0, min_data_in_leaf=0, leaf_shrinkage=0.0,
        max_delta_step=0.0, random_strength=1.0, noise_draws: str = "candidate",
        score_function: str | None = None, split_curvature: str | None = None,
        leaf_newton_steps: int = 1,
        base_score=None, sample_weight=None, seed: int = 0,
        base_margin=None, eval_base_margin=None, boosting: str = "plain",
        n_outputs: int | None = None, link: Link | None = None, hessian: str | None = None,
        multi_strategy: str = "multi_output_tree", hessian_floor=0.0, group=None,
        subsample=1.0, sampling: str = "bernoulli",
        bagging_temperature=1.0, goss_top_rate=0.2, goss_other_rate=0.1, colsample_bytree=1.0,
        colsample_bylevel=1.0, colsample_bynode=1.0,
        monotone_constraints=None, interaction_constraints=None, categorical_features=None,
        one_hot_max_size: int | None = None, statistic_orders: int | None = None,
        target_statistic: str | None = None, eval_set=None, eval_metric=None,
        early_stopping_rounds: int | None = None,
        callbacks: Sequence = (), verbose: int = 0,
        init_model: Booster | None = None,
        devices: "str | Sequence[jax.Device] | None" = None, checkpoint_path=None,
        checkpoint_every: int = 100, feature_names=None, distributed: bool = False) -> Booster:
    """Fits a boosted ensemble of trees (oblivious by default) to any differentiable loss.

    Args:
      loss: a built-in name (see ``jaxgbt.objectives``: ``"squared_error"``,
        ``"logistic"``, ``"softmax"``, ``"quantile@0.9"``, ...), an Objective, or a
        function ``loss(y_i, f_i) -> scalar`` for one row written in ``jax.numpy`` (with
        ``group=``: ``loss(y_q, f_q, mask_q) -> scalar`` for one query). Gradients and
        Hessians come from ``jax.grad``.
      X: array of shape (N, F) or a DataFrame (pandas, polars, pyarrow Table or
        RecordBatch, read by ``jaxgbt.data.frames``); NaN or null marks a missing value.
        A DataFrame's column names are kept as the model's ``feature_names``. Or a
        ``jaxgbt.ChunkedData`` (rows in chunks or Parquet files, with their labels:
        ``y=None``), binned chunk by chunk without holding the float rows; see
        docs/external_memory.md.
      y: labels: shape (N,), (N, ...) or a dict of such arrays (a custom loss then sees
        one row of each, e.g. counts with exposures); a Series or DataFrame is read as
        its array. An (N, 1) column is read as (N,) for a loss with one scalar label
        per row. Classes (``softmax``) must be the integers 0..K-1, each present.
      n_trees: T, boosting rounds.
      depth: D, levels per tree (2**D leaves).
      grow_policy: "oblivious" (CatBoost's symmetric trees: one split per level),
        "depthwise" (XGBoost's level-wise growth: each node its own split) or
        "lossguide" (LightGBM's leaf-wise growth: each split at the leaf whose split
        gains most, up to ``max_leaves`` leaves and depth D); see docs/training.md.
      max_leaves: for "lossguide", the leaves a tree grows at most, 2 to 2**D; default
        31 (LightGBM's ``num_leaves``), or 2**D when that is fewer.
      learning_rate: shrinkage, a float or a schedule ``round -> float`` (optax).
      n_bins: B, histogram bins per feature including the missing bin, 3..256: at most
        this many; when no feature has that many distinct values the histograms are
        narrower (``data.binning.bins_needed``), with the same splits.
      l2: lambda, L2 penalty on leaf values. None (the default): 3 in CatBoost's regime
        (see ``split_curvature``), CatBoost's ``l2_leaf_reg``, else 1.
      l1: alpha, L1 penalty on leaf values.
      min_split_gain: gamma; a level is split only if its summed gain exceeds it.
        Oblivious trees also take a negative value, and -inf splits every level on its
        best-ranked candidate, whatever its gain, as CatBoost grows its trees. None
        (the default): -inf for oblivious trees, 0 for depthwise and lossguide.
      min_child_weight: least Hessian sum a child must hold for its node's gain to
        count.
      min_data_in_leaf: least rows a child must hold for its node's gain to count
        (LightGBM's ``min_data_in_leaf``, scikit-learn's ``min_samples_leaf``; 0, the
        default, is off). Rows are estimated as LightGBM estimates them, from the
        child's Hessian and its node's rows per unit of Hessian
        (``jaxgbt.core.split.rows_per_hessian``): exact for squared error on unweighted
        rows. A depthwise or leaf-wise node whose every candidate leaves a child too
        small does not split; an oblivious level still splits every node when other
        nodes gain, so its leaves may hold fewer. See docs/training.md.
      leaf_shrinkage: lambda >= 0 of hierarchical shrinkage (Agarwal et al. 2022; 0, the
        default, is off): each tree's leaf values are pulled towards their ancestors'
        means, every step of a leaf's path from a node to its child divided by 1 +
        lambda / (the node's training rows), so refinements made on few rows shrink the
        most (``jaxgbt.core.leaves.shrink_leaves``). A regulariser for small, noisy
        data; sweepable, and a candidate for ``fit_auto``'s ``grid``. See
        docs/training.md.
      max_delta_step: d >= 0 (XGBoost's and LightGBM's ``max_delta_step``; 0, the
        default, is off): every Newton leaf value is held to [-d, d] before the learning
        rate, and splits are scored by the loss change at the held values
        (``jaxgbt.core.split.held_step``). A safeguard for losses whose Hessian can
        vanish where the gradient does not (Poisson counts far above their prediction,
        ordered boosting's leaves from few rows, nearly separable classes): XGBoost
        sets 0.7 for its Poisson loss. Quantile leaves (absolute error, pinball) are
        not Newton steps and are not held. Sweepable. See docs/training.md.
      random_strength: CatBoost's ``random_strength`` (>= 0, CatBoost's default 1; 0
        turns it off, and gives the deterministic search of XGBoost's gain): each
        candidate split is ranked by its score plus normal noise of this many times
        the spread of the round's gradients, decaying as the rounds times their
        learning rates pass log N (``jaxgbt.core.split.ScoreNoise``). Drawn from
        ``seed``; sweepable. See docs/training.md.
      noise_draws: how the noisy scores pick a split. "candidate" (the default): the
        largest noisy score of every candidate wins; "feature" (CatBoost's): each
        feature's candidate of the largest noisy score is its best, and the features'
        bests compete by their scores plus a fresh draw each, so a feature of many
        candidates gains nothing from the largest of its many draws. See
        docs/training.md.
      score_function: what candidate splits are ranked by: "l2", their gain, XGBoost's
        and LightGBM's criterion; "cosine", CatBoost's default score, the cosine between
        the leaf values a split gives the rows and their negative gradients
        (``jaxgbt.core.split.cosine_scores``). Either way the gain is what
        ``min_split_gain``, importances and the dump report. None (the default):
        "cosine" in CatBoost's regime (see ``split_curvature``), else "l2". See
        docs/training.md.
      split_curvature: what the split search sums as each row's curvature: "hessian",
        its weighted Hessian, the Newton search of XGBoost and LightGBM; "weight", its
        weight alone, CatBoost's first-order search (its ``L2`` and ``Cosine`` scores,
        not ``NewtonL2``): the tree's structure fits the gradients by least squares, and
        ``min_child_weight`` bounds a child's summed weights. The leaves take the Newton
        step either way. None (the default): "weight" in CatBoost's regime, fewer than
        5,000 training rows of one process whose labels are values (a per-row loss's
        labels other than 0/1 ones or a class index per row: regression, counts) or
        with a categorical column encoded by target statistics (by default, any of
        more than two categories there), and oblivious trees or others without
        ``monotone_constraints``, where ``score_function`` and ``l2`` default to
        CatBoost's too ("cosine", 3); else "hessian". It changes nothing for squared
        error. See docs/training.md.
      leaf_newton_steps: Newton steps per leaf value (CatBoost's
        ``leaf_estimation_iterations``; >= 1). After the first, each takes the
        derivatives again at the margins the leaf values so far lead to, so a leaf
        moves to its regularised minimum where the curvature changes along the step
        (logistic, softmax, Poisson); squared error is there after one. Not for losses
        whose leaves are quantiles (``"absolute_error"``, ``"quantile@a"``).
      base_score: starting margin; default: the constant minimising the loss.
        Not with ``base_margin``.
      sample_weight: array of shape (N,), non-negative.
      seed: seeds every random choice of the fit (the rows used for binning).
      base_margin: each row's starting margin, f32[N] (f32[N, K] for vector outputs),
        on the scale of ``predict_raw`` (XGBoost's ``base_margin``, LightGBM's
        ``init_score``): an offset such as log exposure, or another model's margins to
        boost on top of. It replaces ``base_score``, which is then 0: the model holds
        only the trees, and ``predict(X, base_margin=m)`` adds them to ``m`` (without
        ``base_margin``, predictions are the trees' alone, as from margin 0). See
        docs/training.md.
      eval_base_margin: with ``base_margin`` and ``eval_set``: one margin per eval set,
        in the same order, each shaped as ``base_margin`` for that set's rows.
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
      multi_strategy: for a loss of K > 1 outputs (softmax's classes, n_outputs=K):
        "multi_output_tree" (the default), every tree split once for all outputs, its
        leaves holding a value for each; "one_output_per_tree" (XGBoost's default for
        several classes, LightGBM's and scikit-learn's way), the outputs take turns,
        round r's tree grown and its leaves set from output r mod K's gradients alone,
        at the margins every earlier tree gives, its other outputs' values 0.
        ``n_trees`` counts trees either way: K times the rounds gives each output as
        many trees as ``n_trees`` gives a model of one tree a round. See
        docs/training.md.
      hessian_floor: per-row curvature is at least this (>= 0).
      group: query id per row for ranking losses, shape (N,); a query's rows must be
        contiguous.
      subsample: row sampling rate per round, in (0, 1] (see ``jaxgbt.core.sampling``).
      sampling: how rows are sampled: "bernoulli" (keep each row with probability
        ``subsample``), "poisson" (bootstrap counts with mean ``subsample``), "goss"
        (gradient-based one-side sampling with ``goss_top_rate``/``goss_other_rate``),
        "bayesian" (CatBoost's Bayesian bootstrap: every row, at a random weight
        (-log u)^``bagging_temperature`` per round; ``subsample`` is not used) or "mvs"
        (CatBoost's minimal variance sampling: ``subsample`` of the rows expected per
        round, those of large gradients kept more often, each kept row weighted by one
        over its probability; CatBoost's default is ``subsample=0.8``).
      bagging_temperature: with ``sampling="bayesian"``, >= 0: 0 weighs every row 1,
        1 draws Exp(1) weights, larger values spread them more.
      goss_top_rate, goss_other_rate: GOSS's kept fraction of largest gradients and
        sampled fraction of the rest.
      colsample_bytree, colsample_bylevel: fraction of features drawn per tree, and of
        those per level, in (0, 1].
      colsample_bynode: for depthwise and lossguide trees, fraction of a level's drawn features each
        node may split on, drawn per node, in (0, 1].
      monotone_constraints: per feature +1 (non-decreasing), -1 (non-increasing) or 0,
        as a sequence of length F or a dict {feature index or column name: direction};
        predictions are then monotone in those features for any input (see
        ``jaxgbt.core.constraints``).
      interaction_constraints: lists of feature indices (or column names) allowed in one
        tree together; a feature in no list appears only alone.
      categorical_features: None or "auto" (a DataFrame's categorical columns: pandas
        ``category``, polars ``Categorical``/``Enum``, Arrow ``dictionary``), or a list
        of column indices or DataFrame column names that are categorical (the
        categorical-dtype columns are always). See ``jaxgbt.data.categorical``.
      one_hot_max_size: a categorical column with at most this many categories (missing
        counted as one) becomes one 0/1 column per category; a larger one becomes
        ordered target statistics. Default None: CatBoost's 2 below 5,000 training rows
        (where the statistics can be computed: a label on the host, weights not under
        ``jax.vmap``), else 64 (``categorical.default_one_hot_max_size``; measured in
        docs/accuracy.md).
      statistic_orders: P, the random orders of the training rows that target
        statistics are drawn under (CatBoost's folds). Each order has its own margins:
        round r grows its tree on order r mod P's statistics and gradients, and then
        every order's margins move by the tree applied to its own statistics, with leaf
        values set from that order's rows; the model keeps order r + 1's, set on
        statistics that did not choose the splits. With an order per tree, no tree's
        gradients come from margins fitted to its own order's noise
        (``jaxgbt.core.statistic_orders``). Default None: a new order for every
        tree, at most the largest power of two within
        ``categorical.STATISTIC_ORDER_CELLS`` / N (each round costs P x N more). At
        most ``n_trees``; 1 with ``boosting="ordered"`` or ``distributed=True``. Only
        fits with a target-statistic column read it. See docs/training.md.
      target_statistic: what a target-statistic column holds. ``"mean"``: the
        category's mean label, smoothed towards the overall mean, one column (per class
        for a class index). ``"borders"`` (CatBoost's default statistic, "Borders"): the
        share of the category's rows in each class under the priors 0, 0.5 and 1, three
        columns per class, rounded to 16 levels; a 0/1 label is one class, a class index
        K classes, any other label (regression, counts) the class "above the label's
        median". Default None: the mean for 0/1 labels (and class indices of two
        classes), borders for any other label, class indices of three or more classes
        included (``categorical.default_statistic``; measured in docs/accuracy.md).
      eval_set: validation sets, a list of ``(X, y)``, ``(X, y, sample_weight)`` or dicts
        with keys X, y and optionally sample_weight, group, name. Each is scored after
        every round; the model's ``history`` holds the scores.
      eval_metric: a metric name (``jaxgbt.evaluation.metrics.get``), a function, or a list of them;
        default: the objective's usual metric (its own loss for a custom loss).
      early_stopping_rounds: stop when the first metric on the last eval set has not
        improved for this many rounds; ``predict`` then uses the best round. Inside
        ``jax.vmap`` or ``jax.jit`` (``fit_many``, ``cv``) each model stops on its own:
        its later rounds are skipped in the program and hold empty trees (zero leaf
        values), so the model keeps ``n_trees`` trees and a traced ``best_round``.
      callbacks: functions ``callback(state)`` called after every round with a
        ``jaxgbt.EvalState`` (round index, that round's scores, the history, the model
        so far on request); one returning True stops training after that round, and the
        model ends there. ``jaxgbt.Callback(function, period=10)`` calls it every tenth
        round. They are replayed on the host after each compiled chunk of 16 rounds.
      verbose: 0 prints nothing; 1 shows progress on stderr with the latest validation
        scores: a progress bar on a terminal (its last line stays after training), plain
        lines at about every tenth of the trees elsewhere (``jaxgbt.evaluation.progress``).
      init_model: a Booster to continue: training starts from its predictions on X and
        its trees come first in the result (same depth and outputs; the round count,
        learning-rate schedule and sampling continue from its last round).
      devices: None for the default device (on CPU with several devices configured,
        every one of them for large narrow data: ``spec.automatic_mesh``), ``"all"``
        for every local device, or a list of devices; rows are split over them and
        histograms summed.
      checkpoint_path: a file to save progress to every ``checkpoint_every`` rounds;
        if it already holds a checkpoint of this same fit, training resumes from it
        (see ``jaxgbt.io.checkpoint``).
      checkpoint_every: rounds between checkpoints (saved at the end of a compiled
        chunk of 16 rounds).
      feature_names: names of the F columns of X, distinct strings; default: a
        DataFrame's column names, or None for an array. With a DataFrame they must equal
        its columns. ``predict`` then matches a DataFrame's columns by name.
      distributed: True to train one model with every process of a JAX distributed
        run (``jaxgbt.distributed.initialize``), each passing its own rows as X, y,
        sample_weight and eval_set; rows are split over all processes' devices and
        every process returns the same model. Ranking needs whole queries per process;
        no Cox or quantile losses yet. ``init_model`` must be the same model on every
        process, ``base_margin`` holds each process's own rows. ``checkpoint_path`` is
        written and read by process 0 alone (one file, the margins of all rows), which
        tells the others whether to resume; it must be set on every process or none
        (docs/distributed.md).

    Returns:
      A Booster.

    Raises:
      ValueError, TypeError: bad input, before anything is traced.
      MemoryError: the fit would not fit in the device's free memory.
      FloatingPointError: the loss gave NaN or infinite gradients.

    Long because it is the one straight line of a fit's steps, each a named call; a
    split would only pass its many settings on.
    """
    objective = resolve(loss, link)
    kind = spec.loss_kind(objective, group)
    spec.check_run(n_trees, depth, n_bins, learning_rate, verbose)
    spec.check_mode(grow_policy, "grow_policy", GrowPolicy)
    leaf_budget = spec.leaf_budget(max_leaves, grow_policy, depth)
    spec.check_mode(boosting, "boosting", Boosting)
    spec.check_mode(noise_draws, "noise_draws", NoiseDraws)
    if score_function is not None:
        spec.check_mode(score_function, "score_function", ScoreFunction)
    spec.check_split_curvature(split_curvature, grow_policy, monotone_constraints)
    min_split_gain = spec.min_split_gain(min_split_gain, grow_policy)
    categorical.check_target_statistic(target_statistic)
    leaf_newton_steps = spec.check_leaf_newton_steps(leaf_newton_steps, objective)
    data = _training_rows(X, y, sample_weight=sample_weight, group=group,
                          categorical_features=categorical_features, objective=objective,
                          kind=kind, feature_names=feature_names, n_outputs=n_outputs,
                          init_model=init_model, distributed=distributed)
    _check_distributed(distributed, data, devices, init_model, checkpoint_path,
                       checkpoint_every, base_margin, group)
    n_outputs, vector_output = spec.outputs(objective, data.y, n_outputs, kind)
    curvature = spec.curvature(objective, hessian, vector_output)
    one_output_per_tree = spec.one_output_per_tree(multi_strategy, n_outputs, curvature)
    rates = dict(subsample=subsample, goss_top_rate=goss_top_rate,
                 goss_other_rate=goss_other_rate, colsample_bytree=colsample_bytree,
                 colsample_bylevel=colsample_bylevel, colsample_bynode=colsample_bynode)
    params = spec.boost_params(learning_rate, spec.NEWTON_SEARCH["l2"] if l2 is None else l2,
                               l1, min_split_gain, min_child_weight,
                               hessian_floor, seed, rates, random_strength,
                               bagging_temperature, min_data_in_leaf, leaf_shrinkage,
                               max_delta_step)
    orders = spec.statistic_orders(statistic_orders, n_trees, data.n_rows, boosting,
                                   distributed)
    data = _encoded(data, distributed, objective, vector_output, n_outputs, one_hot_max_size,
                    seed, init_model, orders, target_statistic)
    monotone, interactions = spec.encoded_constraints(data.encoder, *spec.constraints_by_index(
        monotone_constraints, interaction_constraints, data.feature_names))
    search = spec.search_defaults(
        dict(split_curvature=split_curvature, score_function=score_function, l2=l2),
        data.encoder, data.y, kind, vector_output, grow_policy, data.n_rows, distributed,
        monotone_constraints)
    if l2 is None:  # its default depends on the encoded columns, known only now
        params = params._replace(split=params.split._replace(
            l2=jnp.asarray(search["l2"], jnp.float32)))
    row_sampling, column_sampling = spec.sampling_methods(
        sampling, subsample, colsample_bytree, colsample_bylevel, colsample_bynode, grow_policy)
    params = params._replace(**spec.constraints(monotone, interactions, data.n_columns))
    spec.check_loss_output(objective, data.y, n_outputs, vector_output, kind)
    margin = _base_margin(base_margin, base_score, eval_base_margin, eval_set, data.n_rows,
                          n_outputs, vector_output)
    if checkpoint_path is not None:
        check.check_int(checkpoint_every, "checkpoint_every", 1)
        if any(map(check.is_traced, jax.tree.leaves((params, data.weight, base_score, margin)))):
            raise ValueError("checkpoint_path cannot be used inside jax.vmap or jax.jit: a "
                             "checkpoint is written from the host. Fit without it there.")
    mesh = _row_mesh(devices, distributed, objective, kind)
    thresholds = _thresholds(data, n_bins, seed, distributed, n_outputs)  # first: they set B
    # Every process must compile the same program: narrower histograms, sparse features
    # and whether rows are missing are known from one process's rows, so not under
    # distributed; nor are sparse entries split over a mesh's devices.
    missing_values = distributed or data.may_hold_missing()
    sparse = (None if distributed or mesh is not None
              else data.sparse_group(thresholds, missing_values))
    if devices is None and not distributed:  # every CPU core, where it pays
        mesh = spec.automatic_mesh(
            data.n_rows, data.n_columns, objective, kind, boosting, row_sampling, grow_policy,
            traced=any(map(check.is_traced, jax.tree.leaves(
                (params, data.weight, data.y, base_score, margin)))),
            sparse=sparse is not None, chunked=isinstance(X, ChunkedData))
    config = spec.build_config(
        objective, depth=depth, n_bins=thresholds.shape[1] + 1, n_outputs=n_outputs,
        vector_output=vector_output, learning_rate=learning_rate, row_mesh=mesh,
        chosen_curvature=curvature, kind=kind, row_sampling=row_sampling,
        column_sampling=column_sampling, subsample=subsample, n_rows=data.n_rows,
        grow_policy=grow_policy, max_leaves=leaf_budget,
        is_ordered=spec.ordered(boosting, objective, kind, curvature, mesh),
        bin_groups=None if distributed else bin_groups(
            thresholds, data.n_rows, () if sparse is None else sparse.features,
            missing_values),
        sparse_group=sparse,
        noisy_scores=spec.score_noise(random_strength), noise_draws=noise_draws,
        score_function=search["score_function"], split_curvature=search["split_curvature"],
        leaf_newton_steps=leaf_newton_steps, order_statistics=data.order_statistics,
        missing_values=missing_values, one_output_per_tree=one_output_per_tree)
    check_fit_memory(data.n_rows, data.n_bin_rows, config.n_bins, depth, n_outputs,
                     [jax.devices()[0]] if mesh is None else list(mesh.local_devices),
                     ordered=config.ordered, gathered_rows=config.sample_capacity,
                     statistic_orders=config.statistic_orders,
                     split_features=split_columns(config, data.n_bin_rows))
    # device_put, not jnp.asarray: on jax 0.10 the latter compiles a copy for every new
    # row count, a program of its own that fits in one row bucket would not share.
    train_data = TrainData(bins=None, y=jax.tree.map(jax.device_put, data.y),
                           weight=jax.device_put(data.weight), group_index=data.group_index,
                           group_mask=data.group_mask)
    if config.ordered:  # one random order of the rows for the whole fit, from the seed
        train_data = train_data._replace(
            order=compiled_row_order(params.sampling.key, n_rows=data.n_rows))
    start, start_raw, round_offset = _starting_margins(objective, base_score, margin,
                                                       init_model, data, train_data, config,
                                                       params, distributed)
    traced = any(map(check.is_traced, jax.tree.leaves((params, data.weight, start, start_raw))))
    # The training program is compiled before the data is binned, and the memory freed
    # on the way handed back (``engine.compile.chunk_program``): the first fit's peak is
    # then the larger of compilation's and training's, not their sum (docs/benchmarks.md,
    # peak memory).
    if not compile_ahead(config, params, train_data, start_raw,
                         (data.n_rows, data.n_bin_rows), mesh):
        release_free_heap()
    train_data = train_data._replace(bins=data.binned(thresholds))
    if sparse is not None:
        train_data = train_data._replace(entries=data.entries(train_data.bins, sparse))
    if data.n_rows * data.n_bin_rows >= TRIMMED_BINNING_CELLS:
        release_free_heap()  # the binning threads' sorted and transposed copies
    evaluator = _evaluator(eval_set, eval_metric, early_stopping_rounds, callbacks, verbose,
                           traced, objective, config, data, thresholds, start, kind,
                           init_model, n_trees, eval_base_margin, distributed)
    resume, on_chunk = None, (evaluator.after_chunk if evaluator.active else None)
    if checkpoint_path is not None:
        resume, on_chunk = _checkpointing(checkpoint_path, checkpoint_every, evaluator,
                                          train_data, params, start, objective, config,
                                          start_raw, round_offset, n_trees, distributed)
    progress = train(config, params, train_data, start, n_trees, mesh, resume=resume,
                     on_chunk=on_chunk, start_raw=start_raw, round_offset=round_offset)
    best_round = (None if early_stopping_rounds is None or evaluator.best is None
                  else jnp.asarray(evaluator.best + round_offset, jnp.int32))
    model = _booster(progress.trees, thresholds, start, objective, data, config, best_round,
                     evaluator.history())
    if init_model is not None:
        model = _append(init_model, model)
    if not check.is_traced(model.leaf_value):
        _check_finite(model, np.asarray(progress.bad_rows), data.n_rows)
    return model


def _training_rows(X, y, *, init_model, distributed, **read_args) -> Dataset:
    """The checked training rows: X in memory (``Dataset.read``), or a ``ChunkedData``
    source read once for its labels and column summaries (``data.chunks``)."""
    if isinstance(X, ChunkedData):
        return read_chunked(X, y, init_model=init_model, distributed=distributed,
                            **read_args)
    return Dataset.read(X, y, continued=init_model, **read_args)


def _check_distributed(distributed, data: Dataset, devices, init_model, checkpoint_path,
                       checkpoint_every, base_margin, group) -> None:
    """Refuses what ``distributed=True`` does not take (see ``data.distributed``),
    settings that differ between processes, and queries split over processes."""
    if distributed is not False:
        check_supported(distributed, devices=devices, weight=data.weight)
        # What decides each process's collectives must agree, or they would wait on each
        # other; the path itself may differ (only process 0 reads and writes it).
        check_settings_agree({
            "init_model": fingerprint(*(() if init_model is None
                                        else jax.tree.leaves(init_model))),
            "checkpoint_path (set or None)": fingerprint(checkpoint_path is None),
            "checkpoint_every": fingerprint(checkpoint_path and checkpoint_every),
            "base_margin (set or None)": fingerprint(base_margin is None)})
        if data.group_index is not None and group is not None:
            check_queries_apart(check.check_group(group, data.n_rows))


def _encoded(data: Dataset, distributed: bool, objective, vector_output, n_outputs,
             one_hot_max_size, seed, init_model, statistic_orders: int = 1,
             target_statistic: str | None = None) -> Dataset:
    """The rows with categorical columns encoded: by this process's rows, or with
    ``distributed`` as one process encodes every process's rows."""
    if distributed and init_model is None:  # a continued model's encoder is kept
        return encoded_everywhere(data, objective, vector_output, n_outputs,
                                  one_hot_max_size, seed, target_statistic)
    return data.encoded(objective, vector_output, n_outputs, one_hot_max_size, seed, init_model,
                        statistic_orders, target_statistic)


def _row_mesh(devices, distributed: bool, objective: Objective, kind):
    """The mesh rows are split over (every process's devices with ``distributed``), or
    None for one device; checked against the loss."""
    mesh = spec.mesh(row_devices(kind != "row") if distributed else devices)
    spec.check_mesh(mesh, devices, objective, kind, distributed)
    return mesh


def _thresholds(data: Dataset, n_bins: int, seed, distributed: bool, n_outputs: int
                ) -> np.ndarray:
    """f32[F, B - 1], the bin edges: of this process's rows, or with ``distributed``
    of every process's (which must agree on the outputs first)."""
    if not distributed:
        return data.thresholds(n_bins, seed)
    check_agree(n_outputs, "numbers of outputs (with softmax, each process needs every class)")
    return merged_thresholds(data.X, data.weight, n_bins)


def _all_labels(data: TrainData) -> TrainData:
    """``data``'s labels and weights with every process's rows (the bins not set)."""
    y, weight = gathered_labels(data.y, data.weight)
    return data._replace(y=jax.tree.map(jnp.asarray, y), weight=jnp.asarray(weight))


def _booster(trees, thresholds: np.ndarray, start, objective: Objective, data: Dataset,
             config: BoostConfig, best_round, history) -> Booster:
    """The Booster of the trained trees: split bins looked up as float thresholds."""
    # Split bins are at most B - 2, the last value bin, whose threshold is +inf. Looked up
    # on the host when the trees are concrete (eagerly, each op would compile, and
    # jnp.asarray of a host array compiles a copy for every new number of trees).
    if check.is_traced(trees.feature):
        threshold = _compiled_lookup(jnp.asarray(thresholds), trees.feature, trees.split_bin)
    else:
        threshold = jax.device_put(np.asarray(thresholds)[np.asarray(trees.feature),
                                                          np.asarray(trees.split_bin)])
    cover = trees.cover
    # A checkpoint written before covers were stored resumes with NaN covers: unknown.
    if not check.is_traced(cover) and np.isnan(np.asarray(cover)).any():
        cover = None
    return Booster(feature=trees.feature, threshold=threshold,
                   default_left=trees.default_left, split_gain=trees.gain,
                   leaf_value=trees.leaf_value, base_score=start, objective=objective,
                   n_features=data.n_features, vector_output=config.vector_output,
                   encoder=data.encoder, grow_policy=config.grow_policy,
                   feature_names=data.feature_names, best_round=best_round, history=history,
                   cover=cover)


@jax.jit
def _compiled_lookup(thresholds, feature, split_bin):
    # One program under vmap (fit_many, forests), where each eager op compiles alone.
    return thresholds[feature, split_bin]


def _checkpointing(path, every: int, evaluator: Evaluator, data: TrainData, params, start,
                   objective: Objective, config: BoostConfig, start_raw, round_offset: int,
                   n_trees: int, distributed: bool = False):
    """(progress to resume from or None, the per-chunk callback that also saves); with
    ``distributed``, of every process's rows, read and written by process 0."""
    key = fingerprint(data.bins, *jax.tree.leaves(data.y), data.weight, start, params,
                      objective.name, data.group_index, config.depth, config.n_bins,
                      config.n_outputs, config.vector_output, config.curvature,
                      config.leaf_quantile, config.row_sampling, config.column_sampling,
                      start_raw, round_offset, repr(config.learning_rate_schedule),
                      config.grow_policy)
    if config.ordered:  # plain fits keep the keys they had before ordered boosting
        key = fingerprint(key, "boosting=ordered")
    if config.statistic_orders > 1:  # and fits of one order theirs
        key = fingerprint(key, config.statistic_orders, config.statistic_columns)
    load, write = load_checkpoint, save_checkpoint
    if distributed:  # each process's digest of its own rows, combined in process order
        key = agreed_digest(key)
        load = functools.partial(load_checkpoint_of_processes, n_rows=data.weight.shape[0])
        write = save_checkpoint_of_processes
    resume = load(path, key)
    if resume is not None and resume.rounds_done > n_trees:
        resume = None  # a longer fit's checkpoint: its first rounds are this fit's
    save = _checkpointer(path, every, key, 0 if resume is None else resume.rounds_done,
                         n_trees, write)

    def on_chunk(progress):
        kept = evaluator.after_chunk(progress)
        # A callback that stopped inside the chunk cuts the fit back to an earlier round:
        # the checkpoint keeps the last chunk saved, from which the same fit resumes and
        # stops there again.
        if kept is None or kept == progress.rounds_done:
            save(progress)
        return kept

    return resume, on_chunk


def _base_margin(base_margin, base_score, eval_base_margin, eval_set, n_rows: int,
                 n_outputs: int, vector_output: bool):
    """``base_margin`` checked, as f32[N, K] (or None), and ``eval_base_margin``'s
    agreement with it and with ``eval_set`` (each set's shape is checked with its rows)."""
    if base_margin is None:
        if eval_base_margin is not None:
            raise ValueError("eval_base_margin was given without base_margin; the eval sets' "
                             "margins start where the training rows' do: pass base_margin too.")
        return None
    if base_score is not None:
        raise ValueError("base_score and base_margin both set the starting margin; drop "
                         "base_score (base_margin replaces it; add a constant to the margins "
                         "instead).")
    if eval_set:
        if not isinstance(eval_base_margin, (list, tuple)) or len(eval_base_margin) != len(
                eval_set):
            got = (f"{len(eval_base_margin)} entries" if isinstance(eval_base_margin,
                                                                    (list, tuple))
                   else repr(type(eval_base_margin).__name__))
            raise ValueError(f"fit has base_margin, so each of the {len(eval_set)} eval sets "
                             "needs its own: pass eval_base_margin=[margin_0, ...], one per "
                             f"eval set in order; got {got}.")
    elif eval_base_margin:
        raise ValueError("eval_base_margin was given without eval_set.")
    return check.check_base_margin(base_margin, n_rows, n_outputs, vector_output)


def _starting_margins(objective: Objective, base_score, margin, init_model, data: Dataset,
                      train_data: TrainData, config: BoostConfig, params: BoostParams,
                      distributed: bool = False):
    """(base score f32[K], starting margins f32[N, K] or None, rounds done before)."""
    if init_model is not None:
        return _warm_start(init_model, base_score, data, config, margin)
    if margin is not None:  # the margins replace base_score (XGBoost's convention)
        start = jax.device_put(np.zeros(config.n_outputs, np.float32))
        return start, margin if check.is_traced(margin) else jax.device_put(margin), 0
    return (_base_score(objective, base_score, train_data, config, params, distributed), None,
            0)


def _model_so_far(trees, n_trees: int, *, thresholds, start, objective, data, config,
                  init_model) -> Booster:
    """The model of the first ``n_trees`` of a stack of trees (after ``init_model``'s),
    as a callback's ``EvalState.model()`` builds it. Sliced on the host: on device each
    new length would compile."""
    trees = jax.tree.map(lambda a: jax.device_put(np.asarray(a)[:n_trees]), trees)
    model = _booster(trees, thresholds, start, objective, data, config, None, None)
    return model if init_model is None else _append(init_model, model)


def _warm_start(init_model, base_score, data: Dataset, config, margin=None):
    """(base score, starting margins f32[N, K], rounds done) of a model to continue;
    ``margin`` f32[N, K] replaces its base score."""
    X = data.X
    if not isinstance(init_model, Booster):
        raise TypeError(f"init_model must be a jaxgbt Booster; got {type(init_model).__name__}.")
    if init_model.feature.ndim != 2:
        raise ValueError("init_model is a stack of models; continue one member at a time.")
    if base_score is not None:
        raise ValueError("base_score and init_model both set the starting margin; drop "
                         "base_score (the model's predictions are the start).")
    mismatch = {name: (getattr(init_model, attr), value) for name, attr, value in (
        ("n_features", "n_features", data.n_features), ("depth", "depth", config.depth),
        ("n_outputs", "n_outputs", config.n_outputs),
        ("vector_output", "vector_output", config.vector_output),
        ("grow_policy", "grow_policy", config.grow_policy)) if getattr(
            init_model, attr) != value}
    if mismatch:
        details = ", ".join(f"{k}: model {a} vs fit {b}" for k, (a, b) in mismatch.items())
        raise ValueError(f"init_model does not match this fit ({details}); continue it with "
                         "the same features, depth, grow_policy and outputs.")
    names = init_model.feature_names, data.feature_names
    if None not in names and names[0] != names[1]:
        raise ValueError(f"init_model was trained on the columns {list(names[0])} but "
                         f"feature_names={list(names[1])}; continue it with the same columns.")
    raw = _split_rows_margins(init_model, X, margin)
    raw = raw if config.vector_output else raw[:, None]
    return init_model.base_score, raw.astype(jnp.float32), init_model.n_trees


def _split_rows_margins(model: Booster, X, base_margin=None) -> jax.Array:
    """The raw margins of all of ``model``'s trees on rows X already as its trees read
    them (f32[N, n_split_features]: its encoder applied, when it has one), started from
    ``base_margin`` (f32[N] or f32[N, K]) when given."""
    if model.encoder is not None:
        model = dataclasses.replace(model, encoder=None, n_features=model.n_split_features,
                                    feature_names=None)
    return model.predict_raw(X, n_trees=model.n_trees, base_margin=base_margin)


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
    # Covers are known for the whole model only if both parts have them.
    arrays["cover"] = (None if first.cover is None or then.cover is None
                       else jnp.concatenate([first.cover, then.cover]))
    return dataclasses.replace(then, base_score=first.base_score, history=history,
                               feature_names=then.feature_names or first.feature_names,
                               **arrays)


def _evaluator(eval_set, eval_metric, early_stopping_rounds, callbacks, verbose, traced,
               objective, config, data: Dataset, thresholds, start, kind, init_model,
               n_trees, eval_base_margin=None, distributed: bool = False) -> Evaluator:
    """Validates and bins the validation sets; returns the per-chunk evaluator."""
    if early_stopping_rounds is not None:
        check.check_int(early_stopping_rounds, "early_stopping_rounds", 1)
        if not eval_set:
            raise ValueError("early_stopping_rounds needs a validation set: pass "
                             "eval_set=[(X_val, y_val)].")
    if callbacks and traced:
        raise ValueError("callbacks cannot run inside jax.vmap or jax.jit.")
    if any(not callable(c) for c in callbacks):
        raise TypeError("callbacks must be functions taking an EvalState.")
    start_margins = init_model is not None or eval_base_margin is not None
    if distributed:  # every process scores the whole validation sets
        eval_set, eval_base_margin = gathered_eval_sets(
            eval_set, eval_base_margin, encoder=data.encoder, n_features=data.n_columns,
            objective=objective, kind=kind, traced=False, feature_names=data.feature_names,
            n_outputs=config.n_outputs if config.vector_output else None,
            n_classes=config.n_outputs)
    sets, starts = [], []
    for i, entry in enumerate(eval_set or []):
        # Gathered validation sets arrive encoded (``gathered_eval_sets``).
        rows = read_eval_set(i, entry, encoder=None if distributed else data.encoder,
                             n_features=data.n_columns,
                             objective=objective, kind=kind, traced=traced,
                             feature_names=data.feature_names,
                             n_outputs=config.n_outputs if config.vector_output else None,
                             n_classes=config.n_outputs)
        layout = None if rows.group is None else metrics_module.query_layout(rows.group)
        sets.append(EvalSet(rows.name, jax.device_put(apply_bins(rows.X, thresholds)),
                            jax.tree.map(jnp.asarray, rows.y), jnp.asarray(rows.weight), layout))
        margin = None
        if eval_base_margin is not None:
            margin = check.check_base_margin(eval_base_margin[i], rows.X.shape[0],
                                             config.n_outputs, config.vector_output,
                                             f"eval_base_margin[{i}]")
        if init_model is not None:
            raw = _split_rows_margins(init_model, rows.X, margin)
            starts.append(raw if config.vector_output else raw[:, None])
        elif margin is not None:
            starts.append(jax.device_put(margin))
    metrics = resolve_metrics(eval_metric, objective, config.vector_output, kind != "row")
    if kind == "dataset" and metrics and any(getattr(m, "on_margin", False) for m in metrics):
        raise ValueError(f"loss {objective.name!r} couples all rows: give eval_metric.")
    model_of = functools.partial(_model_so_far, thresholds=thresholds, start=start,
                                 objective=objective, data=data, config=config,
                                 init_model=init_model)
    return Evaluator(sets, metrics, start, objective.link, config.vector_output, config.n_bins,
                     early_stopping_rounds, callbacks, verbose, traced,
                     starts if start_margins else None, n_trees,
                     grow_policy=config.grow_policy, model_of=model_of)


def _checkpointer(path, every: int, key: str, start: int, n_trees: int, save=save_checkpoint):
    last_saved = start

    def on_chunk(progress):
        nonlocal last_saved
        done = progress.rounds_done
        if done - last_saved >= every or (done == n_trees and done > last_saved):
            save(path, progress, key)
            last_saved = done

    return on_chunk


def _base_score(objective: Objective, base_score, data: TrainData, config: BoostConfig,
                params: BoostParams, distributed: bool = False) -> jax.Array:
    """f32[K]: the starting margin, given or the loss's constant minimiser, checked to
    give finite gradients; with ``distributed``, of every process's labels."""
    n_outputs = config.n_outputs
    if base_score is not None:
        spec.check_base_score(base_score, n_outputs)
        start = jnp.broadcast_to(jnp.asarray(base_score, jnp.float32), (n_outputs,))
        if not check.is_traced(start) and not np.isfinite(np.asarray(start)).all():
            raise ValueError(f"base_score={base_score} must be finite.")
        return start
    if distributed and not config.grouped:  # a group loss starts at 0, checked per process
        data = _all_labels(data)
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
        # The curvature before clipping (a floor of -inf clips nothing), to see its sign.
        unclipped = params._replace(hessian_floor=jnp.float32(-jnp.inf))
        g, h, losses = start_check(config, unclipped, data, raw)  # not the K x K h_full
        # Checked on the host: eagerly, each device op would compile.
        bad = ~(np.isfinite(g) & np.isfinite(h)).all(axis=1)
        if not np.isfinite(np.asarray(start)).all() or bool(bad.any()):
            raise FloatingPointError(
                f"loss {objective.name!r} gives NaN or infinite gradients at the starting margin "
                f"{np.asarray(start)} for {int(bad.sum())} of {bad.shape[0]} rows. Check the loss "
                "on those labels (log of 0, division by 0), or pass a finite base_score.")
        _check_start_losses(objective, losses, np.asarray(start), config.grouped)
        moved_g = None
        if not np.any(g):  # a perfect start (constant labels), or a loss flat in f?
            moved_g = np.asarray(derivatives_at(config, params, data, raw + 1.0).g)
        weight = None if check.is_traced(data.weight) else np.asarray(data.weight)
        _warn_degenerate(objective, moved_g, h, weight)
    return start


def _check_start_losses(objective: Objective, losses: np.ndarray, start: np.ndarray,
                        grouped: bool) -> None:
    """Raises when the loss itself is NaN or infinite at the starting margin ``start``
    f32[K] though its gradients are finite (a constant NaN has gradient 0), naming how
    many and which rows (groups, for a group loss). losses: f32[N] (or f32[Q])."""
    bad = np.flatnonzero(~np.isfinite(losses))
    if bad.size:
        unit = "groups" if grouped else "rows"
        shown = ", ".join(str(i) for i in bad[:10]) + (", ..." if bad.size > 10 else "")
        raise FloatingPointError(
            f"loss {objective.name!r} is NaN or infinite at the starting margin {start} for "
            f"{bad.size} of {losses.shape[0]} {unit} ({unit} {shown}), though its gradients "
            "there are finite, so training would go on without a sign of it. Check the loss "
            "on those labels (log or sqrt of a negative number, 0/0), or drop the rows.")


def _warn_degenerate(objective: Objective, moved_g: np.ndarray | None, h: np.ndarray,
                     weight: np.ndarray | None) -> None:
    """Warns when the loss cannot train a model: its gradient is 0 for every row at the
    starting margin and 1 above it (``moved_g``, None when the start's gradient was not
    all 0: the loss does not depend on f, or is flat where it does, as ``jnp.round``), or
    its curvature ``h`` at the start is negative for most rows (concave: clipped to
    ``hessian_floor``, the leaves are then -G / l2, steps that grow without bound).
    moved_g, h: f32[N, K]; weight: f32[N], or None (traced: every row counts)."""
    used = np.ones(h.shape[0], bool) if weight is None else weight > 0
    if moved_g is not None and not np.any(moved_g[used]):
        warnings.warn(f"loss {objective.name!r} has a zero gradient for every row, at the "
                      "starting margin and 1 above it, so no tree can split: the model stays "
                      "constant. Is "
                      "the loss a differentiable function of f (jnp.round and comparisons "
                      "are flat)?", RuntimeWarning, stacklevel=4)
    negative = (h[used] < 0).any(axis=1)
    if negative.mean() > 0.5:
        warnings.warn(f"loss {objective.name!r} has negative curvature (a concave loss) for "
                      f"{int(negative.sum())} of {int(used.sum())} rows at the starting "
                      "margin; it is clipped to hessian_floor, and leaf steps -G / (H + l2) may "
                      "grow without bound. Minimise a convex loss (negate a likelihood), or "
                      "pass hessian='constant'.", RuntimeWarning, stacklevel=4)


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
            "raise l2, hold each leaf with max_delta_step (0.7 is XGBoost's for Poisson "
            "counts), or make the loss safe for large margins (logaddexp, clipping).")
    if not finite.all():
        first = int(np.argmin(finite))
        raise FloatingPointError(
            f"loss {model.objective.name!r} produced NaN or infinite leaf values from round "
            f"{first} on ({int((~finite).sum())} of {model.n_trees} trees). The gradient sums "
            "overflowed: lower learning_rate, raise l2 or set max_delta_step.")
