"""Validation sets, metrics per round, early stopping and callbacks.

After each compiled chunk of rounds, the chunk's trees are applied to every validation
set on device (the sets are binned once, with the training bin edges, so a tree is a
few comparisons of bytes) and every metric is computed after every round, in one
compiled scan. The host then reads one small array per chunk to decide whether to stop:
early stopping costs a device round-trip per chunk, not per tree. Callbacks are then
replayed on the host, one call per round of the chunk (or per ``period`` rounds), from
those per-round scores; one that stops training cuts the model back to its round.
"""

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxgbt.core.layout import layout
from jaxgbt.core.tracing import is_traced, traced_like
from jaxgbt.core.tree import BinnedTree
from jaxgbt.evaluation import metrics as metrics_module
from jaxgbt.evaluation.progress import progress_display


class EvalSet(NamedTuple):
    """One validation set, binned with the training thresholds.

    Attributes:
      name: used in history keys ("<name>:<metric>").
      bins: u8[F, Nv].
      y: labels (array or dict of arrays).
      weight: f32[Nv].
      layout: a ``metrics.QueryLayout`` for ranking metrics, else None.
    """

    name: str
    bins: jax.Array
    y: Any
    weight: jax.Array
    layout: Any = None


class EvalState(NamedTuple):
    """What a callback sees after a round (host NumPy values).

    Attributes:
      rounds_done: rounds trained so far; the round just trained is ``round``.
      history: {"<set>:<metric>": f64[rounds_done]}.
      best_round: the best round so far of the watched metric, or None.
      watched: the history key early stopping watches, or None without eval sets.
      scores: {"<set>:<metric>": float}, this round's validation scores (the last
        entries of ``history``).
      model: a function of no arguments returning the model of the first
        ``rounds_done`` trees (a ``Booster``), built only when called; None where no
        model can be built (a bare evaluator).
    """

    rounds_done: int
    history: dict[str, np.ndarray]
    best_round: int | None
    watched: str | None
    scores: dict[str, float] | None = None
    model: Callable[[], Any] | None = None

    @property
    def round(self) -> int:
        """The index of the round just trained, 0-based."""
        return self.rounds_done - 1


@dataclasses.dataclass(frozen=True)
class Callback:
    """A callback with its own period: ``function(state)`` is called after rounds
    ``period - 1``, ``2 * period - 1``, ... (every round for ``period=1``, as a plain
    function is). Returning True stops training after that round.

    Any callable with an integer attribute ``period`` is read the same way.
    """

    function: Callable[[EvalState], Any]
    period: int = 1

    def __post_init__(self):
        if isinstance(self.period, bool) or not isinstance(self.period, int) or self.period < 1:
            raise ValueError(f"Callback period must be an integer >= 1; got {self.period!r}.")

    def __call__(self, state: EvalState):
        return self.function(state)


def callback_period(callback: Callable) -> int:
    """Rounds between two calls of ``callback``: its ``period`` attribute, default 1."""
    period = getattr(callback, "period", 1)
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 1:
        raise ValueError(f"callback {getattr(callback, '__name__', callback)!r} has "
                         f"period={period!r}; a period must be an integer >= 1 (rounds "
                         "between calls).")
    return int(period)


@functools.cache
def loss_metric(loss: Callable, vector_output: bool) -> Callable:
    """The training loss as a metric on raw margins (f32[N] or f32[N, K]): its weighted
    mean over rows."""
    del vector_output  # the margins arrive shaped as the loss expects them

    def mean_loss(y, f, weight=None):
        values = jax.vmap(loss)(y, f)
        weight = jnp.ones_like(values) if weight is None else weight
        return jnp.sum(weight * values) / jnp.sum(weight)

    mean_loss.__dict__.update(name="loss", higher_is_better=False, needs_group=False,
                              on_margin=True)
    return mean_loss


def default_metric(objective, vector_output: bool, grouped: bool) -> Callable:
    """The metric an objective is usually judged by (its ``metric``); for an objective
    without one (custom losses, AFT), ndcg@10 with queries, else its own loss."""
    if objective.metric is not None:
        return metrics_module.get(objective.metric)
    if grouped:
        return metrics_module.get("ndcg@10")
    return loss_metric(objective.loss, vector_output)


