"""TreeSHAP values and interaction values against a brute-force float64 reference (all
2**F coalitions of the path-dependent game), additivity, and the error for models
without covers."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import count_compilations

import jaxgbt

N_ROWS, N_COLUMNS = 300, 6
EXPLAINED_ROWS = 8  # rows checked against the brute force (2**F coalitions each)


def _data(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_COLUMNS)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + np.abs(X[:, 3]) - X[:, 4] * (X[:, 5] > 0)
         + 0.1 * rng.normal(size=N_ROWS)).astype(np.float32)
    X[rng.random(N_ROWS) < 0.15, 1] = np.nan  # missing values: the learned default side
    X[rng.random(N_ROWS) < 0.10, 4] = np.nan
    return X, y


def _brute_force(model, X, interactions=False):
    """f64[N, F, K] (or [N, F, F, K]) from the reference game of each row."""
    X_split = np.asarray(model._check_X(X), np.float64)
    raw_column = model._raw_columns()
    arrays = [np.asarray(a) for a in (model.feature, model.threshold, model.default_left,
                                      model.leaf_value, model.cover, model.base_score)]
    out = []
    for x in X_split:
        game = reference.path_dependent_game(x, *arrays, raw_column, model.n_features,
                                             model.grow_policy == "depthwise")
        out.append(reference.shapley_interaction_values(game, model.n_features) if interactions
                   else reference.shapley_values(game, model.n_features))
    return np.stack(out), game[0]  # game[0]: the empty coalition, E[f]


def _repeats_a_column_on_a_path(model) -> bool:
    feature = np.asarray(model.feature)
    if model.grow_policy == "oblivious":
        return any(len(set(tree)) < len(tree) for tree in feature)
    depth = model.depth
    for tree in feature:
        for leaf in range(2**depth):
            path = [tree[2**d - 1 + (leaf >> (depth - d))] for d in range(depth)]
            if len(set(path)) < depth:
                return True
    return False


MODELS = {
    "oblivious": dict(loss="squared_error", depth=4, grow_policy="oblivious"),
    # some nodes do not split: empty subtrees (without score noise, whose draws would
    # decide which)
    "depthwise": dict(loss="squared_error", depth=3, grow_policy="depthwise",
                      min_split_gain=2.0, random_strength=0.0),
    "vector": dict(loss="multi_squared_error", depth=3, grow_policy="oblivious"),
    "logistic_depthwise": dict(loss="logistic", depth=4, grow_policy="depthwise"),
}


# The vector and deeper depthwise models compile programs of their own: run with the slow tests.
@pytest.fixture(scope="module", params=[
    pytest.param(name, marks=pytest.mark.slow) if name in ("vector", "logistic_depthwise")
    else name for name in sorted(MODELS)])
def fitted(request):
    settings = dict(MODELS[request.param])
    X, y = _data()
    if settings["loss"] == "multi_squared_error":
        y = np.stack([y, np.nan_to_num(X[:, 1]) - y], axis=1)
    elif settings["loss"] == "logistic":
        y = (y > np.median(y)).astype(np.float32)
    model = jaxgbt.fit(settings.pop("loss"), X, y, n_trees=6, n_bins=16, **settings)
    return request.param, model, X


def test_shap_values_equal_the_brute_force_shapley_values(fitted):
    name, model, X = fitted
    rows = X[:EXPLAINED_ROWS]
    expected, empty = _brute_force(model, rows)
    got = np.asarray(model.shap_values(rows))
    got = got if model.vector_output else got[..., None]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)
    base = np.asarray(model.expected_value).reshape(-1)
    np.testing.assert_allclose(base, empty, atol=1e-5, rtol=1e-5)
    if name in ("oblivious", "logistic_depthwise"):
        assert _repeats_a_column_on_a_path(model)  # merged players are exercised
    if name == "depthwise":
        assert (np.asarray(model.split_gain) == 0).any()  # pass-through nodes too


def test_interaction_values_equal_the_brute_force(fitted):
    _, model, X = fitted
    rows = X[:EXPLAINED_ROWS // 2]
    expected, _ = _brute_force(model, rows, interactions=True)
    got = np.asarray(model.shap_interaction_values(rows))
    got = got if model.vector_output else got[..., None]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_values_add_up_to_the_margins_and_interactions_to_the_values(fitted):
    _, model, X = fitted
    phi = np.asarray(model.shap_values(X), np.float64)
    margins = np.asarray(model.predict_raw(X), np.float64)
    compiled, stop = count_compilations()
    try:
        base = np.asarray(model.expected_value, np.float64)
    finally:
        stop()
    np.testing.assert_allclose(phi.sum(axis=1) + base, margins, atol=1e-5)
    assert len(compiled) <= 2, compiled  # one program (and the scalar's slice), not dozens
    jitted = jax.jit(lambda rows: model.shap_values(rows))(jnp.asarray(X))  # traced rows
    np.testing.assert_allclose(np.asarray(jitted), phi, atol=1e-6)
    inter = np.asarray(model.shap_interaction_values(X[:50]), np.float64)
    np.testing.assert_allclose(inter.sum(axis=2), phi[:50], atol=1e-5)
    np.testing.assert_allclose(inter, np.swapaxes(inter, 1, 2), atol=1e-6)


def test_pattern_tables_equal_the_per_row_games(fitted):
    """The gathers from answer-pattern tables (per tree for oblivious trees, per leaf for
    any) equal each row's leaf games played one by one."""
    _, model, X = fitted
    from jaxgbt.explain import shap

    rows = X[:40]
    X_split = model._check_X(rows)
    paths = shap.tree_paths(model.feature, model.cover, model.leaf_value,
                            jnp.asarray(model._raw_columns()), model.layout, model.depth)
    splits = (model.feature, model.threshold, model.default_left)
    for interactions in (False, True):
        played = shap.row_values(paths, *splits, X_split, model.layout, model.depth,
                                 model.n_features, interactions)
        table = shap.leaf_pattern_table(paths, model.depth, interactions)
        gathered = shap.row_values(paths, *splits, X_split, model.layout, model.depth,
                                   model.n_features, interactions, table)
        np.testing.assert_allclose(np.asarray(gathered), np.asarray(played), atol=1e-6)
        if model.grow_policy == "oblivious":
            by_leaf = shap.tree_shap(paths, X_split, model.leaf_index(rows), None,
                                     model.layout, model.depth, model.n_features, interactions)
            np.testing.assert_allclose(np.asarray(by_leaf), np.asarray(played), atol=1e-6)


