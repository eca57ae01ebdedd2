"""grow_policy="depthwise": each node its own split, against the float64 NumPy reference,
and through every path a model takes (predict, save/load, soft trees, constraints,
checkpoints, warm start, fit_many, forests)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import SMALL, make_regression, two_devices
from numpy.testing import assert_allclose, assert_array_equal
from test_constraints import _violations
from test_tree import CASES, DEPTH, N_BINS, _binned_problem, _features, _split_params
from test_tree import _assert_same_tree as assert_same_tree

import jaxgbt
from jaxgbt.core import sampling
from jaxgbt.core.tree import grow_depthwise_tree
from jaxgbt.data.binning import apply_bins, compute_thresholds

_grow = jax.jit(grow_depthwise_tree, static_argnames=("depth", "n_bins", "axis_name"))
DEPTHWISE = dict(SMALL, grow_policy="depthwise")


def _assert_same_tree(got, leaf, expected, *, rtol, atol) -> None:
    assert got.feature.shape == (2**DEPTH - 1,)
    assert_same_tree(got, leaf, expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", list(CASES))
def test_grow_depthwise_tree_matches_reference(case):
    settings = dict(CASES[case])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    gh32 = gh.astype(np.float32)
    expected = reference.grow_depthwise_tree(bins, gh32, DEPTH, N_BINS, **settings)
    # Nodes of one level choose different features: these are not oblivious trees.
    assert len(set(expected.feature[3:].tolist())) > 1 or case == "min_split_gain"
    tree, leaf, bounds = _grow(jnp.asarray(bins), jnp.asarray(gh32),
                               _split_params(settings, jnp.float32), depth=DEPTH, n_bins=N_BINS)
    assert bounds is None
    _assert_same_tree(tree, leaf, expected, rtol=1e-5, atol=1e-5)


def test_grow_depthwise_tree_matches_reference_float64():
    settings = dict(CASES["l1_l2_weights"])
    bins, gh = _binned_problem(settings.pop("n_outputs"))
    expected = reference.grow_depthwise_tree(bins, gh, DEPTH, N_BINS, **settings)
    with jax.enable_x64(True):
        tree, leaf, _ = _grow(jnp.asarray(bins), jnp.asarray(gh, jnp.float64),
                              _split_params(settings, jnp.float64), depth=DEPTH, n_bins=N_BINS)
        tree, leaf = jax.tree.map(np.asarray, (tree, leaf))
    _assert_same_tree(tree, leaf, expected, rtol=1e-10, atol=1e-12)


def features_and_labels():
    """Features with NaN (``test_tree._features``) and labels y = 2 x0 - x1 x2 + noise,
    f32[N, F] and f32[N], and the generator that drew the noise, for further draws."""
    X = _features(seed=3)
    rng = np.random.default_rng(4)
    x = np.nan_to_num(X, nan=0.0)
    y = (2 * x[:, 0] - x[:, 1] * x[:, 2] + 0.3 * rng.normal(size=len(X))).astype(np.float32)
    return X, y, rng


@pytest.fixture(scope="module")
def fitted():
    """A depthwise squared-error model on features with NaN, with weights and l1/l2."""
    X, y, rng = features_and_labels()
    weight = rng.uniform(0.5, 2.0, len(X)).astype(np.float32)
    model = jaxgbt.fit("squared_error", X, y, n_trees=3, depth=DEPTH, n_bins=N_BINS,
                       learning_rate=0.3, sample_weight=weight, l2=1.0, l1=0.5,
                       min_child_weight=1.0, grow_policy="depthwise",
                       random_strength=0.0)  # the reference ranks by gain, without noise
    return X, y, weight, model


def test_fit_first_tree_matches_reference(fitted):
    X, y, weight, model = fitted
    table = compute_thresholds(X, N_BINS, weight, seed=0)
    g = (np.asarray(model.base_score)[0] - y) * weight
    gh = np.column_stack([g, weight]).astype(np.float64)
    expected = reference.grow_depthwise_tree(apply_bins(X, table), gh, DEPTH, N_BINS, l2=1.0,
                                             l1=0.5, min_child_weight=1.0)
    assert_array_equal(np.asarray(model.feature[0]), expected.feature)
    assert_allclose(np.asarray(model.leaf_value[0]), 0.3 * expected.leaf_value, atol=1e-5)
    assert model.depth == DEPTH and model.grow_policy == "depthwise"
    assert "depthwise" in repr(model)


def test_predict_matches_reference_with_missing_values(fitted):
    X, _, _, model = fitted
    expected, leaves = reference.predict_depthwise(
        X, *(np.asarray(getattr(model, name)) for name in
             ("feature", "threshold", "default_left", "leaf_value", "base_score")))
    assert np.isnan(X).any()
    assert_array_equal(np.asarray(model.leaf_index(X)), leaves)
    assert_allclose(np.asarray(model.predict_raw(X)), expected[:, 0], rtol=1e-5, atol=1e-5)
    staged = np.asarray(model.staged_predict_raw(X))
    assert_allclose(staged[-1], expected[:, 0], rtol=1e-5, atol=1e-5)


def test_depth_one_equals_oblivious():
    X, y = make_regression(5)
    kwargs = dict(SMALL, depth=1)
    oblivious = jaxgbt.fit("squared_error", X, y, **kwargs)
    depthwise = jaxgbt.fit("squared_error", X, y, grow_policy="depthwise", **kwargs)
    assert_array_equal(np.asarray(oblivious.feature), np.asarray(depthwise.feature))
    assert_array_equal(np.asarray(oblivious.leaf_value), np.asarray(depthwise.leaf_value))


def test_depthwise_fits_better_than_oblivious_on_interactions():
    X, y = make_regression(6)  # y = sin(2 x0) + x1 x2 + noise
    # Without score noise: with it, 8 trees of either kind fit this data about as well,
    # one better or the other by the draws.
    oblivious = jaxgbt.fit("squared_error", X, y, random_strength=0.0, **SMALL)
    depthwise = jaxgbt.fit("squared_error", X, y, random_strength=0.0, **DEPTHWISE)
    mse = [float(np.mean((np.asarray(m.predict(X)) - y) ** 2)) for m in (oblivious, depthwise)]
    assert mse[1] < mse[0]


def test_validation_history_follows_predictions(fitted):
    X, y = make_regression(7)
    model = jaxgbt.fit("squared_error", X, y, eval_set=[(X[:100], y[:100])],
                       eval_metric="rmse", **DEPTHWISE)
    curve = np.asarray(model.history["valid_0:rmse"])
    staged = np.asarray(model.staged_predict_raw(X[:100]))
    assert_allclose(curve, np.sqrt(np.mean((staged - y[:100]) ** 2, axis=1)), rtol=1e-5)


def test_save_load_and_export_keep_the_layout(fitted, tmp_path):
    X, _, _, model = fitted
    model.save(tmp_path / "m.jaxgbt")
    loaded = jaxgbt.load(tmp_path / "m.jaxgbt")
    assert loaded.grow_policy == "depthwise" and loaded.feature.shape == model.feature.shape
    assert_array_equal(np.asarray(loaded.predict_raw(X)), np.asarray(model.predict_raw(X)))
    exported = jaxgbt.export(model, tmp_path / "m.stablehlo")
    from jaxgbt.io.export import load_exported

    # A shape-polymorphic program may sum the trees in another order: equal to 1 ulp.
    assert_allclose(np.asarray(load_exported(exported).call(jnp.asarray(X))),
                    np.asarray(model.predict_raw(X)), rtol=1e-6, atol=1e-6)


def test_load_rejects_an_unknown_grow_policy(fitted, tmp_path):
    import json
    import zipfile

    _, _, _, model = fitted
    model.save(tmp_path / "m.jaxgbt")
    with zipfile.ZipFile(tmp_path / "m.jaxgbt") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(members["header.json"])
    header["grow_policy"] = "leafwise"
    members["header.json"] = json.dumps(header).encode()
    with zipfile.ZipFile(tmp_path / "bad.jaxgbt", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(jaxgbt.io.ModelFormatError, match="grow_policy"):
        jaxgbt.load(tmp_path / "bad.jaxgbt")


def test_soft_trees_reach_the_hard_model(fitted):
    X, _, _, model = fitted
    X = np.nan_to_num(X, nan=0.37)  # away from every threshold
    soft = jaxgbt.differentiable.soft_predict_raw(model, X, temperature=1e-9)
    assert_allclose(np.asarray(soft), np.asarray(model.predict_raw(X)), atol=1e-4)
    warm = jaxgbt.differentiable.soft_predict_raw(model, X, temperature=1.0)
    assert np.abs(np.asarray(warm) - np.asarray(model.predict_raw(X))).max() > 1e-3


def test_monotone_constraints_hold_for_depthwise_trees(wavy_data):
    X, y = wavy_data
    kwargs = dict(DEPTHWISE, n_trees=60, depth=4, n_bins=64)
    rng = np.random.default_rng(0)
    assert _violations(jaxgbt.fit("squared_error", X, y, **kwargs), X, 0, +1, rng) > 0
    model = jaxgbt.fit("squared_error", X, y, monotone_constraints=[1, -1, 0, 0], **kwargs)
    rng = np.random.default_rng(1)
    assert _violations(model, X, 0, +1, rng) == 0
    assert _violations(model, X, 1, -1, rng) == 0
    grid = np.repeat(X[:50], 200, axis=0)
    grid[:, 0] = np.tile(np.linspace(-4, 4, 200, dtype=np.float32), 50)
    assert np.all(np.diff(np.asarray(model.predict(grid)).reshape(50, 200), axis=1) >= -1e-6)
    # A monotone feature may split several nodes of one tree, unlike oblivious trees.
    splits = (np.asarray(model.feature) == 0) & (np.asarray(model.split_gain) > 0)
    assert splits.sum(axis=1).max() > 1
    assert np.mean((np.asarray(model.predict(X)) - y) ** 2) < 0.6 * np.var(y)


def _paths(model, t):
    """The sets of features split on along each root-to-leaf path of tree t."""
    feature, gain = np.asarray(model.feature[t]), np.asarray(model.split_gain[t])
    paths = []
    for leaf in range(2**model.depth):
        used, j = set(), 0
        for d in range(model.depth):
            at = 2**d - 1 + j
            if gain[at] > 0:
                used.add(int(feature[at]))
            j = 2 * j + ((leaf >> (model.depth - 1 - d)) & 1)
        paths.append(used)
    return paths


def test_interaction_constraints_hold_along_each_path(wavy_data):
    X, y = wavy_data
    sets = [[0, 1], [1, 2, 3]]
    kwargs = dict(DEPTHWISE, n_trees=20, depth=4)
    model = jaxgbt.fit("squared_error", X, y, interaction_constraints=sets, **kwargs)
    for t in range(model.n_trees):
        for used in _paths(model, t):
            assert any(used <= set(s) for s in sets), used
    free = jaxgbt.fit("squared_error", X, y, **kwargs)
    assert any(not any(used <= set(s) for s in sets)
               for t in range(free.n_trees) for used in _paths(free, t))


def test_node_feature_masks_draw_from_the_level():
    params = sampling.SamplingParams(key=jax.random.PRNGKey(0), subsample=1.0,
                                     colsample_bytree=1.0, colsample_bylevel=0.5,
                                     goss_top_rate=1.0, goss_other_rate=1.0,
                                     colsample_bynode=0.5)
    key = jax.random.PRNGKey(3)
    levels = sampling.level_feature_masks(key, params, 10, 4)
    nodes = np.asarray(sampling.node_feature_masks(key, params, levels, 8))
    levels = np.asarray(levels)
    assert nodes.shape == (4, 8, 10)
    assert not (nodes & ~levels[:, None]).any()  # a node draws from its level's features
    assert (nodes.sum(axis=2) == 2).all()  # round(0.5 * 5)
    assert len({tuple(row) for row in nodes.reshape(-1, 10)}) > 4  # nodes differ


def test_colsample_bynode_is_reproducible_and_only_for_depthwise():
    X, y = make_regression(8)
    one = jaxgbt.fit("squared_error", X, y, colsample_bynode=0.5, seed=4, **DEPTHWISE)
    again = jaxgbt.fit("squared_error", X, y, colsample_bynode=0.5, seed=4, **DEPTHWISE)
    other = jaxgbt.fit("squared_error", X, y, colsample_bynode=0.5, seed=5, **DEPTHWISE)
    assert_array_equal(np.asarray(one.leaf_value), np.asarray(again.leaf_value))
    assert not np.array_equal(np.asarray(one.leaf_value), np.asarray(other.leaf_value))
    with pytest.raises(ValueError, match="colsample_bynode applies to grow_policy='depthwise'"):
        jaxgbt.fit("squared_error", X, y, colsample_bynode=0.5, **SMALL)


def test_bad_grow_policy_and_mismatched_warm_start():
    X, y = make_regression(9)
    with pytest.raises(ValueError, match="grow_policy='leafwise' is not allowed"):
        jaxgbt.fit("squared_error", X, y, grow_policy="leafwise", **SMALL)
    oblivious = jaxgbt.fit("squared_error", X, y, **SMALL)
    with pytest.raises(ValueError, match="grow_policy: model oblivious vs fit depthwise"):
        jaxgbt.fit("squared_error", X, y, init_model=oblivious, **DEPTHWISE)


def test_warm_start_equals_one_long_fit():
    X, y = make_regression(10)
    kwargs = dict(DEPTHWISE, n_trees=16)
    whole = jaxgbt.fit("squared_error", X, y, **kwargs)
    first = jaxgbt.fit("squared_error", X, y, **dict(kwargs, n_trees=8))
    rest = jaxgbt.fit("squared_error", X, y, init_model=first, **dict(kwargs, n_trees=8))
    assert_allclose(np.asarray(rest.predict(X)), np.asarray(whole.predict(X)), atol=1e-5)


def test_checkpoint_resume_equals_uninterrupted(tmp_path):
    X, y = make_regression(11)
    kwargs = dict(DEPTHWISE, n_trees=32)
    whole = jaxgbt.fit("squared_error", X, y, **kwargs)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
               **dict(kwargs, n_trees=16))
    resumed = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
                         **kwargs)
    assert_array_equal(np.asarray(resumed.leaf_value), np.asarray(whole.leaf_value))


# Leaf-wise trees (5 of 8 leaves) grow in a while loop: vmapped and under shard_map too.
BOTH_POLICIES = pytest.mark.parametrize(
    "kwargs", [DEPTHWISE, dict(SMALL, grow_policy="lossguide", max_leaves=5)],
    ids=["depthwise", "lossguide"])


@BOTH_POLICIES
def test_fit_many_members_equal_single_fits(kwargs):
    X, y = make_regression(12)
    stacked = jaxgbt.fit_many("squared_error", X, y, params={"l2": [0.5, 4.0]}, **kwargs)
    for i, l2 in enumerate([0.5, 4.0]):
        single = jaxgbt.fit("squared_error", X, y, l2=l2, **kwargs)
        assert_allclose(np.asarray(stacked[i].leaf_value), np.asarray(single.leaf_value),
                        atol=1e-6)
        assert stacked[i].grow_policy == kwargs["grow_policy"]


@two_devices
@BOTH_POLICIES
def test_row_sharding_equals_one_device(kwargs):
    X, y = make_regression(13)
    one = jaxgbt.fit("squared_error", X, y, **kwargs)
    two = jaxgbt.fit("squared_error", X, y, devices="all", **kwargs)
    assert_array_equal(np.asarray(one.feature), np.asarray(two.feature))
    assert_allclose(np.asarray(one.leaf_value), np.asarray(two.leaf_value), atol=1e-5)


def test_depthwise_forest():
    X, y = make_regression(14)
    forest = jaxgbt.fit_forest(X, y, n_trees=8, depth=4, n_bins=16, grow_policy="depthwise",
                               max_features=0.5)
    assert forest.model.grow_policy == "depthwise"
    assert forest.model.feature.shape == (8, 15)
    assert 0.0 < forest.oob_score < 1.0
    per_tree = dataclasses.replace(forest.model, leaf_value=forest.model.leaf_value * 8)
    assert np.isfinite(np.asarray(per_tree.predict(X))).all()


def test_predict_in_row_blocks_equals_predict_per_small_batch(fitted):
    from jaxgbt import model as model_module

    X, _, _, model = fitted
    n_rows = model_module._BLOCK_ROWS * model_module._PARALLEL_BLOCKS + 77
    X_big = np.tile(X, (-(-n_rows // len(X)), 1))[:n_rows]
    expected = np.concatenate([np.asarray(model.predict_raw(X_big[i:i + 5000]))
                               for i in range(0, n_rows, 5000)])
    assert_array_equal(np.asarray(model.predict_raw(X_big)), expected)