def resolve_metrics(eval_metric, objective, vector_output: bool, grouped: bool) -> tuple:
    if eval_metric is None:
        return (default_metric(objective, vector_output, grouped),)
    if isinstance(eval_metric, (str,)) or callable(eval_metric):
        eval_metric = [eval_metric]
    if not isinstance(eval_metric, (list, tuple)):
        raise TypeError(f"eval_metric={eval_metric!r} must be a metric name, a function "
                        "metric(y, pred, weight=None), or a list of them, e.g. "
                        "eval_metric=['logloss', 'auc'].")
    resolved = []
    for metric in eval_metric:
        fn = metrics_module.get(metric) if isinstance(metric, str) else metric
        if not callable(fn):
            raise TypeError(f"eval_metric entries must be names or functions; got {metric!r}.")
        if not hasattr(fn, "higher_is_better"):
            raise ValueError(f"eval_metric {getattr(fn, '__name__', fn)!r} needs an attribute "
                             "higher_is_better (True or False), so early stopping knows "
                             "which way is better: my_metric.higher_is_better = False")
        resolved.append(fn)
    return tuple(resolved)


def metric_name(metric: Callable) -> str:
    return getattr(metric, "name", getattr(metric, "__name__", "metric"))


@functools.partial(jax.jit, static_argnames=("metrics", "link", "vector_output", "n_bins",
                                             "grow_policy"))
def evaluate_rounds(trees: BinnedTree, eval_set: EvalSet, raw: jax.Array, *, metrics: tuple,
                    link, vector_output: bool, n_bins: int,
                    grow_policy: str = "oblivious") -> tuple[jax.Array, jax.Array]:
    """Applies each of C trees in turn to a validation set and scores every round.

    Args:
      trees: C trees stacked (leaf values with the learning rate applied).
      raw: f32[Nv, K], the set's margins before the first of them.

    Returns:
      The margins after the last tree, and f32[C, n_metrics] scores.
    """

    def score(raw):
        out = raw if vector_output else raw[:, 0]
        pred = out if link is None else link(out)
        values = []
        for metric in metrics:
            given = out if getattr(metric, "on_margin", False) else pred
            if getattr(metric, "needs_group", False):
                values.append(metric(eval_set.y, given, eval_set.weight, group=eval_set.layout))
            else:
                values.append(metric(eval_set.y, given, eval_set.weight))
        return jnp.stack([jnp.asarray(v, jnp.float32) for v in values])

    def step(raw, tree):
        leaf = layout(grow_policy).leaf_from_bins(eval_set.bins, tree, n_bins)
        raw = raw + tree.leaf_value[leaf]
        return raw, score(raw)

    return jax.lax.scan(step, raw, trees)


@functools.partial(jax.jit, static_argnames="rounds")
def _metric_columns(chunks: tuple, rounds: int | None) -> tuple[jax.Array, ...]:
    """Each metric's scores f32[R] of the first ``rounds`` rounds (all: None) of the
    chunks' f32[C, n_metrics] scores, as one program (under vmap, eager joins and
    slices of batched arrays compiled a transpose, a concatenate and a slice each)."""
    values = jnp.concatenate(chunks)[:rounds]
    return tuple(values[:, j] for j in range(values.shape[1]))


@functools.partial(jax.jit, static_argnames=("early_stopping_rounds", "higher_is_better"))
def _running_best(best_score: jax.Array, best: jax.Array, values: jax.Array,
                  first_round: jax.Array, rounds_done: jax.Array, n_trees: jax.Array, *,
                  early_stopping_rounds: int, higher_is_better: bool):
    """The best round carried across chunks inside a trace, by the rule of
    ``best_round`` (the earliest among ties, NaN never best).

    Args:
      best_score: f32[], the best score so far, negated when higher is better (+inf
        before any round).
      best: i32[], its round.
      values: f32[C, n_metrics], the scores of rounds ``first_round`` ..
        ``rounds_done`` - 1; the first metric is watched (sliced here, not by an eager
        slice of a batched array, which compiles a transpose of its own).

    Returns:
      (best_score, best, stop): the updated pair, and the i32[] round from which to
      skip rounds: ``rounds_done`` if the best is ``early_stopping_rounds`` or more
      rounds back, else ``n_trees`` (no stop).
    """
    values = values[:, 0]
    scores = jnp.where(jnp.isnan(values), jnp.inf, -values if higher_is_better else values)
    i = jnp.argmin(scores)
    better = scores[i] < best_score
    best_score = jnp.where(better, scores[i], best_score)
    best = jnp.where(better, first_round + i.astype(jnp.int32), best)
    stalled = rounds_done - 1 - best >= early_stopping_rounds
    stop = jnp.where(stalled, rounds_done, n_trees)
    return best_score, best, stop