def test_categorical_columns_are_one_player():
    rng = np.random.default_rng(2)
    X, y = _data(2)
    X = X[:, :4].copy()
    X[:, 2] = rng.integers(0, 3, size=N_ROWS)  # one-hot (3 categories)
    X[:, 3] = rng.integers(0, 9, size=N_ROWS)  # target statistics (9 categories)
    y = y + X[:, 2] - (X[:, 3] % 3)
    model = jaxgbt.fit("squared_error", X, y, categorical_features=[2, 3], n_trees=6,
                       depth=4, n_bins=16, one_hot_max_size=4)
    assert model.n_split_features > model.n_features
    rows = X[:EXPLAINED_ROWS]
    expected, _ = _brute_force(model, rows)
    got = np.asarray(model.shap_values(rows))
    assert got.shape == (EXPLAINED_ROWS, 4)
    np.testing.assert_allclose(got, expected[..., 0], atol=1e-5, rtol=1e-5)
    assert np.abs(got[:, 2:]).max() > 0


def test_best_round_n_trees_and_errors(tmp_path):
    X, y = _data(3)
    noise = np.random.default_rng(4).normal(size=100).astype(np.float32)  # stops early
    model = jaxgbt.fit("squared_error", X[:200], y[:200], n_trees=30, depth=3, n_bins=16,
                       eval_set=[(X[200:], noise)], early_stopping_rounds=3,
                       learning_rate=0.5)
    assert model.best_round is not None and int(model.best_round) < 29
    phi = np.asarray(model.shap_values(X[:20]))
    np.testing.assert_allclose(phi.sum(1) + np.asarray(model.expected_value),
                               np.asarray(model.predict_raw(X[:20])), atol=1e-5)
    assert not np.asarray(model.shap_interaction_values(X[:4], n_trees=0)).any()
    three = np.asarray(model.shap_values(X[:20], n_trees=3))
    np.testing.assert_allclose(three, np.asarray(model.first_trees(3).shap_values(X[:20])))
    with pytest.raises(ValueError, match="before covers were stored"):
        import dataclasses

        dataclasses.replace(model, cover=None).shap_values(X[:5])
    many = jax.tree.map(lambda a: jnp.stack([a, a]), model)  # as fit_many stacks members
    with pytest.raises(TypeError, match="index a member first"):
        many.shap_values(X[:5])


def _xgboost_as_booster(booster, n_features: int, depth: int, base_score: float):
    """A depthwise jaxgbt Booster with the trees of an XGBoost model (``max_depth=depth``).

    XGBoost sends a row left when ``x < split_condition``, jaxgbt when ``x <= threshold``:
    the threshold is the float32 just below the condition. A leaf above the last level
    is padded with pass-through splits (threshold +inf, missing left, gain 0) down to
    its leftmost descendant, which takes its value and cover; its other descendants get
    value 0 and cover 0, and no row or coalition ever reaches them.
    """
    import json

    trees = [json.loads(tree) for tree in booster.get_dump(dump_format="json", with_stats=True)]
    n_trees, n_nodes, n_leaves = len(trees), 2**depth - 1, 2**depth
    feature = np.zeros((n_trees, n_nodes), np.int32)
    threshold = np.full((n_trees, n_nodes), np.inf, np.float32)
    default_left = np.ones((n_trees, n_nodes), bool)
    gain = np.zeros((n_trees, n_nodes), np.float32)
    leaf_value = np.zeros((n_trees, n_leaves, 1), np.float32)
    cover = np.zeros((n_trees, n_leaves), np.float32)

    def place(t, node, level, j):
        if "leaf" in node:
            leftmost = j << (depth - level)
            leaf_value[t, leftmost, 0], cover[t, leftmost] = node["leaf"], node["cover"]
            return
        at = 2**level - 1 + j
        feature[t, at] = int(node["split"].removeprefix("f"))
        threshold[t, at] = np.nextafter(np.float32(node["split_condition"]), np.float32(-np.inf))
        default_left[t, at] = node["missing"] == node["yes"]
        gain[t, at] = max(float(node["gain"]), 1e-6)
        children = {child["nodeid"]: child for child in node["children"]}
        place(t, children[node["yes"]], level + 1, 2 * j)
        place(t, children[node["no"]], level + 1, 2 * j + 1)

    for t, tree in enumerate(trees):
        place(t, tree, 0, 0)
    return jaxgbt.Booster(
        feature=jnp.asarray(feature), threshold=jnp.asarray(threshold),
        default_left=jnp.asarray(default_left), split_gain=jnp.asarray(gain),
        leaf_value=jnp.asarray(leaf_value), base_score=jnp.asarray([base_score], jnp.float32),
        objective=jaxgbt.objectives.squared_error, n_features=n_features,
        grow_policy="depthwise", cover=jnp.asarray(cover))


