import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, assert_same_numbers, make_regression

import jaxgbt
from jaxgbt.core import sampling

FIELDS = ("feature", "threshold", "default_left", "leaf_value", "base_score")


def _params(**rates):
    values = dict(subsample=1.0, colsample_bytree=1.0, colsample_bylevel=1.0, goss_top_rate=0.2,
                  goss_other_rate=0.1) | rates
    return sampling.SamplingParams(key=jax.random.PRNGKey(0),
                                   **{k: jnp.float32(v) for k, v in values.items()})


def test_bernoulli_and_poisson_rates():
    g = jnp.ones((20000, 1))
    kept = sampling.row_multiplier(jax.random.PRNGKey(1), "bernoulli", _params(subsample=0.3), g)
    assert set(np.unique(kept)) <= {0.0, 1.0} and abs(float(kept.mean()) - 0.3) < 0.02
    counts = sampling.row_multiplier(jax.random.PRNGKey(1), "poisson", _params(subsample=1.0), g)
    assert abs(float(counts.mean()) - 1.0) < 0.03 and abs(float(counts.var()) - 1.0) < 0.05
    assert sampling.row_multiplier(jax.random.PRNGKey(1), "none", _params(), g) is None


def test_bayesian_bootstrap_weights_are_exponential_to_the_temperature():
    g = jnp.ones((40000, 1))
    key = jax.random.PRNGKey(4)
    one = np.asarray(sampling.row_multiplier(key, "bayesian", _params(), g), np.float64)
    assert one.min() > 0 and np.all(np.isfinite(one))
    assert abs(one.mean() - 1.0) < 0.02 and abs(one.var() - 1.0) < 0.05  # Exp(1)
    # The same uniform draws raised to the temperature: a^2 has mean 2 (E a^2 of Exp(1)).
    two = np.asarray(sampling.row_multiplier(
        key, "bayesian", _params()._replace(bagging_temperature=jnp.float32(2.0)), g))
    np.testing.assert_allclose(two, one**2, rtol=1e-5)
    assert abs(two.mean() - 2.0) < 0.1
    flat = sampling.row_multiplier(
        key, "bayesian", _params()._replace(bagging_temperature=jnp.float32(0.0)), g)
    np.testing.assert_array_equal(np.asarray(flat), 1.0)


def test_goss_keeps_the_largest_gradients_and_reweights_the_rest():
    g = jnp.asarray(np.random.default_rng(0).normal(size=(10000, 1)), jnp.float32)
    weights = np.asarray(sampling.row_multiplier(jax.random.PRNGKey(2), "goss",
                                                 _params(goss_top_rate=0.2, goss_other_rate=0.1),
                                                 g))
    top = np.abs(np.asarray(g[:, 0])) >= np.quantile(np.abs(np.asarray(g[:, 0])), 0.8)
    assert np.all(weights[top] == 1.0)
    rest = weights[~top]
    assert set(np.unique(rest)) <= {0.0, 8.0}  # (1 - 0.2) / 0.1
    assert abs(np.mean(rest > 0) - 0.1 / 0.8) < 0.02


def test_row_sums_keep_their_bits_when_zero_rows_are_appended():
    x = np.random.default_rng(9).normal(size=1003).astype(np.float32) * 1e3
    for n in (1, 127, 200, 256, 1003):
        alone = sampling.row_sum(jnp.asarray(x[:n]))
        for pad in (1, 56, 300):
            with_zeros = np.concatenate([x[:n], np.zeros(pad, np.float32)])
            padded = sampling.row_sum(jnp.asarray(with_zeros))
            assert np.asarray(padded).tobytes() == np.asarray(alone).tobytes(), (n, pad)
        np.testing.assert_allclose(float(alone), x[:n].astype(np.float64).sum(), rtol=1e-5,
                                   atol=1e-2)


def _mvs_threshold_float64(importance, expected):
    """mu with sum min(1, r / mu) = expected, from the sorted importances: the k largest
    kept with p = 1 and mu = (sum of the rest) / (expected - k), for the first k whose
    mu lies between the k-th and (k+1)-th largest."""
    r = np.sort(np.asarray(importance, np.float64))[::-1]
    r = r[r > 0]
    for k in range(len(r)):
        mu = r[k:].sum() / (expected - k)
        if (k == 0 or r[k - 1] >= mu) and r[k] <= mu:
            return mu
    raise AssertionError("no threshold")