def best_round(values: np.ndarray, higher_is_better: bool) -> int:
    """Index of the best value (the earliest among ties); NaN never counts as best."""
    finite = np.where(np.isnan(values), -np.inf if higher_is_better else np.inf, values)
    return int(np.argmax(finite) if higher_is_better else np.argmin(finite))


class Evaluator:
    """Keeps every validation set's margins and history across chunks of rounds.

    ``after_chunk(progress)`` is the ``on_chunk`` hook of ``engine.loop.train``: it
    scores the new rounds, calls the user's callbacks once per round, shows progress
    (``verbose``) and returns the number of rounds to keep when training stops (None to
    go on).

    Args (beyond the obvious):
      start_margins: f32[Nv, K] per validation set: where its margins start (a warm
        start's predictions, ``eval_base_margin``); default: ``base_score`` f32[K].
      model_of: ``model_of(trees, n)``, the model of the first n of a stack of trees,
        offered to callbacks as ``EvalState.model``; None offers none.
    """

    def __init__(self, eval_sets: Sequence[EvalSet], metrics: tuple, base_score: jax.Array,
                 link, vector_output: bool, n_bins: int, early_stopping_rounds: int | None,
                 callbacks: Sequence[Callable], verbose: int, traced: bool,
                 start_margins: Sequence[jax.Array] | None = None, n_trees: int = 0,
                 grow_policy: str = "oblivious", model_of: Callable | None = None):
        self.eval_sets = list(eval_sets)
        self.metrics = metrics
        self.options = dict(metrics=metrics, link=link, vector_output=vector_output,
                            n_bins=n_bins, grow_policy=grow_policy)
        n_outputs = base_score.shape[0]
        self.raw = (list(start_margins) if start_margins is not None else
                    [jnp.broadcast_to(base_score, (s.weight.shape[0], n_outputs))
                     for s in self.eval_sets])
        self.scores: list[list[jax.Array]] = [[] for _ in self.eval_sets]
        self.early_stopping_rounds = early_stopping_rounds
        self.callbacks = [(callback, callback_period(callback)) for callback in callbacks]
        self.model_of = model_of
        self.traced = traced
        self.rounds_evaluated = 0
        self.rounds_kept: int | None = None  # where a callback stopped training
        self.watched = (f"{self.eval_sets[-1].name}:{metric_name(metrics[0])}"
                        if self.eval_sets else None)
        self.best: int | jax.Array | None = None  # traced inside jax.vmap / jax.jit
        self._best_score: jax.Array | None = None  # the best so far, traced: lower is better
        self.n_trees = n_trees
        self.display = None if traced else progress_display(verbose, n_trees)

    @property
    def active(self) -> bool:
        """Whether there is anything to do between chunks (else training never waits)."""
        return bool(self.eval_sets or self.callbacks or self.display is not None)

    def after_chunk(self, progress) -> int | None:
        """Scores the chunk's new rounds; returns the rounds to keep if training stops
        here (all of them for early stopping, fewer when a callback stopped at an
        earlier round of the chunk), else None. ``progress`` holds every tree so far
        (``engine.loop.Progress``), or under a trace the chunk's alone (``ChunkDone``)."""
        first_new = self.rounds_evaluated
        held = first_new - progress.first_round  # trees before the new ones it holds
        # On the host when concrete: an eager device slice compiles a program for every
        # (length, start) pair, one per chunk and tree array.
        new = jax.tree.map(lambda a: a if held == 0 else
                           a[held:] if is_traced(a) else np.asarray(a)[held:], progress.trees)
        for i, eval_set in enumerate(self.eval_sets):
            # Batched from the first chunk on under vmap, as the margins come back: one
            # compiled evaluation, not one per form (``traced_like``).
            self.raw[i], values = evaluate_rounds(new, eval_set._replace(name=None),
                                                  traced_like(self.raw[i], new),
                                                  **self.options)
            self.scores[i].append(values)
        self.rounds_evaluated = progress.rounds_done
        if self.traced:
            return self._traced_stop(first_new, progress.rounds_done)
        history = self._host_history()
        self.rounds_kept = self._replay_callbacks(first_new, progress, history)
        state = self.state(history)
        self.best = state.best_round
        stop = self.rounds_kept is not None
        if self.early_stopping_rounds is not None and state.best_round is not None:
            stop = stop or state.rounds_done - 1 - state.best_round >= self.early_stopping_rounds
        if self.display is not None:
            if stop or state.rounds_done >= self.n_trees:
                self.display.close(state, stopped=stop)
            else:
                self.display.update(state)
        return state.rounds_done if stop else None

    def _traced_stop(self, first_new: int, rounds_done: int) -> jax.Array | None:
        """Early stopping inside a trace (``jax.vmap``: one decision per model), where the
        host cannot read the scores: the best round so far is carried as a traced value
        (``self.best``), and the returned i32[] is the round from which training skips
        its rounds: ``rounds_done`` once the watched score has not improved for
        ``early_stopping_rounds`` rounds, else ``n_trees``. None without early
        stopping."""
        if self.early_stopping_rounds is None or not self.eval_sets:
            return None
        if self._best_score is None:  # batched as the scores (``traced_like``)
            self._best_score, self.best = traced_like(
                (jnp.asarray(jnp.inf, jnp.float32), jnp.asarray(0, jnp.int32)),
                self.scores[-1][-1])
        self._best_score, self.best, stop = _running_best(
            self._best_score, self.best, self.scores[-1][-1],
            jnp.asarray(first_new, jnp.int32), jnp.asarray(rounds_done, jnp.int32),
            jnp.asarray(self.n_trees, jnp.int32), early_stopping_rounds=self.early_stopping_rounds,
            higher_is_better=self.metrics[0].higher_is_better)
        return stop

    def _replay_callbacks(self, first_new: int, progress, history: dict) -> int | None:
        """Calls each callback after every round (of its period) from ``first_new`` to
        ``progress.rounds_done``; returns the rounds done at the first round one of them
        returned True, else None. The scores come from ``history``: no device work."""
        if not self.callbacks:
            return None
        for round_index in range(first_new, progress.rounds_done):
            due = [callback for callback, period in self.callbacks
                   if (round_index + 1) % period == 0]
            if not due:
                continue
            rounds_done = round_index + 1
            model = (None if self.model_of is None
                     else functools.partial(self.model_of, progress.trees, rounds_done))
            state = self.state(history, rounds_done)._replace(model=model)
            stop = False
            for callback in due:  # every due callback sees the round, even after a stop
                stop = bool(callback(state)) or stop
            if stop:
                return rounds_done
        return None

    def history(self) -> dict[str, jax.Array] | None:
        """{"<set>:<metric>": f32[rounds]} as device arrays (traced under vmap), cut
        back to the round where a callback stopped training."""
        if self.traced or any(is_traced(c) for chunks in self.scores for c in chunks):
            return self._scores_by_metric(jnp)
        host = self._scores_by_metric(np)
        return None if host is None else {key: jax.device_put(values)
                                          for key, values in host.items()}

    def _host_history(self) -> dict[str, np.ndarray]:
        """The history of every round evaluated, f64 on the host."""
        return {key: values.astype(np.float64)
                for key, values in (self._scores_by_metric(np) or {}).items()}

    def _scores_by_metric(self, xp) -> dict | None:
        """The history, joined with ``xp`` (numpy on the host when the scores are
        concrete: eager device concatenates and slices compile a program for every
        number of rounds)."""
        if not self.eval_sets:
            return None
        out = {}
        for eval_set, chunks in zip(self.eval_sets, self.scores, strict=True):
            if xp is jnp and chunks:
                columns = _metric_columns(tuple(chunks), self.rounds_kept)
            else:
                values = (np.concatenate([np.asarray(c) for c in chunks]) if chunks
                          else xp.zeros((0, len(self.metrics)), xp.float32))
                if self.rounds_kept is not None:
                    values = values[:self.rounds_kept]
                columns = [values[:, j] if xp is jnp else np.ascontiguousarray(values[:, j])
                           for j in range(len(self.metrics))]
            for metric, column in zip(self.metrics, columns, strict=True):
                out[f"{eval_set.name}:{metric_name(metric)}"] = column
        return out

    def state(self, history: dict[str, np.ndarray] | None = None,
              rounds_done: int | None = None) -> EvalState:
        """The state after ``rounds_done`` rounds (default: all evaluated, or those
        kept), from the host ``history`` of every round evaluated."""
        if history is None:
            history = self._host_history()
        if rounds_done is None:
            rounds_done = (self.rounds_evaluated if self.rounds_kept is None
                           else self.rounds_kept)
        history = {key: values[:rounds_done] for key, values in history.items()}
        best = None
        if self.watched is not None and history[self.watched].size:
            best = best_round(history[self.watched], self.metrics[0].higher_is_better)
        scores = {key: float(values[-1]) for key, values in history.items() if values.size}
        return EvalState(rounds_done, history, best, self.watched, scores)