def test_matches_xgboost_pred_contribs_and_pred_interactions():
    xgboost = pytest.importorskip("xgboost")
    X, y = _data(5)
    depth, base = 4, 0.5
    dtrain = xgboost.DMatrix(X, label=y)
    booster = xgboost.train({"max_depth": depth, "eta": 0.3, "base_score": base, "nthread": 1,
                             "min_child_weight": 3.0, "lambda": 1.0}, dtrain, num_boost_round=10)
    model = _xgboost_as_booster(booster, N_COLUMNS, depth, base)
    assert (np.asarray(model.split_gain) == 0).any()  # some leaves above the last level
    rows = X[:60]
    dtest = xgboost.DMatrix(rows)
    np.testing.assert_allclose(np.asarray(model.predict_raw(rows)),
                               booster.predict(dtest, output_margin=True), rtol=1e-5, atol=1e-5)
    contribs = booster.predict(dtest, pred_contribs=True)  # [N, F + 1], the bias last
    scale = np.abs(contribs).max()
    np.testing.assert_allclose(np.asarray(model.shap_values(rows)), contribs[:, :-1],
                               rtol=1e-5, atol=1e-5 * scale)
    np.testing.assert_allclose(float(model.expected_value), contribs[0, -1], rtol=1e-5)
    interactions = booster.predict(dtest, pred_interactions=True)  # [N, F + 1, F + 1]
    np.testing.assert_allclose(np.asarray(model.shap_interaction_values(rows)),
                               interactions[:, :-1, :-1], rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.slow
def test_forest_values_add_up_and_match_the_brute_force():
    X, y = _data(6)
    forest = jaxgbt.fit_forest(X, y, n_trees=4, depth=3, n_bins=16).model
    rows = X[:EXPLAINED_ROWS]
    expected, _ = _brute_force(forest, rows)
    np.testing.assert_allclose(np.asarray(forest.shap_values(rows)), expected[..., 0],
                               atol=1e-5, rtol=1e-5)
    phi = np.asarray(forest.shap_values(X), np.float64)
    np.testing.assert_allclose(phi.sum(1) + float(forest.expected_value),
                               np.asarray(forest.predict_raw(X)), atol=1e-5)


def _interventional_brute_force(model, X, background, interactions=False):
    """f64[N, F(, F)]: Shapley (interaction) values of v(S) = mean_b f(x_S, b_rest), with
    f from ``predict_raw`` on every hybrid row."""
    n_columns = X.shape[1]
    in_coalition = ((np.arange(2**n_columns)[:, None] >> np.arange(n_columns)) & 1) > 0
    out = []
    for x in X:
        hybrid = np.where(in_coalition[:, None, :], x[None, None, :], background[None])
        margins = np.asarray(model.predict_raw(hybrid.reshape(-1, n_columns)), np.float64)
        game = margins.reshape(2**n_columns, len(background)).mean(axis=1)[:, None]
        values = (reference.shapley_interaction_values(game, n_columns) if interactions
                  else reference.shapley_values(game, n_columns))
        out.append(values[..., 0])
    return np.stack(out)


def test_interventional_values_equal_the_brute_force(fitted):
    _, model, X = fitted
    if model.vector_output:
        pytest.skip("the brute force here reads one output")
    background, rows = X[100:107], X[:6]
    expected = _interventional_brute_force(model, rows, background)
    np.testing.assert_allclose(np.asarray(model.shap_values(rows, background=background)),
                               expected, atol=1e-5)
    inter = _interventional_brute_force(model, rows[:3], background, interactions=True)
    np.testing.assert_allclose(
        np.asarray(model.shap_interaction_values(rows[:3], background=background)), inter,
        atol=1e-5)
    phi = np.asarray(model.shap_values(X, background=X[:50]), np.float64)
    base = np.asarray(model.predict_raw(X[:50]), np.float64).mean()
    np.testing.assert_allclose(phi.sum(1) + base, np.asarray(model.predict_raw(X)), atol=1e-5)