@pytest.mark.parametrize("rate", [0.05, 0.3, 0.8])
def test_mvs_threshold_matches_a_float64_search(rate):
    rng = np.random.default_rng(6)
    importance = np.abs(rng.standard_t(2, size=3000)).astype(np.float32)
    importance[:300] = 0.0  # rows of weight 0
    expected = rate * 2700
    mu = float(sampling.mvs_threshold(jnp.asarray(importance), jnp.float32(expected)))
    np.testing.assert_allclose(mu, _mvs_threshold_float64(importance, expected), rtol=1e-5)
    kept = np.minimum(1.0, importance.astype(np.float64) / mu).sum()
    assert expected * (1 - 1e-4) < kept <= expected * (1 + 1e-5)


def test_mvs_keeps_large_gradients_thins_the_rest_and_keeps_sums_unbiased():
    # Heavy-tailed gradients, 100 rows of weight 0, 300 rows at weight 2: the rows of
    # largest importance are always kept at weight 1, the others kept with probability
    # r / mu and weighted by mu / r; the weighted sums of |g| keep their mean.
    rng = np.random.default_rng(7)
    n = 4000
    g = rng.standard_t(3, size=(n, 1)).astype(np.float32)
    weight = np.ones(n, np.float32)
    weight[:100] = 0.0
    weight[100:400] = 2.0
    params = _params(subsample=0.3)
    keys = jax.random.split(jax.random.PRNGKey(8), 400)
    draws = np.asarray(jax.jit(jax.vmap(lambda k: sampling.row_multiplier(
        k, "mvs", params, jnp.asarray(g), jnp.asarray(weight))))(keys), np.float64)
    assert np.all(draws[:, :100] == 0.0)
    kept = draws > 0
    assert abs(kept[:, 100:].mean() - 0.3) < 0.01
    # The reference's probabilities: importance sqrt(|w g|^2 + mean(|w g|)^2).
    wg = np.abs(weight[100:, None] * g[100:]).astype(np.float64)[:, 0]
    importance = np.sqrt(wg**2 + wg.mean() ** 2)
    probability = np.minimum(1.0, importance / _mvs_threshold_float64(importance, 0.3 * 3900))
    always = probability == 1.0
    assert 0 < always.sum() < 3900
    assert np.all(draws[:, 100:][:, always] == 1.0)
    thinned = draws[:, 100:][:, ~always]
    np.testing.assert_allclose(thinned.max(axis=0), 1.0 / probability[~always], rtol=1e-4)
    np.testing.assert_allclose(kept[:, 100:].mean(axis=0), probability, atol=0.1)
    totals = draws[:, 100:] @ wg
    assert abs(totals.mean() / wg.sum() - 1.0) < 0.01
    # At a rate of 1 every row of positive weight is kept at weight 1 exactly.
    every = sampling.row_multiplier(keys[0], "mvs", _params(subsample=1.0), jnp.asarray(g),
                                    jnp.asarray(weight))
    np.testing.assert_array_equal(np.asarray(every), (weight > 0).astype(np.float32))


def test_feature_masks_draw_the_asked_fraction_within_the_tree():
    masks = np.asarray(sampling.level_feature_masks(
        jax.random.PRNGKey(3), _params(colsample_bytree=0.5, colsample_bylevel=0.5), 10, 4))
    tree = masks.any(axis=0)
    assert masks.shape == (4, 10) and tree.sum() <= 5
    assert np.all(masks.sum(axis=1) == 2)  # round(0.5 * 5) of the tree's features


def test_a_feature_draw_keeps_the_allowed_features_of_the_smallest_scores():
    # A float64 reference of the draw: the round(rate * allowed) allowed features whose
    # uniform scores are smallest (ties to the lower index), at least one.
    draw = jax.jit(sampling._draw)
    for seed, (n_features, rate) in enumerate([(1, 0.5), (5, 0.3), (20, 0.5), (180, 0.8),
                                               (500, 0.05)]):
        key = jax.random.PRNGKey(seed)
        allowed = np.random.default_rng(seed).random(n_features) < 0.7
        allowed[0] = True
        scores = np.where(allowed, np.asarray(jax.random.uniform(key, (n_features,)),
                                              np.float64), 2.0)
        count = max(round(rate * allowed.sum()), 1)
        expected = np.zeros(n_features, bool)
        expected[np.argsort(scores, kind="stable")[:count]] = True
        got = np.asarray(draw(key, jnp.asarray(allowed), jnp.float32(rate)))
        np.testing.assert_array_equal(got, expected & allowed)
        assert got.sum() == min(count, allowed.sum())


