"""jaxgbt.metrics against scikit-learn, and against float64 loop references where
scikit-learn has no equivalent (map@k, the concordance index).

Data are random with ties (rounded predictions, repeated times) and positive weights.
Tolerances: rtol 1e-5 in float32; 1e-12 in float64 under jax.enable_x64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as skm

from jaxgbt import metrics, objectives
from jaxgbt.evaluation.metrics import QueryLayout, query_layout
from jaxgbt.objectives.naming import Family, parse

N = 300  # one row count for most tests, so op-by-op dispatch reuses its compiled kernels
RTOL = 1e-5


def _data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    weight = rng.uniform(0.2, 2.0, n)
    return rng, weight


def _f32(*arrays):
    return [np.asarray(a, np.float32) for a in arrays]


# Regression, deviances, quantiles --------------------------------------------------------


def _sk_rmse(y, p, sample_weight):
    return np.sqrt(skm.mean_squared_error(y, p, sample_weight=sample_weight))


REGRESSION = {
    "rmse": _sk_rmse,
    "mae": skm.mean_absolute_error,
    "poisson_deviance": skm.mean_poisson_deviance,
    "gamma_deviance": skm.mean_gamma_deviance,
    "tweedie@-1": lambda y, p, sample_weight: skm.mean_tweedie_deviance(
        y, p, sample_weight=sample_weight, power=-1.0),
    "tweedie@0": lambda y, p, sample_weight: skm.mean_tweedie_deviance(
        y, p, sample_weight=sample_weight, power=0.0),
    "tweedie@1.5": lambda y, p, sample_weight: skm.mean_tweedie_deviance(
        y, p, sample_weight=sample_weight, power=1.5),
    "tweedie@3": lambda y, p, sample_weight: skm.mean_tweedie_deviance(
        y, p, sample_weight=sample_weight, power=3.0),
    "pinball@0.1": lambda y, p, sample_weight: skm.mean_pinball_loss(
        y, p, sample_weight=sample_weight, alpha=0.1),
    "pinball@0.9": lambda y, p, sample_weight: skm.mean_pinball_loss(
        y, p, sample_weight=sample_weight, alpha=0.9),
}


@pytest.mark.parametrize("name", sorted(REGRESSION))
def test_regression_metrics_match_sklearn(name):
    rng, weight = _data(1)
    # Positive targets with repeats (Gamma and power 3 need y > 0), zeros where allowed.
    y = rng.choice([0.5, 1.0, 2.0, 3.5], N) * rng.gamma(2.0, size=N).round(1).clip(0.1)
    if name in ("poisson_deviance", "tweedie@1.5", "tweedie@-1", "tweedie@0"):
        y[::7] = 0.0
    pred = rng.gamma(2.0, size=N).clip(0.05)
    y, pred, weight = _f32(y, pred, weight)
    expected = REGRESSION[name](y.astype(np.float64), pred.astype(np.float64),
                                sample_weight=weight.astype(np.float64))
    np.testing.assert_allclose(metrics.get(name)(y, pred, weight), expected, rtol=RTOL)
    unweighted = REGRESSION[name](y.astype(np.float64), pred.astype(np.float64),
                                  sample_weight=None)
    np.testing.assert_allclose(metrics.get(name)(y, pred), unweighted, rtol=RTOL)


# Classification ------------------------------------------------------------------------


def _binary(seed, n=N, decimals=1):
    rng, weight = _data(seed, n)
    y = (rng.random(n) < 0.35).astype(np.float32)
    # Scores correlated with y and rounded, so that many positives tie with negatives.
    pred = np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1).round(decimals)
    return (y, *_f32(pred, weight))


def test_logloss_matches_sklearn_including_clipped_probabilities():
    y, pred, weight = _binary(2, decimals=3)
    pred[:5], y[:5] = 1.0, 0.0  # confidently wrong: clipped to 1 - eps, finite
    pred[5:10], y[5:10] = 0.0, 1.0
    expected = skm.log_loss(y, pred, sample_weight=weight, labels=[0, 1])
    np.testing.assert_allclose(metrics.logloss(y, pred, weight), expected, rtol=RTOL)
    assert np.isfinite(float(metrics.logloss(y, pred, weight)))


@pytest.mark.parametrize("seed,decimals", [(3, 1), (4, 2), (5, 6)])
def test_auc_matches_sklearn_with_ties_and_weights(seed, decimals):
    y, pred, weight = _binary(seed, decimals=decimals)
    expected = skm.roc_auc_score(y, pred, sample_weight=weight)
    np.testing.assert_allclose(metrics.auc(y, pred, weight), expected, rtol=RTOL)
    np.testing.assert_allclose(metrics.auc(y, pred), skm.roc_auc_score(y, pred), rtol=RTOL)


def test_auc_of_all_tied_scores_is_one_half_and_of_one_class_nan():
    y, _, weight = _binary(6)
    np.testing.assert_allclose(metrics.auc(y, np.full(N, 0.3, np.float32), weight), 0.5, rtol=RTOL)
    assert np.isnan(float(metrics.auc(np.ones(N, np.float32), np.arange(N, dtype=np.float32))))


def test_accuracy_binary_and_multiclass_match_sklearn():
    y, pred, weight = _binary(7, decimals=2)
    pred[:20] = 0.5  # exactly 0.5 predicts class 0
    expected = skm.accuracy_score(y, pred > 0.5, sample_weight=weight)
    np.testing.assert_allclose(metrics.accuracy(y, pred, weight), expected, rtol=RTOL)
    np.testing.assert_allclose(metrics.accuracy(y, pred[:, None], weight), expected, rtol=RTOL)

    labels, proba, weight = _multiclass(8)
    expected = skm.accuracy_score(labels, proba.argmax(axis=1), sample_weight=weight)
    np.testing.assert_allclose(metrics.accuracy(labels, proba, weight), expected, rtol=RTOL)


def _multiclass(seed, n=N, k=4):
    rng, weight = _data(seed, n)
    labels = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)).round(1) + 1.5 * np.eye(k)[labels]
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    proba = proba.astype(np.float32)
    return labels, proba / proba.sum(axis=1, keepdims=True), weight.astype(np.float32)


def test_multi_logloss_matches_sklearn():
    labels, proba, weight = _multiclass(9)
    proba[0] = [1.0, 0.0, 0.0, 0.0]  # clipped to eps when the label is not 0
    labels[0] = 3
    expected = skm.log_loss(labels, proba, sample_weight=weight, labels=[0, 1, 2, 3])
    np.testing.assert_allclose(metrics.multi_logloss(labels, proba, weight), expected, rtol=RTOL)
    labels[1] = -1  # out of range: NaN, not the last class
    assert np.isnan(float(metrics.multi_logloss(labels, proba, weight)))


# Ranking -------------------------------------------------------------------------------


def _queries(seed, n_queries=40):
    """Query sizes 2..12 (ndcg_score needs two documents), grades 0..3, tied scores."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 13, n_queries)
    group = np.repeat(rng.permutation(1000)[:n_queries], sizes)  # ids need not be sorted
    n = group.size
    relevance = rng.choice(4, n, p=[0.5, 0.25, 0.15, 0.1]).astype(np.float32)
    relevance[group == group[0]] = 0  # one query without a relevant row
    pred = (0.3 * relevance + rng.random(n)).round(1).astype(np.float32)
    weight = np.repeat(rng.uniform(0.5, 2.0, n_queries), sizes) * rng.uniform(0.8, 1.2, n)
    return relevance, pred, weight.astype(np.float32), group


