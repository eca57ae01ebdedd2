import dataclasses

import jax
import numpy as np
import pytest
from conftest import SMALL, make_binary, make_regression

import jaxgbt
from jaxgbt.engine.compile import compiled_chunk
from jaxgbt.model_selection import fold_ids
from jaxgbt.sweeps import n_members

N_ROWS = make_regression()[0].shape[0]
SWEEP = {"learning_rate": [0.1, 0.3, 0.5], "l2": [0.5, 1.0, 4.0], "seed": [0, 1, 2],
         "sample_weight": [np.ones(N_ROWS), np.linspace(0.1, 3.0, N_ROWS), np.ones(N_ROWS)],
         "base_score": [0.0, 1.5, -0.5]}
# Poisson bootstrap rows per round: the seed then matters. (Tests share these settings
# so that they share compiled programs.)
BOOTSTRAP = dict(sampling="poisson", subsample=0.8, **SMALL)


def _coarse(X):
    """Five values per feature: every value gets its own bin whatever the rows or the
    weights, so binning on a fold's rows equals binning on all rows."""
    return np.clip(np.round(X * 2) / 2, -1.0, 1.0)


def _member_kwargs(params, i):
    return {name: values[i] for name, values in params.items()}


def _assert_same_model(a, b):
    np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_array_equal(a.threshold, b.threshold)
    np.testing.assert_allclose(a.leaf_value, b.leaf_value, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.base_score, b.base_score, rtol=1e-5, atol=1e-6)


def test_fit_many_members_equal_single_fits(regression_data):
    """A sweep of learning rate, l2, seed, sample weights and start, with bootstrap rows
    (a seed sweep and a bootstrap ensemble at once): member i is the fit with row i."""
    X, y = regression_data
    X = _coarse(X)  # swept weights bin unweighted; with few values, binning is the same
    models = jaxgbt.fit_many("squared_error", X, y, params=SWEEP, **BOOTSTRAP)
    assert models.leaf_value.shape == (3, SMALL["n_trees"], 2 ** SMALL["depth"], 1)
    for i in range(3):
        single = jaxgbt.fit("squared_error", X, y, **_member_kwargs(SWEEP, i), **BOOTSTRAP)
        _assert_same_model(models[i], single)
        with pytest.warns(DeprecationWarning, match=r"models\[i\]"):
            _assert_same_model(jaxgbt.member(models, i), single)
        np.testing.assert_allclose(models[i].predict(X), single.predict(X), rtol=1e-5, atol=1e-5)


def _assert_stopped_like(member, single, key):
    """A vmapped member with early stopping against the same fit alone: the same best
    round and predictions; the rounds the single fit never ran are empty trees in the
    member, and its validation curve is flat over them."""
    assert int(member.best_round) == int(single.best_round)
    done = single.n_trees
    _assert_same_model(member.first_trees(done), single)
    assert not np.asarray(member.leaf_value)[done:].any()
    assert not np.asarray(member.split_gain)[done:].any()
    curve = np.asarray(member.history[key])
    np.testing.assert_allclose(curve[:done], single.history[key], rtol=1e-5)
    np.testing.assert_array_equal(curve[done:], curve[done - 1])


def test_early_stopping_under_vmap_stops_each_member_where_its_own_fit_stops():
    """fit_many with early stopping: each member stops on its own validation curve,
    at the chunk its single fit stops at, and trains no tree after it."""
    X, y = make_binary(seed=5)
    X_val, y_val = make_binary(seed=6, n_rows=128)
    rates = [0.05, 0.6, 2.0]
    settings = dict(SMALL, n_trees=48, eval_set=[(X_val, y_val)], early_stopping_rounds=3)
    models = jaxgbt.fit_many("logistic", X, y, params={"learning_rate": rates}, **settings)
    assert models.n_trees == 48 and models.best_round.shape == (3,)
    stops = []
    for i, rate in enumerate(rates):
        single = jaxgbt.fit("logistic", X, y, learning_rate=rate, **settings)
        _assert_stopped_like(models[i], single, "valid_0:logloss")
        np.testing.assert_allclose(models[i].predict(X_val), single.predict(X_val), rtol=1e-5,
                                   atol=1e-6)
        stops.append(single.n_trees)
    assert min(stops) < 48 and len(set(stops)) > 1, stops  # members stopped apart
    # Under jax.jit alone (one model, traced learning rate) the stop is made the same way.
    jitted = jax.jit(lambda rate: jaxgbt.fit("logistic", X, y, learning_rate=rate,
                                             **settings))(rates[-1])
    _assert_stopped_like(jitted, jaxgbt.fit("logistic", X, y, learning_rate=rates[-1],
                                            **settings), "valid_0:logloss")


