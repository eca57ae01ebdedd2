"""Ordered boosting (``boosting="ordered"``, jaxgbt.core.ordered) against a float64 NumPy
reference, and its contract: an ordinary Booster, reproducible from the seed, plain
boosting unchanged, and clear errors for what it does not support."""

import re
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import assert_same_model, two_devices

import jaxgbt
from jaxgbt.core.config import BoostConfig
from jaxgbt.core.ordered import leaf_prefix_sums, prefix_leaf_values, row_order
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.core.sampling import SamplingParams, round_keys, row_multiplier
from jaxgbt.core.split import SplitParams
from jaxgbt.data.binning import apply_bins, compute_thresholds
from jaxgbt.engine.loop import train
from jaxgbt.objectives import resolve

N_ROWS, N_FEATURES, DEPTH, N_BINS = 300, 5, 3, 16
ORDERED = dict(n_trees=20, depth=DEPTH, n_bins=N_BINS, learning_rate=0.3, boosting="ordered")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(N_ROWS, N_FEATURES)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=N_ROWS))
    weight = rng.uniform(0.5, 2.0, N_ROWS).astype(np.float32)
    return X, y.astype(np.float32), weight



# The float64 reference -------------------------------------------------------------------


def prefix_reference(gh: np.ndarray, leaf: np.ndarray, position: np.ndarray, l2: float,
                     l1: float) -> np.ndarray:
    """f64[N, K]: row i's Newton value from the rows before it in sigma in its leaf."""
    K = gh.shape[1] // 2
    out = np.zeros((gh.shape[0], K))
    for i in range(gh.shape[0]):
        before = (leaf == leaf[i]) & (position < position[i])
        G, H = gh[before].sum(axis=0)[:K], gh[before].sum(axis=0)[K:]
        for k in range(K):
            out[i, k] = -reference.soft_threshold(G[k], l1) / max(H[k] + l2,
                                                                  reference.MIN_DENOMINATOR)
    return out


def ordered_reference(bins, y, weight, position, base, multipliers, *, learning_rate, l2, l1):
    """Ordered boosting of squared error (g = f - y, h = 1), round by round, in float64.

    Returns the model's margins, the ordered margins (f64[N, K] each) and the trees
    (with learning-rate-scaled leaf values)."""
    y = np.asarray(y, np.float64).reshape(len(weight), -1)
    model = np.broadcast_to(np.asarray(base, np.float64), y.shape).copy()
    ordered = model.copy()
    trees = []
    for multiplier in multipliers:
        w = (weight * multiplier)[:, None]
        gh = np.concatenate([(ordered - y) * w, np.ones_like(y) * w], axis=1)
        tree = reference.grow_tree(bins, gh, DEPTH, N_BINS, l2=l2, l1=l1)
        model_gh = np.concatenate([(model - y) * w, np.ones_like(y) * w], axis=1)
        values = learning_rate * reference.fill_empty_leaves(
            reference.leaf_values(model_gh, tree.leaf, 2**DEPTH, l2, l1),
            reference.leaf_covers(gh, tree.leaf, 2**DEPTH))
        model = model + values[tree.leaf]
        ordered = ordered + learning_rate * prefix_reference(gh, tree.leaf, position, l2, l1)
        trees.append(tree._replace(leaf_value=values))
    return model, ordered, trees


def _setup(X, y, weight, *, ordered=True, subsample=1.0, seed=7, l2=1.0, l1=0.1,
           learning_rate=0.5):
    """(config, params, data, base score) for ``loop.train`` on squared error."""
    objective = resolve("squared_error" if y.ndim == 1 else "multi_squared_error")
    bins = apply_bins(X, compute_thresholds(X, N_BINS, weight, 0))
    n_outputs = 1 if y.ndim == 1 else y.shape[1]
    config = BoostConfig(loss=objective.loss, depth=DEPTH, n_bins=N_BINS, n_outputs=n_outputs,
                         vector_output=y.ndim > 1, curvature=objective.curvature,
                         row_sampling="bernoulli" if subsample < 1 else "none", ordered=ordered)
    key = jax.random.PRNGKey(seed)
    one = jnp.float32(1.0)
    sampling = SamplingParams(key=key, subsample=jnp.float32(subsample), colsample_bytree=one,
                              colsample_bylevel=one, goss_top_rate=one, goss_other_rate=one)
    params = BoostParams(learning_rate=jnp.float32(learning_rate),
                         split=SplitParams(l2=jnp.float32(l2), l1=jnp.float32(l1),
                                           min_split_gain=jnp.float32(0.0),
                                           min_child_weight=jnp.float32(0.0)),
                         hessian_floor=jnp.float32(0.0), sampling=sampling)
    data = TrainData(bins=jnp.asarray(bins), y=jnp.asarray(y), weight=jnp.asarray(weight),
                     order=row_order(key, X.shape[0]) if ordered else None)
    base = np.average(y.reshape(len(y), -1), axis=0, weights=weight).astype(np.float32)
    return config, params, data, base, np.asarray(bins)