def _runs(group):
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    return np.split(np.arange(group.size), starts[1:])


def _ndcg_reference(relevance, pred, weight, group, k):
    scores, query_weights = [], []
    for rows in _runs(group):
        gain = 2.0 ** relevance[rows].astype(np.float64) - 1
        if gain.sum() == 0:
            scores.append(1.0)  # LightGBM's convention; scikit-learn would give 0
        else:
            scores.append(skm.ndcg_score(gain[None], pred[rows][None].astype(np.float64), k=k))
        query_weights.append(weight[rows].astype(np.float64).mean())
    return np.average(scores, weights=query_weights)


def _map_reference(relevance, pred, weight, group, k):
    """LightGBM's MapMetric::CalMapAtK, with ties in row order, as plain loops."""
    scores, query_weights = [], []
    for rows in _runs(group):
        order = sorted(range(len(rows)), key=lambda i: (-float(pred[rows][i]), i))
        relevant = [bool(relevance[rows][i] > 0.5) for i in order]
        cut = len(rows) if k is None else min(k, len(rows))
        hits, total = 0, 0.0
        for rank in range(cut):
            if relevant[rank]:
                hits += 1
                total += hits / (rank + 1)
        n_relevant = sum(relevant)
        scores.append(total / min(n_relevant, cut) if n_relevant else 1.0)
        query_weights.append(weight[rows].astype(np.float64).mean())
    return np.average(scores, weights=query_weights)


