"""Leaf covers stored at fit time: the Hessian sums of the rows reaching each leaf, carried
through save/load, checkpoints, warm starts, stacked models and forests; "cover"
importance."""

import json
import zipfile

import numpy as np
import pytest
from conftest import SMALL, make_binary, make_regression

import jaxgbt
from jaxgbt.io import ModelFormatError


def _leaf_sums(leaves: np.ndarray, weights: np.ndarray, n_leaves: int) -> np.ndarray:
    """f64[T, L]: per tree, the weights of the rows (leaves i32[N, T]) reaching each leaf."""
    return np.stack([np.bincount(leaves[:, t], weights=weights, minlength=n_leaves)
                     for t in range(leaves.shape[1])])


@pytest.fixture(scope="module")
def weighted():
    X, y = make_regression()
    weight = np.random.default_rng(5).uniform(0.5, 2.0, size=len(y)).astype(np.float32)
    return X, y, weight, jaxgbt.fit("squared_error", X, y, sample_weight=weight, **SMALL)


def test_squared_error_cover_is_the_weight_reaching_each_leaf(weighted):
    X, _, weight, model = weighted
    assert model.cover.shape == (model.n_trees, 2**model.depth)
    expected = _leaf_sums(np.asarray(model.leaf_index(X)), weight, 2**model.depth)
    np.testing.assert_allclose(np.asarray(model.cover), expected, rtol=1e-5)


@pytest.mark.parametrize("grow_policy", ["oblivious", "depthwise"])
def test_logistic_cover_is_the_hessian_at_the_margins_before_the_tree(grow_policy):
    X, y = make_binary()
    model = jaxgbt.fit("logistic", X, y, grow_policy=grow_policy, **SMALL)
    before = np.concatenate([np.broadcast_to(np.asarray(model.base_score), (1, len(y))),
                             np.asarray(model.staged_predict_raw(X))[:-1]])  # [T, N]
    p = 1.0 / (1.0 + np.exp(-before.astype(np.float64)))
    leaves = np.asarray(model.leaf_index(X))
    expected = np.stack([np.bincount(leaves[:, t], weights=p[t] * (1 - p[t]),
                                     minlength=2**model.depth) for t in range(model.n_trees)])
    np.testing.assert_allclose(np.asarray(model.cover), expected, rtol=1e-4, atol=1e-5)


def test_vector_output_cover_sums_the_outputs_hessians():
    X, y = make_regression()
    Y = np.stack([y, 2 * y], axis=1)
    model = jaxgbt.fit("multi_squared_error", X, Y, **SMALL)  # h = 1 per output
    expected = 2 * _leaf_sums(np.asarray(model.leaf_index(X)), np.ones(len(y)), 2**model.depth)
    np.testing.assert_allclose(np.asarray(model.cover), expected, rtol=1e-5)


@pytest.mark.slow
def test_cover_follows_first_trees_members_forests_and_warm_starts(weighted):
    X, y, weight, model = weighted
    np.testing.assert_array_equal(model.first_trees(3).cover, np.asarray(model.cover)[:3])
    many = jaxgbt.fit_many("squared_error", X, y, {"learning_rate": np.array([0.1, 0.3])},
                           sample_weight=weight, **SMALL)
    assert many.cover.shape == (2, model.n_trees, 2**model.depth)
    np.testing.assert_allclose(many[0].cover, model.cover, rtol=1e-6)
    more = jaxgbt.fit("squared_error", X, y, sample_weight=weight, init_model=model,
                      n_trees=2, depth=SMALL["depth"], n_bins=SMALL["n_bins"])
    assert more.cover.shape == (model.n_trees + 2, 2**model.depth)
    np.testing.assert_array_equal(np.asarray(more.cover)[:model.n_trees], model.cover)
    forest = jaxgbt.fit_forest(X, y, n_trees=4, depth=3, n_bins=16).model
    counts = np.asarray(jaxgbt.forest.bootstrap_counts(
        np.random.SeedSequence(0).generate_state(4), len(y)))  # [T, N]
    leaves = np.asarray(forest.leaf_index(X))
    expected = np.stack([np.bincount(leaves[:, t], weights=counts[t], minlength=8)
                         for t in range(4)])
    np.testing.assert_allclose(np.asarray(forest.cover), expected, rtol=1e-5)


def test_cover_is_saved_and_old_files_load_without_it(weighted, tmp_path):
    model = weighted[3]
    model.save(tmp_path / "m.jgbt")
    loaded = jaxgbt.load(tmp_path / "m.jgbt")
    np.testing.assert_array_equal(loaded.cover, model.cover)
    # A version 1 file: no cover.npy, the old version number.
    with zipfile.ZipFile(tmp_path / "m.jgbt") as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    header = json.loads(members.pop("header.json"))
    header["version"] = 1
    del header["arrays"]["cover"], members["cover.npy"]
    with zipfile.ZipFile(tmp_path / "old.jgbt", "w") as archive:
        archive.writestr("header.json", json.dumps(header))
        for name, data in members.items():
            archive.writestr(name, data)
    old = jaxgbt.load(tmp_path / "old.jgbt")
    assert old.cover is None
    np.testing.assert_array_equal(old.predict_raw(weighted[0]), model.predict_raw(weighted[0]))
    with pytest.raises(ValueError, match="predates|before covers were stored"):
        old.feature_importance("cover")
    assert old.feature_importance("gain").shape == (model.n_features,)
    header["version"] = 99
    with zipfile.ZipFile(tmp_path / "new.jgbt", "w") as archive:
        archive.writestr("header.json", json.dumps(header))
    with pytest.raises(ModelFormatError, match="version 99 is not supported"):
        jaxgbt.load(tmp_path / "new.jgbt")


def test_checkpoint_keeps_cover(tmp_path):
    X, y = make_regression()
    path = tmp_path / "run.ckpt"
    first = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)
    resumed = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)
    np.testing.assert_array_equal(resumed.cover, first.cover)


def _loop_cover_importance(model):
    """Cover importance by walking the nodes: a split entry's cover is the sum of the
    leaves below it."""
    out = np.zeros(model.n_features)
    cover, depth = np.asarray(model.cover, np.float64), model.depth
    for t in range(model.n_trees):
        for m, (feature, gain) in enumerate(zip(model.feature[t], model.split_gain[t],
                                                strict=True)):
            if gain <= 0:
                continue
            if model.grow_policy == "oblivious":
                out[int(feature)] += cover[t].sum()
            else:
                level = (m + 1).bit_length() - 1
                j, width = m - (2**level - 1), 2 ** (depth - level)
                out[int(feature)] += cover[t, j * width:(j + 1) * width].sum()
    return out


@pytest.mark.parametrize("grow_policy", ["oblivious", "depthwise"])
def test_cover_importance_matches_a_loop_over_nodes(weighted, grow_policy):
    X, y, weight, model = weighted
    if grow_policy == "depthwise":
        model = jaxgbt.fit("squared_error", X, y, sample_weight=weight,
                           grow_policy="depthwise", **SMALL)
    got = model.feature_importance("cover")
    np.testing.assert_allclose(got, _loop_cover_importance(model), rtol=1e-6)
    assert got.shape == (model.n_features,) and got.max() > 0