@pytest.mark.parametrize("n_outputs, subsample", [(1, 1.0), (2, 0.7)])
def test_two_ordered_rounds_equal_the_float64_reference(data, n_outputs, subsample):
    X, y, weight = data
    if n_outputs == 2:
        y = np.stack([y, X[:, 3] - y], axis=1)
    config, params, train_data, base, bins = _setup(X, y, weight, subsample=subsample)
    progress = train(config, params, train_data, jnp.asarray(base), n_trees=2)
    order = np.asarray(train_data.order)
    assert sorted(order.tolist()) == list(range(N_ROWS))
    position = np.argsort(order)  # each row's place in sigma
    # Bernoulli rows: the multipliers jaxgbt draws each round (they do not depend on g).
    multipliers = [np.asarray(row_multiplier(round_keys(params.sampling, t)[0],
                                             config.row_sampling, params.sampling,
                                             jnp.zeros((N_ROWS, n_outputs))))
                   if subsample < 1 else np.ones(N_ROWS) for t in range(2)]
    model, ordered, trees = ordered_reference(bins, y, weight, position, base, multipliers,
                                              learning_rate=0.5, l2=1.0, l1=0.1)
    for t, tree in enumerate(trees):
        np.testing.assert_array_equal(progress.trees.feature[t], tree.feature)
        np.testing.assert_array_equal(progress.trees.split_bin[t], tree.split_bin)
        np.testing.assert_allclose(progress.trees.leaf_value[t], tree.leaf_value, rtol=1e-5,
                                   atol=1e-6)
    np.testing.assert_allclose(progress.raw, model, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(progress.raw_ordered, ordered, rtol=1e-5, atol=1e-5)
    # The two margins differ, and the first row of sigma never moved from the start.
    assert np.abs(np.asarray(progress.raw_ordered) - model).max() > 0.05
    np.testing.assert_array_equal(progress.raw_ordered[order[0]], base)


@pytest.mark.parametrize("block", [1, 7, 32, 128])
def test_prefix_values_equal_the_reference_on_blocks_and_empty_leaves(block):
    """Blocks of 1 (only block totals), 7 (a padded last block), 32 and 128 (one block)."""
    rng = np.random.default_rng(2)
    n_rows, n_leaves = 100, 16
    gh = np.concatenate([rng.normal(size=(n_rows, 2)), rng.uniform(0, 2, (n_rows, 2))], axis=1)
    leaf = rng.integers(0, n_leaves // 2, n_rows) * 2  # odd leaves stay empty
    order = rng.permutation(n_rows)
    params = SplitParams(l2=jnp.float32(0.5), l1=jnp.float32(0.2),
                         min_split_gain=jnp.float32(0.0), min_child_weight=jnp.float32(0.0))
    got = jax.jit(prefix_leaf_values, static_argnames=("n_leaves", "block"))(
        jnp.asarray(gh, jnp.float32), jnp.asarray(leaf), jnp.asarray(order), n_leaves, params,
        block)
    expected = prefix_reference(gh, leaf, np.argsort(order), 0.5, 0.2)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # In the given order, the first row of each leaf has nothing before it.
    sums = leaf_prefix_sums(jnp.asarray(gh[order], jnp.float32), jnp.asarray(leaf[order]),
                            n_leaves, block)
    _, first = np.unique(leaf[order], return_index=True)
    np.testing.assert_array_equal(np.asarray(sums)[first], 0.0)


# The public contract -----------------------------------------------------------------------


def test_model_is_an_ordinary_booster_of_the_model_margins(data, tmp_path):
    X, y, weight = data
    path = tmp_path / "fit.ckpt"
    model = jaxgbt.fit("squared_error", X, y, sample_weight=weight, checkpoint_path=path,
                       checkpoint_every=16, **ORDERED)
    with zipfile.ZipFile(path) as archive:
        raw, raw_ordered = (np.load(archive.open(f"{name}.npy"))[:, 0]
                            for name in ("raw", "raw_ordered"))
    np.testing.assert_allclose(model.predict_raw(X), raw, rtol=1e-5, atol=1e-5)
    assert np.abs(raw_ordered - raw).max() > 0.1
    saved = tmp_path / "model.jgbt"
    jaxgbt.save(model, saved)
    np.testing.assert_array_equal(jaxgbt.load(saved).predict(X), model.predict(X))
    # At round 0 both margins are the start, so the first tree is plain boosting's.
    plain = jaxgbt.fit("squared_error", X, y, sample_weight=weight,
                       **dict(ORDERED, boosting="plain"))
    np.testing.assert_array_equal(model.feature[0], plain.feature[0])
    np.testing.assert_allclose(model.leaf_value[0], plain.leaf_value[0], rtol=1e-6)
    assert not (np.array_equal(model.feature, plain.feature)
                and np.array_equal(model.threshold, plain.threshold))


def test_resumed_ordered_fit_equals_an_uninterrupted_one(data, tmp_path):
    X, y, weight = data
    whole = jaxgbt.fit("squared_error", X, y, sample_weight=weight, **ORDERED)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, sample_weight=weight, checkpoint_path=path,
               checkpoint_every=16, **dict(ORDERED, n_trees=16))
    resumed = jaxgbt.fit("squared_error", X, y, sample_weight=weight, checkpoint_path=path,
                         checkpoint_every=16, **ORDERED)
    assert_same_model(resumed, whole)
    # A plain fit does not resume from an ordered checkpoint.
    with pytest.raises(ValueError, match="checkpoint of a different fit"):
        jaxgbt.fit("squared_error", X, y, sample_weight=weight, checkpoint_path=path,
                   **dict(ORDERED, boosting="plain"))


def test_same_seed_same_model_other_seed_other_model(data):
    X, y, weight = data
    copies = [a.copy() for a in (X, y, weight)]
    first = jaxgbt.fit("squared_error", X, y, sample_weight=weight, seed=1, **ORDERED)
    again = jaxgbt.fit("squared_error", X, y, sample_weight=weight, seed=1, **ORDERED)
    other = jaxgbt.fit("squared_error", X, y, sample_weight=weight, seed=2, **ORDERED)
    assert_same_model(first, again)
    assert not np.array_equal(first.leaf_value, other.leaf_value)
    for before, after in zip(copies, (X, y, weight), strict=True):
        np.testing.assert_array_equal(before, after)  # inputs are never modified


def test_plain_is_the_default(data):
    X, y, weight = data
    settings = dict(ORDERED)
    del settings["boosting"]
    assert_same_model(jaxgbt.fit("squared_error", X, y, boosting="plain", **settings),
                      jaxgbt.fit("squared_error", X, y, **settings))


def test_fit_many_over_seeds_equals_single_fits(data):
    X, y, weight = data
    models = jaxgbt.fit_many("squared_error", X, y, params={"seed": [1, 2]},
                             sample_weight=weight, **ORDERED)
    for i, seed in enumerate((1, 2)):
        single = jaxgbt.fit("squared_error", X, y, sample_weight=weight, seed=seed, **ORDERED)
        np.testing.assert_array_equal(models[i].feature, single.feature)
        np.testing.assert_allclose(models[i].leaf_value, single.leaf_value, rtol=1e-5, atol=1e-6)


def test_warm_start_starts_both_margins_at_the_model(data):
    X, y, weight = data
    first = jaxgbt.fit("squared_error", X, y, **dict(ORDERED, boosting="plain", n_trees=8))
    ordered = jaxgbt.fit("squared_error", X, y, init_model=first, **dict(ORDERED, n_trees=4))
    plain = jaxgbt.fit("squared_error", X, y, init_model=first,
                       **dict(ORDERED, boosting="plain", n_trees=4))
    assert ordered.n_trees == 12
    np.testing.assert_array_equal(ordered.feature[:9], plain.feature[:9])
    np.testing.assert_allclose(ordered.leaf_value[:9], plain.leaf_value[:9], rtol=1e-6)


@pytest.mark.parametrize("trees", [{}, dict(grow_policy="depthwise", colsample_bynode=0.6)])
def test_monotone_constraints_hold(data, trees):
    """The constraints bind the model's leaves, computed after the structure is grown."""
    X, y, _ = data
    model = jaxgbt.fit("squared_error", X, y, monotone_constraints=[1, 0, 0, 0, 0], **trees,
                       **ORDERED)
    grid = np.repeat(X[:20], 50, axis=0)
    grid[:, 0] = np.tile(np.linspace(-3, 3, 50, dtype=np.float32), 20)
    curves = np.asarray(model.predict(grid)).reshape(20, 50)
    assert (np.diff(curves, axis=1) >= -1e-6).all()


@pytest.mark.parametrize("loss, kwargs, pattern", [
    ("squared_error", dict(devices="all"), "devices="),
    ("lambdarank_ndcg", dict(group=np.repeat(np.arange(30), 10)), "per-row losses"),
    ("quantile@0.9", {}, "quantiles of the residuals"),
    ("absolute_error", {}, "quantiles of the residuals"),
    ("softmax", dict(hessian="full"), "hessian='full'"),
])
@two_devices  # devices="all" is refused only where there are several
def test_unsupported_combinations_are_refused(data, loss, kwargs, pattern):
    X, y, _ = data
    if loss in ("softmax", "lambdarank_ndcg"):
        y = (y > 0).astype(np.float32) + (y > 1)
    with pytest.raises(ValueError, match=f"boosting='ordered'.*{re.escape(pattern)}"):
        jaxgbt.fit(loss, X, y, **dict(ORDERED, **kwargs))


def test_unknown_boosting_is_refused(data):
    X, y, _ = data
    with pytest.raises(ValueError, match="boosting='bogus'.*'plain', 'ordered'"):
        jaxgbt.fit("squared_error", X, y, **dict(ORDERED, boosting="bogus"))
    with pytest.raises(ValueError, match="boosting cannot differ between members"):
        jaxgbt.fit_many("squared_error", X, y, params={"boosting": ["plain", "ordered"]})