@pytest.mark.parametrize("k", [None, 1, 3, 10])
def test_ndcg_matches_sklearn_per_query(k):
    relevance, pred, weight, group = _queries(10)
    metric = metrics.ndcg_at(k)
    expected = _ndcg_reference(relevance, pred, weight, group, k)
    np.testing.assert_allclose(metric(relevance, pred, weight, group=group), expected, rtol=RTOL)
    unweighted = _ndcg_reference(relevance, pred, np.ones_like(weight), group, k)
    np.testing.assert_allclose(metric(relevance, pred, group=group), unweighted, rtol=RTOL)


def test_ndcg_of_a_query_without_relevant_rows_is_one():
    relevance = np.zeros(6, np.float32)
    group = np.array([1, 1, 1, 2, 2, 2])
    pred = np.array([0.1, 0.2, 0.3, 0.3, 0.2, 0.1], np.float32)
    np.testing.assert_allclose(metrics.ndcg_at(3)(relevance, pred, group=group), 1.0)
    relevance[3] = 2  # query 2 ranks its only relevant row first: also 1
    np.testing.assert_allclose(metrics.ndcg_at(3)(relevance, pred, group=group), 1.0)


@pytest.mark.parametrize("k", [None, 1, 5])
def test_map_matches_loop_reference(k):
    relevance, pred, weight, group = _queries(11)
    metric = metrics.map_at(k)
    expected = _map_reference(relevance, pred, weight, group, k)
    np.testing.assert_allclose(metric(relevance, pred, weight, group=group), expected, rtol=RTOL)