def test_a_sweep_with_an_eval_set_compiles_no_program_per_chunk():
    # Under vmap the chunks are joined once, at the end, and the evaluator scores each
    # chunk's own trees: joined after every chunk, each growing length compiled its own
    # eager concatenates and slices (about a dozen a chunk). The margins, the last round
    # and the best score enter their programs batched from the first chunk on: passed
    # in concrete first, the chunk, the evaluation and the running best compiled twice.
    from conftest import count_compilations

    X, y = make_binary(seed=7)
    X_val, y_val = make_binary(seed=8, n_rows=128)
    # 5 chunks; 12 bins, which no other test uses, so that no program is compiled already.
    settings = dict(SMALL, n_bins=12, n_trees=80, eval_set=[(X_val, y_val)],
                    early_stopping_rounds=100)
    compiled, stop = count_compilations()
    try:
        models = jaxgbt.fit_many("logistic", X, y, params={"learning_rate": [0.1, 0.3]},
                                 **settings)
        members = [models[i] for i in range(2)]
    finally:
        stop()
    assert models.history["valid_0:logloss"].shape == (2, 80)
    for program in ("_compiled_chunk", "evaluate_rounds", "_running_best"):
        assert compiled.count(f"jit({program})") == 1, (program, compiled)
    # One program for every member (an earlier test may have compiled it already).
    assert compiled.count("jit(_compiled_member)") <= 1, compiled
    assert "jit(squeeze)" not in compiled, compiled
    eager = [name for name in compiled if name in (
        "jit(dynamic_slice)", "jit(concatenate)", "jit(transpose)", "jit(squeeze)")]
    assert len(eager) <= 8, eager  # the vmap's own moves of its outputs' batch axis
    np.testing.assert_array_equal(members[1].leaf_value, models.leaf_value[1])
    single = jaxgbt.fit("logistic", X, y, learning_rate=0.3, **settings)
    np.testing.assert_allclose(models[1].history["valid_0:logloss"],
                               single.history["valid_0:logloss"], rtol=1e-5)