@pytest.mark.parametrize("options", [
    dict(subsample=0.5), dict(subsample=1.0, sampling="poisson"), dict(sampling="goss"),
    dict(sampling="bayesian"), dict(sampling="mvs", subsample=0.5),
    dict(colsample_bytree=0.5), dict(colsample_bylevel=0.5),
])
def test_sampling_is_reproducible_from_the_seed_and_changes_with_it(regression_data, options):
    X, y = regression_data
    a = jaxgbt.fit("squared_error", X, y, seed=1, **options, **SMALL)
    b = jaxgbt.fit("squared_error", X, y, seed=1, **options, **SMALL)
    c = jaxgbt.fit("squared_error", X, y, seed=2, **options, **SMALL)
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert not np.array_equal(a.leaf_value, c.leaf_value)


def test_column_sampling_restricts_the_features_of_each_tree():
    X, y = make_regression(seed=51)
    model = jaxgbt.fit("squared_error", X, y, colsample_bytree=0.25, seed=3,
                       **dict(SMALL, n_trees=12))
    # One feature of four per tree: every level of a tree splits on the same feature
    # (or passes through).
    gains = np.asarray(model.split_gain) > 0
    features = np.asarray(model.feature)
    for t in range(model.n_trees):
        assert len(set(features[t][gains[t]])) <= 1


def test_bernoulli_sampling_equals_weighting_by_the_same_draw(regression_data):
    """Sampling multiplies weights: the first tree of a subsampled fit equals a fit
    without sampling whose weights are the round-0 draw."""
    X, y = regression_data
    X = np.round(X * 2) / 2  # few distinct values: binning cannot depend on the weights
    # Without score noise, whose decay counts the rows of positive weight (all of them
    # here, the drawn ones in the weighted fit).
    model = jaxgbt.fit("squared_error", X, y, subsample=0.5, seed=4, random_strength=0.0,
                       **dict(SMALL, n_trees=1))
    params = _params(subsample=0.5)._replace(key=jax.random.PRNGKey(4))
    row_key = sampling.round_keys(params, jnp.int32(0))[0]
    kept = np.asarray(sampling.row_multiplier(row_key, "bernoulli", params,
                                              jnp.ones((len(y), 1))))
    assert 0 < kept.sum() < len(y)
    weighted = jaxgbt.fit("squared_error", X, y, sample_weight=kept,
                          base_score=float(model.base_score[0]), random_strength=0.0,
                          **dict(SMALL, n_trees=1))
    np.testing.assert_array_equal(weighted.feature, model.feature)
    np.testing.assert_allclose(weighted.leaf_value, model.leaf_value, rtol=1e-5, atol=1e-6)


def test_bad_sampling_arguments(regression_data):
    X, y = regression_data
    with pytest.raises(ValueError, match="subsample=0.0 must lie in"):
        jaxgbt.fit("squared_error", X, y, subsample=0.0, **SMALL)
    with pytest.raises(ValueError, match="sampling='uniform'"):
        jaxgbt.fit("squared_error", X, y, sampling="uniform", **SMALL)
    with pytest.raises(ValueError, match="colsample_bytree=1.5"):
        jaxgbt.fit("squared_error", X, y, colsample_bytree=1.5, **SMALL)
    with pytest.raises(ValueError, match="seed=-1"):
        jaxgbt.fit("squared_error", X, y, seed=-1, **SMALL)
    with pytest.raises(ValueError, match="bagging_temperature=-1"):
        jaxgbt.fit("squared_error", X, y, sampling="bayesian", bagging_temperature=-1, **SMALL)


def test_a_concrete_seed_makes_prngkeys_key_on_the_host(monkeypatch):
    seeds = [0, 1, 7, 2**31 - 1, 2**31, 2**32 - 1, np.int64(12), np.uint32(99)]
    expected = [np.asarray(jax.random.PRNGKey(seed)) for seed in seeds]
    traced = [np.asarray(jax.jit(sampling.seed_key)(jnp.uint32(seed))) for seed in seeds]

    def compiled_key(seed):
        raise AssertionError("a concrete seed's key compiled PRNGKey")

    monkeypatch.setattr(jax.random, "PRNGKey", compiled_key)
    for seed, want, under_jit in zip(seeds, expected, traced, strict=True):
        got = sampling.seed_key(seed)
        assert got.dtype == jnp.uint32 and got.shape == (2,)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(under_jit, want)