def test_query_layout_pads_queries_and_rejects_split_queries():
    layout = query_layout(np.array([7, 7, 3, 3, 3, 9]))
    np.testing.assert_array_equal(layout.index, [[0, 1, 0], [2, 3, 4], [5, 0, 0]])
    np.testing.assert_array_equal(layout.mask, [[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    with pytest.raises(ValueError, match=r"queries \[7\] are not contiguous"):
        query_layout(np.array([7, 7, 3, 7]))


def test_traced_group_ids_raise_and_say_to_build_the_layout():
    relevance, pred, _, group = _queries(12, n_queries=5)
    metric = metrics.ndcg_at(3)
    with pytest.raises(TypeError, match="query_layout"):
        jax.jit(lambda p, g: metric(relevance, p, group=g))(pred, group)


# Survival ------------------------------------------------------------------------------


def _concordance_reference(time, event, risk, weight):
    """Harrell's C as lifelines counts it (utils/concordance.py, the naive version), with
    predicted event times -risk and pairs weighing w_a * w_b."""
    predicted = -risk.astype(np.float64)
    correct = tied = pairs = 0.0
    for a in range(len(time)):
        for b in range(a + 1, len(time)):
            if time[a] == time[b]:
                valid = event[a] != event[b]
            else:
                valid = ((event[a] and event[b]) or (event[a] and time[a] < time[b])
                         or (event[b] and time[b] < time[a]))
            if not valid:
                continue
            w = float(weight[a]) * float(weight[b])
            pairs += w
            if predicted[a] == predicted[b]:
                tied += w
            elif predicted[a] < predicted[b]:
                correct += w * ((time[a] < time[b]) or (time[a] == time[b] and event[a]))
            else:
                correct += w * ((time[a] > time[b]) or (time[a] == time[b] and event[b]))
    return (correct + 0.5 * tied) / pairs


def _survival(seed, n=N):
    rng, weight = _data(seed, n)
    risk = rng.normal(size=n).round(1)  # ties in risk
    time = np.ceil(rng.exponential(20 * np.exp(-0.7 * risk)))  # integer times: ties
    event = rng.random(n) < 0.6
    y = np.stack([time, event.astype(np.float64)], axis=1)
    return y, risk, weight, time, event


def test_concordance_index_matches_loop_reference():
    y, risk, weight, time, event = _survival(13)  # N = 300: two chunks, one padded
    y, risk, weight = _f32(y, risk, weight)
    expected = _concordance_reference(time, event, risk, weight)
    np.testing.assert_allclose(metrics.concordance_index(y, risk, weight), expected, rtol=RTOL)
    unweighted = _concordance_reference(time, event, risk, np.ones(N))
    np.testing.assert_allclose(metrics.concordance_index(y, risk), unweighted, rtol=RTOL)


def test_float64_auc_and_concordance_index_match_tightly():
    y_binary, pred, weight = _binary(14, decimals=2)
    y, risk, weight_s, time, event = _survival(15)
    with jax.enable_x64(True):
        got = metrics.auc(y_binary.astype(np.float64), pred.astype(np.float64),
                          weight.astype(np.float64))
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(got, skm.roc_auc_score(y_binary, pred, sample_weight=weight),
                                   rtol=1e-12)
        got = metrics.concordance_index(y, risk, weight_s)
        np.testing.assert_allclose(got, _concordance_reference(time, event, risk, weight_s),
                                   rtol=1e-12)


# jit, vmap, shapes ---------------------------------------------------------------------


def test_jit_and_vmap_over_a_batch_of_predictions():
    """One jitted, vmapped call per kind of metric equals the metric row by row."""
    n_models = 3
    rng = np.random.default_rng(16)
    y, pred, weight = _binary(16)
    preds = np.clip(pred[None] + rng.normal(0, 0.1, (n_models, N)), 0.01, 0.99).round(2)
    preds = preds.astype(np.float32)
    labels, proba, _ = _multiclass(17)
    probas = np.stack([np.roll(proba, i, axis=1) for i in range(n_models)])
    y_surv, risk, _, _, _ = _survival(18)
    risks = np.stack([risk + i * rng.normal(size=N) for i in range(n_models)]).astype(np.float32)
    relevance, score, q_weight, group = _queries(19)
    scores = np.stack([score, -score, np.zeros_like(score)])
    layout = query_layout(group)
    cases = [
        (metrics.auc, y, preds, weight, {}),
        (metrics.get("pinball@0.9"), y, preds, weight, {}),
        (metrics.multi_logloss, labels, probas, None, {}),
        (metrics.concordance_index, y_surv.astype(np.float32), risks, None, {}),
        (metrics.get("ndcg@5"), relevance, scores, q_weight, {"group": layout}),
        (metrics.get("map@3"), relevance, scores, q_weight, {"group": layout}),
    ]
    for metric, target, batch, w, kwargs in cases:
        batched = jax.jit(jax.vmap(lambda p, m=metric, t=target, w=w, kw=kwargs: m(t, p, w, **kw)))
        got = batched(batch)
        assert got.shape == (n_models,)
        want = [metric(target, b, w, **kwargs) for b in batch]
        np.testing.assert_allclose(got, want, rtol=RTOL, err_msg=metric.name)


def test_query_layout_is_a_traced_argument_under_jit():
    relevance, pred, weight, group = _queries(20)
    metric = metrics.ndcg_at(5)
    layout = query_layout(group)
    assert isinstance(layout, QueryLayout)
    jitted = jax.jit(metric)
    np.testing.assert_allclose(jitted(relevance, pred, weight, group=layout),
                               metric(relevance, pred, weight, group=group), rtol=RTOL)


def test_shape_mismatches_raise_with_the_shapes():
    with pytest.raises(ValueError, match=r"rmse: y has shape \(3,\) and pred \(4,\)"):
        metrics.rmse(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError, match=r"weight has shape \(2,\)"):
        metrics.mae(np.zeros(3), np.zeros(3), np.ones(2))
    with pytest.raises(ValueError, match=r"y should be \(N, 2\)"):
        metrics.concordance_index(np.zeros(3), np.zeros(3))


# Registry ------------------------------------------------------------------------------

HIGHER_IS_BETTER = {
    "rmse": False, "mae": False, "logloss": False, "auc": True, "accuracy": True,
    "multi_logloss": False, "poisson_deviance": False, "gamma_deviance": False,
    "concordance_index": True, "ndcg": True, "map": True,
    "ndcg@10": True, "map@5": True, "pinball@0.9": False, "tweedie@1.5": False,
}


def test_higher_is_better_values():
    assert set(metrics.METRICS) <= set(HIGHER_IS_BETTER)
    for name, expected in HIGHER_IS_BETTER.items():
        assert metrics.higher_is_better(name) is expected, name

    def my_metric(y, pred, weight=None):
        return jnp.mean(y * pred)

    with pytest.raises(ValueError, match="my_metric.higher_is_better = True"):
        metrics.higher_is_better(my_metric)
    my_metric.higher_is_better = True
    assert metrics.higher_is_better(my_metric) is True


def test_get_resolves_names_and_parameters():
    assert metrics.get("auc") is metrics.auc
    assert metrics.get("ndcg@10") is metrics.ndcg_at(10)  # cached: jit caches are shared
    assert metrics.get("ndcg@10").name == "ndcg@10"
    assert metrics.get("map@5").needs_group and not metrics.rmse.needs_group
    assert metrics.get("pinball@0.9").name == "pinball@0.9"
    assert metrics.get("tweedie@1.5").name == "tweedie@1.5"
    assert metrics.get(metrics.mae) is metrics.mae


@pytest.mark.parametrize("name,message", [
    ("rsme", r"unknown metric 'rsme'; known metrics: accuracy, auc, .*rmse.*ndcg@k"),
    ("ndcg@ten", r"metric 'ndcg@ten': cannot read 'ten'; write it as ndcg@k \(k an integer"),
    ("ndcg@", r"metric 'ndcg@': cannot read ''"),
    ("ndcg@0", r"metric 'ndcg@0': ndcg_at: k=0 is the number of top positions"),
    ("pinball@1.5", r"metric 'pinball@1.5': pinball: alpha=1.5 is a quantile level"),
    ("tweedie@0.5", r"metric 'tweedie@0.5': tweedie_deviance: power=0.5 is in \(0, 1\)"),
    ("pinball", r"unknown metric 'pinball'"),  # no bare form: alpha has no default
])
def test_bad_names_raise_with_the_known_names(name, message):
    with pytest.raises(ValueError, match=message):
        metrics.get(name)


# Metrics and objectives read "base@value" with one parser (jaxgbt.objectives.naming).


@pytest.mark.parametrize("text", ["high", "", "0.9@1", "0,9"])
def test_objectives_and_metrics_refuse_an_unreadable_value_alike(text):
    with pytest.raises(ValueError) as objective_error:
        objectives.resolve(f"quantile@{text}")
    with pytest.raises(ValueError) as metric_error:
        metrics.get(f"pinball@{text}")
    assert str(objective_error.value) == (
        f"loss='quantile@{text}': cannot read {text!r}; write it as quantile@alpha "
        "(0 < alpha < 1).")
    assert str(metric_error.value) == (
        f"metric 'pinball@{text}': cannot read {text!r}; write it as pinball@alpha "
        "(alpha in [0, 1]).")
    assert objectives.by_name(f"quantile@{text}") is None  # a saved name that cannot load


def test_objectives_and_metrics_name_the_name_for_a_value_out_of_range():
    with pytest.raises(ValueError, match=r"^loss='quantile@1.5': quantile alpha=1.5 must lie"):
        objectives.resolve("quantile@1.5")
    with pytest.raises(ValueError, match=r"^metric 'pinball@1.5': pinball: alpha=1.5 is a"):
        metrics.get("pinball@1.5")
    with pytest.raises(ValueError, match=r"^loss='tweedie@0.5': tweedie power=0.5 must lie"):
        objectives.resolve("tweedie@0.5")
    with pytest.raises(ValueError, match=r"^metric 'tweedie@0.5': tweedie_deviance: power"):
        metrics.get("tweedie@0.5")


@pytest.mark.parametrize("text", ["0.9", "0.90", "9e-1", " 0.9"])
def test_objectives_and_metrics_read_the_same_values(text):
    objective = objectives.resolve(f"quantile@{text}")
    assert objective is objectives.quantile(0.9) and objective.leaf_quantile == 0.9
    assert metrics.get(f"pinball@{text}") is metrics.pinball(0.9)
    assert metrics.get(objective.metric) is metrics.pinball(0.9)  # its default metric


def test_the_shared_parser():
    families = {"scaled": Family(lambda v: ("scaled", v), float, "scaled@x (x > 0)", 1.0),
                "top": Family(lambda k: ("top", k), int, "top@k")}
    assert parse("scaled@2.5", families, "thing ") == ("scaled", 2.5)
    assert parse("scaled", families, "thing ") == ("scaled", 1.0)  # the bare default
    assert parse("top@3", families, "thing ") == ("top", 3)
    assert parse("top", families, "thing ") is None  # no default: not a name of the family
    assert parse("other@3", families, "thing ") is None
    with pytest.raises(ValueError, match=r"^thing 'top@3.5': cannot read '3.5'; write it as "
                                         r"top@k\.$"):
        parse("top@3.5", families, "thing ")

    def refuse(value):
        raise ValueError(f"value={value} is too large.")

    with pytest.raises(ValueError, match=r"^x='big@9': value=9.0 is too large\.$"):
        parse("big@9", {"big": Family(refuse, float, "big@v")}, "x=")


def test_non_callable_raises_type_error():
    with pytest.raises(TypeError, match="metric must be a name or a function"):
        metrics.get(3)