def test_stacked_model_indexing(regression_data):
    X, y = regression_data
    X = _coarse(X)
    models = jaxgbt.fit_many("squared_error", X, y, params=SWEEP, **BOOTSTRAP)
    assert n_members(models) == 3 and n_members(models[0]) == 0
    stacked = jax.vmap(lambda m: m.predict(X))(models)
    for i, model in enumerate(models):  # iteration stops at the last member
        assert isinstance(model, jaxgbt.Booster) and model.n_trees == SMALL["n_trees"]
        np.testing.assert_allclose(model.predict(X), stacked[i], rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(models[-1].leaf_value, models[2].leaf_value)
    np.testing.assert_array_equal(models[np.int64(1)].leaf_value, models[1].leaf_value)
    assert n_members(models[1:]) == 2
    with pytest.raises(IndexError, match="out of range"):
        models[3]
    with pytest.raises(TypeError, match="one model"):
        models[0][0]


def test_fit_many_compiles_once_and_batches_give_the_same_models(regression_data):
    X, y = regression_data
    X = _coarse(X)
    models = jaxgbt.fit_many("squared_error", X, y, params=SWEEP, **BOOTSTRAP)
    compiled = compiled_chunk(traced=True)._cache_size()
    other = {"learning_rate": [0.2, 0.05, 0.4], "l2": [2.0, 0.1, 1.0], "seed": [5, 6, 7],
             "sample_weight": SWEEP["sample_weight"][::-1], "base_score": [1.0, 2.0, 3.0]}
    jaxgbt.fit_many("squared_error", X, y, params=other, **BOOTSTRAP)
    assert compiled_chunk(traced=True)._cache_size() == compiled
    # Five models in batches of 3, the last one padded: the same program again.
    five = {name: values + other[name][:2] for name, values in SWEEP.items()}
    batched = jaxgbt.fit_many("squared_error", X, y, params=five, batch_size=3, **BOOTSTRAP)
    assert compiled_chunk(traced=True)._cache_size() == compiled
    assert n_members(batched) == 5
    for i in range(3):
        _assert_same_model(batched[i], models[i])
    single = jaxgbt.fit("squared_error", X, y, **_member_kwargs(five, 4), **BOOTSTRAP)
    _assert_same_model(batched[4], single)


@pytest.mark.parametrize("params, kwargs, error, pattern", [
    ({}, {}, TypeError, "non-empty dict"),
    ({"depth": [3, 4]}, {}, ValueError, "depth cannot differ between members"),
    ({"alpha": [1.0]}, {}, ValueError, "'alpha' is not a fit argument"),
    ({"l2": [1.0, 2.0], "l1": [0.0]}, {}, ValueError, "same number of values"),
    ({"l2": [1.0, -2.0]}, {}, ValueError, r"params\['l2'\]\[1\]=-2.0 is not allowed"),
    ({"subsample": [0.5, 1.5]}, {}, ValueError, r"params\['subsample'\]\[1\]=1.5 must lie"),
    ({"learning_rate": [0.0]}, {}, ValueError, "must be a finite number > 0"),
    ({"seed": [0.5]}, {}, TypeError, "must be integers"),
    ({"seed": [-1]}, {}, ValueError, r"params\['seed'\]\[0\]=-1 is out of range"),
    ({"sample_weight": [1.0, 2.0]}, {}, ValueError, r"shape \(M, N\)"),
    ({"l2": 1.0}, {}, ValueError, "one value per model"),
    ({"l2": [1.0]}, {"l2": 2.0}, ValueError, "both in params and as a keyword"),
    ({"l2": [1.0]}, {"callbacks": [print]}, ValueError, "needs the host"),
    ({"l2": [1.0]}, {"early_stopping_rounds": 3}, ValueError, "needs a validation set"),
])
def test_fit_many_rejects_bad_sweeps(regression_data, params, kwargs, error, pattern):
    X, y = regression_data
    with pytest.raises(error, match=pattern):
        jaxgbt.fit_many("squared_error", X, y, params=params, **kwargs, **SMALL)


def test_cv_folds_equal_separate_fits_on_the_other_folds(regression_data):
    X, y = regression_data
    X = _coarse(X)
    result = jaxgbt.cv("squared_error", X, y, n_folds=4, learning_rate=0.3, **SMALL)
    assert result.history["valid:rmse"].shape == (4, SMALL["n_trees"])
    assert np.bincount(result.folds).tolist() == [64, 64, 64, 64]
    for k in range(4):
        train, valid = result.folds != k, result.folds == k
        single = jaxgbt.fit("squared_error", X[train], y[train], learning_rate=0.3,
                            eval_set=[(X[valid], y[valid])], **SMALL)
        _assert_same_model(result.models[k], single)
        np.testing.assert_allclose(result.history["valid:rmse"][k],
                                   single.history["valid_0:rmse"], rtol=1e-5)
    np.testing.assert_allclose(result.mean["valid:rmse"],
                               result.history["valid:rmse"].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(result.std["valid:rmse"],
                               result.history["valid:rmse"].std(axis=0), rtol=1e-5)
    assert result.best_round == np.argmin(result.mean["valid:rmse"])
    assert result.best_score == result.mean["valid:rmse"][result.best_round]


def test_cv_with_early_stopping_stops_each_fold_on_its_held_out_rows(regression_data):
    X, y = regression_data
    X = _coarse(X)
    settings = dict(SMALL, n_trees=48, learning_rate=0.6)
    result = jaxgbt.cv("squared_error", X, y, n_folds=3, early_stopping_rounds=3, **settings)
    full = jaxgbt.cv("squared_error", X, y, n_folds=3, **settings)
    stops = []
    for k in range(3):
        train, valid = result.folds != k, result.folds == k
        single = jaxgbt.fit("squared_error", X[train], y[train],
                            eval_set=[(X[valid], y[valid])], early_stopping_rounds=3,
                            **settings)
        member = dataclasses.replace(result.models[k],
                                     history={"valid_0:rmse": result.history["valid:rmse"][k]})
        _assert_stopped_like(member, single, "valid_0:rmse")
        stops.append(single.n_trees)
    assert min(stops) < 48, stops
    # Up to the first stop the curves are those of the folds grown to the end.
    first = min(stops)
    np.testing.assert_allclose(result.history["valid:rmse"][:, :first],
                               full.history["valid:rmse"][:, :first], rtol=1e-5)
    assert result.best_round == np.argmin(result.mean["valid:rmse"])


def test_cv_over_a_sweep_with_stratified_folds():
    X, y = make_binary(seed=3)
    y[:40] = 1.0  # unbalanced classes
    swept = jaxgbt.cv("logistic", X, y, n_folds=4, params={"learning_rate": [0.02, 0.3]},
                      **SMALL)
    assert swept.history["valid:logloss"].shape == (2, 4, SMALL["n_trees"])
    assert swept.best_round.shape == (2,) and swept.models.feature.shape[:2] == (2, 4)
    # Configurations do not interact: the sweep in the other order gives the same curves.
    reverse = jaxgbt.cv("logistic", X, y, n_folds=4, params={"learning_rate": [0.3, 0.02]},
                        **SMALL)
    np.testing.assert_allclose(reverse.history["valid:logloss"][::-1],
                               swept.history["valid:logloss"], rtol=1e-6)
    _assert_same_model(reverse.models[0, 2], swept.models[1, 2])
    np.testing.assert_allclose(swept.mean["valid:logloss"],
                               swept.history["valid:logloss"].mean(axis=1), rtol=1e-6)
    # A small learning rate is still improving at the last round; a large one stops early.
    assert swept.best_round[0] == SMALL["n_trees"] - 1
    # Classification folds are stratified by default.
    np.testing.assert_array_equal(swept.folds, fold_ids(len(y), 4, labels=y))
    for label in (0.0, 1.0):
        counts = np.bincount(swept.folds[y == label], minlength=4)
        assert counts.max() - counts.min() <= 1, counts
    assert np.bincount(swept.folds).tolist() == [64, 64, 64, 64]


def test_cv_best_round_follows_the_first_metric_asked_for():
    # "logloss" sorts after "auc": the best round must still come from logloss's curve.
    X, y = make_binary(seed=4)
    result = jaxgbt.cv("logistic", X, y, n_folds=3, eval_metric=["logloss", "auc"],
                       learning_rate=0.5, **SMALL)
    assert list(result.history) == ["valid:auc", "valid:logloss"]
    assert result.best_round == np.argmin(result.mean["valid:logloss"])
    assert result.best_round != np.argmin(result.mean["valid:auc"])  # the sorted key's pick
    assert result.best_score == result.mean["valid:logloss"][result.best_round]


def test_ranking_folds_keep_queries_whole_and_equal_separate_fits():
    rng = np.random.default_rng(11)
    sizes = rng.integers(3, 12, size=30)
    group = np.repeat(np.arange(30), sizes)
    X = rng.integers(0, 4, size=(len(group), 4)).astype(np.float32)
    y = np.clip(X[:, 0] + rng.integers(0, 2, len(group)) - 1, 0, 3).astype(np.float32)
    result = jaxgbt.cv("lambdarank_ndcg", X, y, group=group, n_folds=3, **SMALL)
    for query in range(30):
        assert np.unique(result.folds[group == query]).size == 1
    train, valid = result.folds != 0, result.folds == 0
    single = jaxgbt.fit("lambdarank_ndcg", X[train], y[train], group=group[train],
                        eval_set=[dict(X=X[valid], y=y[valid], group=group[valid])], **SMALL)
    _assert_same_model(result.models[0], single)
    np.testing.assert_allclose(result.history["valid:ndcg@10"][0],
                               single.history["valid_0:ndcg@10"], rtol=1e-5)
    assert result.best_round == np.argmax(result.mean["valid:ndcg@10"])  # higher is better


def test_fold_ids():
    folds = fold_ids(10, 3, shuffle=False)
    assert folds.tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
    shuffled = fold_ids(10, 3, seed=1)
    assert sorted(np.bincount(shuffled).tolist()) == [3, 3, 4]
    np.testing.assert_array_equal(shuffled, fold_ids(10, 3, seed=1))
    group = np.repeat([0, 1, 2, 3], [5, 1, 1, 3])
    grouped = fold_ids(10, 2, group=group)
    assert np.bincount(grouped).tolist() == [5, 5]


@pytest.mark.parametrize("loss, kwargs, error, pattern", [
    ("cox", {}, ValueError, "couples all rows"),
    ("squared_error", {"eval_set": []}, ValueError, "eval_set is not allowed"),
    ("squared_error", {"n_folds": 1}, ValueError, "n_folds=1 is out of range"),
    ("squared_error", {"folds": np.zeros(5, int)}, ValueError, "folds must be integers of shape"),
    ("squared_error", {"folds": np.full(256, 7)}, ValueError, r"folds must lie in \[0, 5\)"),
    ("squared_error", {"folds": np.zeros(256, int)}, ValueError, "fold 0 leaves no rows"),
    ("lambdarank_ndcg", {"group": np.repeat(np.arange(4), 64)}, ValueError,
     "only 4 queries"),
    ("squared_error", {"nfold": 3}, TypeError, r"'nfold' \(jaxgbt calls it n_folds\)"),
    ("squared_error", {"fold_count": 3}, TypeError, r"'fold_count' \(jaxgbt calls it n_folds\)"),
])
def test_cv_rejects_bad_arguments(loss, kwargs, error, pattern):
    X, y = make_regression()
    with pytest.raises(error, match=pattern):
        jaxgbt.cv(loss, X, np.abs(y), **kwargs, **SMALL)


def test_fit_auto_refits_the_best_rate_and_round_of_its_cross_validation():
    X, y = make_binary()
    rates = (0.05, 0.5)
    # Without score noise, so that a fold's stop is the data's, not the draws'.
    auto = jaxgbt.fit_auto("logistic", X, y, max_trees=48, learning_rates=rates, n_folds=3,
                           early_stopping_rounds=4, depth=3, n_bins=16, random_strength=0.0)
    curves = auto.cv.mean["valid:logloss"]  # [rates, rounds]
    assert curves.shape == (2, 48)
    last_trees = np.asarray(auto.cv.models.leaf_value)[1, :, -1]  # [folds, leaves, K]
    assert not last_trees.any(axis=(1, 2)).all()  # a fold model of rate 0.5 stopped
    best_rate, best_round = np.unravel_index(np.nanargmin(curves), curves.shape)
    assert auto.learning_rate == rates[best_rate] and auto.n_trees == best_round + 1
    refit = jaxgbt.fit("logistic", X, y, n_trees=auto.n_trees, learning_rate=auto.learning_rate,
                       depth=3, n_bins=16, random_strength=0.0)
    _assert_same_model(auto.model, refit)


def test_fit_auto_chooses_the_depth_with_the_best_cross_validated_score():
    X, y = make_binary(seed=2)
    auto = jaxgbt.fit_auto("logistic", X, y, max_trees=24, learning_rates=(0.1, 0.5),
                           depths=[1, 3], n_folds=3, n_bins=16)
    assert sorted(auto.cv_by_depth) == [1, 3]
    best = {depth: np.nanmin(result.mean["valid:logloss"])
            for depth, result in auto.cv_by_depth.items()}
    assert auto.depth == min(best, key=best.get) and auto.model.depth == auto.depth
    assert auto.cv is auto.cv_by_depth[auto.depth]
    curves = auto.cv.mean["valid:logloss"]
    rate, round_ = np.unravel_index(np.nanargmin(curves), curves.shape)
    assert auto.learning_rate == (0.1, 0.5)[rate] and auto.n_trees == round_ + 1
    refit = jaxgbt.fit("logistic", X, y, n_trees=auto.n_trees, learning_rate=auto.learning_rate,
                       depth=auto.depth, n_bins=16)
    _assert_same_model(auto.model, refit)


def test_fit_auto_chooses_the_growth_policy_and_depth_together():
    # A target of one interaction per half of the rows: each depthwise node can take its
    # own column, which one oblivious split per level cannot.
    X, _ = make_regression(seed=3)
    y = np.where(X[:, 0] > 0, X[:, 1], -X[:, 2]).astype(np.float32)
    auto = jaxgbt.fit_auto("squared_error", X, y, max_trees=16, learning_rates=(0.3,),
                           depths=[1, 2], grow_policies=["oblivious", "depthwise"],
                           n_folds=3, n_bins=16)
    assert auto.grow_policy == auto.model.grow_policy == "depthwise"
    assert (auto.depth, sorted(auto.cv_by_policy), sorted(auto.cv_by_depth)) == (
        2, ["depthwise", "oblivious"], [1, 2])
    assert auto.cv is auto.cv_by_policy["depthwise"] is auto.cv_by_depth[2]
    best = {policy: np.nanmin(result.mean["valid:rmse"])
            for policy, result in auto.cv_by_policy.items()}
    assert best["depthwise"] < best["oblivious"]
    assert np.nanmin(auto.cv_by_depth[1].mean["valid:rmse"]) > best["depthwise"]
    refit = jaxgbt.fit("squared_error", X, y, n_trees=auto.n_trees, learning_rate=0.3,
                       depth=2, grow_policy="depthwise", n_bins=16)
    _assert_same_model(auto.model, refit)


def test_fit_auto_grid_chooses_among_every_combination_and_rate():
    X, y = make_binary(seed=3)
    grid = {"l2": [30.0, 0.0], "min_data_in_leaf": [60, 0]}  # the best last, not first
    rates = (0.1, 0.5)
    auto = jaxgbt.fit_auto("logistic", X, y, max_trees=24, learning_rates=rates, grid=grid,
                           n_folds=3, depth=3, n_bins=16)
    curves = auto.cv.mean["valid:logloss"]  # [combinations x rates, rounds]
    assert curves.shape == (8, 24)
    # every setting changes the curves: none of the 8 candidates is another's copy
    assert len({curve.tobytes() for curve in np.asarray(curves)}) == 8
    candidates = [(l2, m, rate) for l2 in grid["l2"] for m in grid["min_data_in_leaf"]
                  for rate in rates]
    best, round_ = np.unravel_index(np.nanargmin(curves), curves.shape)
    l2, min_data, rate = candidates[best]
    assert auto.settings == {"l2": l2, "min_data_in_leaf": min_data}
    assert auto.learning_rate == rate and auto.n_trees == round_ + 1
    refit = jaxgbt.fit("logistic", X, y, n_trees=auto.n_trees, learning_rate=rate, l2=l2,
                       min_data_in_leaf=min_data, depth=3, n_bins=16)
    _assert_same_model(auto.model, refit)


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(grid={"depth": [3, 4]}), ValueError, r"grid\['depth'\].*use depths="),
    (dict(grid={"learning_rate": [0.1]}), ValueError, "use learning_rates="),
    (dict(grid={"seed": [0, 1]}), ValueError, r"grid\['seed'\]"),
    (dict(grid={"l2": []}), TypeError, r"grid\['l2'\] must be a non-empty list"),
    (dict(grid={"l2": [1.0, -1.0]}), ValueError, r"grid\['l2'\]\[1\]=-1.0"),
    (dict(grid={"subsample": [0.5, 1.5]}), ValueError, r"grid\['subsample'\]\[1\]"),
    (dict(grid={"l2": [1.0]}, l2=3.0), ValueError, r"l2= or grid\['l2'\], not both"),
    (dict(grid=[("l2", [1.0])]), TypeError, "grid must be a non-empty dict"),
    (dict(depths=[3, 3]), ValueError, "depths must be distinct"),
    (dict(depths=[0]), ValueError, r"depths\[0\]=0 is out of range"),
    (dict(depths=3), TypeError, "depths must be a non-empty list"),
    (dict(depths=[3], depth=4), ValueError, "depth= or depths=, not both"),
    (dict(grow_policies=["depthwise", "depthwise"]), ValueError,
     "grow_policies must be distinct"),
    (dict(grow_policies=["levelwise"]), ValueError, r"grow_policies\[0\]"),
    (dict(grow_policies="depthwise"), TypeError, "grow_policies must be a non-empty list"),
    (dict(grow_policies=["depthwise"], grow_policy="oblivious"), ValueError,
     "grow_policy= or grow_policies=, not both"),
    (dict(n_trees=10), ValueError, "fit_auto chooses n_trees"),
    (dict(learning_rate=0.1), ValueError, "fit_auto chooses learning_rate"),
    (dict(learning_rates=[]), TypeError, "non-empty list"),
    (dict(learning_rates=[0.1, -1.0]), ValueError, r"learning_rates\[1\]=-1.0"),
    (dict(max_trees=0), ValueError, "max_trees"),
    (dict(early_stopping_rounds=0), ValueError, "early_stopping_rounds"),
    (dict(nfold=3), TypeError, r"'nfold' \(jaxgbt calls it n_folds\)"),
])
def test_fit_auto_rejects_what_it_chooses_and_bad_rates(kwargs, error, pattern):
    X, y = make_binary()
    with pytest.raises(error, match=pattern):
        jaxgbt.fit_auto("logistic", X, y, **kwargs)