def test_vmap_over_seeds_gives_the_single_fits(regression_data):
    X, y = regression_data
    seeds = jnp.array([1, 2])
    models = jax.vmap(lambda s: jaxgbt.fit("squared_error", X, y, seed=s, subsample=0.5,
                                           **SMALL))(seeds)
    for i, seed in enumerate([1, 2]):
        single = jaxgbt.fit("squared_error", X, y, seed=seed, subsample=0.5, **SMALL)
        np.testing.assert_allclose(models.leaf_value[i], single.leaf_value, rtol=1e-5, atol=1e-6)


def test_sample_capacity_bounds_the_drawn_rows():
    n_rows = 100_000
    capacity = sampling.sample_capacity("bernoulli", 0.5, n_rows)
    sd = np.sqrt(n_rows * 0.25)
    assert 0.5 * n_rows + 8 * sd <= capacity <= 0.5 * n_rows + 8 * sd + n_rows / 32 + 8
    assert capacity % -(-n_rows // 32) == 0  # nearby rates share a program
    assert sampling.sample_capacity("bernoulli", 0.51, n_rows) == capacity
    p = 1 - np.exp(-0.5)  # poisson: rows drawn at least once
    assert sampling.sample_capacity("poisson", 0.5, n_rows) >= p * n_rows + 8 * np.sqrt(
        n_rows * p * (1 - p))
    # No bound below GATHER_AT_MOST: all rows.
    assert sampling.sample_capacity("bernoulli", 0.9, n_rows) is None
    assert sampling.sample_capacity("poisson", 2.0, n_rows) is None
    assert sampling.sample_capacity("goss", 0.5, n_rows) is None  # ties: no bound
    assert sampling.sample_capacity("none", 1.0, n_rows) is None
    seen = []  # a traced rate (vmap over rates) is unknown when compiling: all rows
    jax.jit(lambda s: seen.append(sampling.sample_capacity("bernoulli", s, n_rows)) or s)(0.5)
    assert seen == [None]


def test_drawn_rows_fill_the_slots_in_row_order():
    drawn = np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 0], bool)
    rows, in_use = sampling.drawn_rows(jnp.asarray(drawn), 6)
    np.testing.assert_array_equal(np.asarray(rows)[:5], [1, 2, 4, 7, 8])
    np.testing.assert_array_equal(np.asarray(in_use), [True] * 5 + [False])
    assert int(rows[5]) not in (1, 2, 4, 7, 8)  # the free slot holds some other row
    # More drawn rows than slots: the first ones are kept, the rest not in use.
    rows, in_use = sampling.drawn_rows(jnp.asarray(drawn), 3)
    np.testing.assert_array_equal(np.asarray(rows), [1, 2, 4])
    assert bool(np.all(in_use))
    rows, in_use = sampling.drawn_rows(jnp.zeros(10, bool), 4)
    assert len(set(np.asarray(rows).tolist())) == 4 and not bool(np.any(in_use))


@pytest.mark.parametrize("options", [
    dict(subsample=0.3, loss="logistic", grow_policy="oblivious"),
    dict(subsample=0.3, sampling="poisson", loss="squared_error", grow_policy="depthwise"),
], ids=["bernoulli-oblivious", "poisson-depthwise"])
def test_trees_grown_on_the_drawn_rows_equal_trees_grown_on_all_rows(binary_data, monkeypatch,
                                                                     options):
    """A sampled round gathers its drawn rows and grows the tree on them alone: the same
    sums in the same order as all rows with the undrawn ones at weight 0."""
    X, y = binary_data
    options = dict(options)
    loss = options.pop("loss")
    assert sampling.sample_capacity(options.get("sampling", "bernoulli"), options["subsample"],
                                    len(y)) is not None
    gathered = jaxgbt.fit(loss, X, y, seed=3, **options, **SMALL)
    monkeypatch.setattr(sampling, "GATHER_AT_MOST", 0.0)  # every tree on all rows
    all_rows = jaxgbt.fit(loss, X, y, seed=3, **options, **SMALL)
    for field in FIELDS:
        assert_same_numbers(getattr(gathered, field), getattr(all_rows, field), err_msg=field)
