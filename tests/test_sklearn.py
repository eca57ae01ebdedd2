"""The scikit-learn estimators: scikit-learn's own estimator checks, labels of any type,
validation sets and early stopping, ranking queries, clone and pickle, and a grid
search over a pipeline on real data (adult)."""

import inspect
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, cross_val_score  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import jaxgbt  # noqa: E402
from jaxgbt import JaxGBTClassifier, JaxGBTRanker, JaxGBTRegressor  # noqa: E402
from jaxgbt.sklearn import _FIT_SETTINGS  # noqa: E402

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# scikit-learn's checks fit dozens of tiny data sets of different shapes, and JAX
# compiles the boosting program anew for each shape: few bins and shallow trees keep
# each compilation short (the defaults stay n_trees=200, depth=6, n_bins=256).
CHECKED = dict(n_trees=10, depth=3, n_bins=16)
SMALL = dict(n_trees=8, depth=3, n_bins=16)

# The checks jaxgbt fails on purpose, with the reason (docs/sklearn.md lists them).
_BINNING = ("a row of weight 0 still places the histogram bin edges (its value is a cut "
            "point), so thresholds can fall elsewhere than when the row is absent; with "
            "positive integer weights, weighting and repeating rows give the same model")
_RANKING = ("a ranking loss sums over pairs of rows within a query, so repeating a row adds "
            "pairs, which weighting it does not; and, as for the others, " + _BINNING)
_FLOAT32 = ("predictions are float32, as the model's thresholds, leaves and sums are; the "
            "check asks several targets' predictions for float64 (their shape is tested "
            "in test_several_targets_are_one_multi_output_model)")
# Each on dense data and on sparse data (the estimators take scipy.sparse X).
EXPECTED_FAILED_CHECKS = {
    name: {f"check_sample_weight_equivalence_on_{kind}_data": reason
           for kind in ("dense", "sparse")}
    for name, reason in (("JaxGBTRegressor", _BINNING), ("JaxGBTClassifier", _BINNING),
                         ("JaxGBTRanker", _RANKING))
}
EXPECTED_FAILED_CHECKS["JaxGBTRegressor"]["check_regressor_multioutput"] = _FLOAT32


def _expected_failed_checks(estimator) -> dict:
    return EXPECTED_FAILED_CHECKS[type(estimator).__name__]


def _run_check(estimator, check) -> None:
    """Runs one of scikit-learn's checks; a check jaxgbt fails on purpose is reported as
    an expected failure without running: each fits dozens of weighted variants (about 30 s
    of the suite's time for the six) only to fail for the reason given."""
    name = getattr(check, "func", check).__name__
    reason = _expected_failed_checks(estimator).get(name)
    if reason is not None:
        pytest.xfail(reason)
    check(estimator)


# The regressor's checks run by default; the classifier's and ranker's, which share its
# validation and fit code, take about two minutes more (docs/sklearn.md) and are slow.
@parametrize_with_checks([JaxGBTRegressor(**CHECKED)],
                         expected_failed_checks=_expected_failed_checks, xfail_strict=True)
def test_regressor_passes_sklearn_checks(estimator, check):
    _run_check(estimator, check)


@pytest.mark.slow
@parametrize_with_checks([JaxGBTClassifier(**CHECKED), JaxGBTRanker(**CHECKED)],
                         expected_failed_checks=_expected_failed_checks, xfail_strict=True)
def test_classifier_and_ranker_pass_sklearn_checks(estimator, check):
    _run_check(estimator, check)


def test_expected_failures_are_documented():
    text = (Path(__file__).resolve().parents[1] / "docs" / "sklearn.md").read_text()
    for checks in EXPECTED_FAILED_CHECKS.values():
        for name in checks:
            assert name in text


# -- parameters -------------------------------------------------------------------------

# fit's arguments that are not constructor parameters: the loss (``loss=``), the data,
# and the settings of one fit, which are arguments of the estimators' fit.
_PER_FIT = {"loss", "X", "y", "sample_weight", "group", "eval_set", "eval_metric",
            "early_stopping_rounds", "callbacks", "categorical_features", "init_model",
            "base_margin", "eval_base_margin"}
# Left out on purpose: the classifier sets n_outputs from the classes and the regressor
# from y's shape; checkpoints, names and training across processes (each process passing
# its own rows) belong to long fits with jaxgbt.fit itself.
_NOT_EXPOSED = {"n_outputs", "checkpoint_path", "checkpoint_every", "feature_names",
                "distributed"}


def test_constructor_mirrors_fit_with_its_defaults():
    fit_parameters = inspect.signature(jaxgbt.fit).parameters
    assert set(fit_parameters) == set(_FIT_SETTINGS) | _PER_FIT | _NOT_EXPOSED
    for cls in (JaxGBTRegressor, JaxGBTClassifier, JaxGBTRanker):
        params = cls().get_params()
        own = {"eval_fraction"} | ({"class_weight"} if cls is JaxGBTClassifier else set())
        assert set(params) == set(_FIT_SETTINGS) | {"loss"} | own
        for name in _FIT_SETTINGS:
            assert params[name] == fit_parameters[name].default, name
        fit_arguments = set(inspect.signature(cls.fit).parameters) - {"self", "X", "y"}
        assert fit_arguments <= _PER_FIT | {"eval_group"}


def test_clone_keeps_parameters_and_drops_the_fit(binary):
    X, y = binary
    model = JaxGBTClassifier(learning_rate=0.3, **SMALL).fit(X, y)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "booster_")


# -- data and labels --------------------------------------------------------------------


@pytest.fixture(scope="module")
def binary():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 0.5 * rng.normal(size=200) > 0).astype(int)
    return X, y


@pytest.mark.parametrize("labels", [np.array(["no", "yes"]), np.array([3, 10]),
                                    np.array([False, True])], ids=["str", "int", "bool"])
def test_labels_of_any_type_round_trip(binary, labels):
    X, y = binary
    model = JaxGBTClassifier(**SMALL).fit(X, labels[y])
    assert model.classes_.tolist() == labels.tolist()
    assert model.booster_.objective.name == "logistic"
    assert model.booster_.classes == tuple(labels.tolist())  # kept in its files too
    proba = model.predict_proba(X)
    assert isinstance(proba, np.ndarray) and proba.shape == (200, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
    prediction = model.predict(X)
    assert prediction.dtype == labels.dtype
    np.testing.assert_array_equal(prediction, labels[(proba[:, 1] > 0.5).astype(int)])
    assert model.score(X, labels[y]) > 0.8
    decision = model.decision_function(X)
    np.testing.assert_array_equal(decision > 0, prediction == labels[1])


def test_multiclass_string_labels_use_softmax_in_classes_order(binary):
    X, _ = binary
    y = np.array(["b", "c", "a"])[np.digitize(np.nan_to_num(X[:, 1]), [-0.5, 0.5])]
    model = JaxGBTClassifier(**SMALL).fit(X, y)
    assert model.classes_.tolist() == ["a", "b", "c"]
    assert model.booster_.objective.name == "softmax"
    proba = model.predict_proba(X)
    assert proba.shape == (200, 3)
    # Each column is the probability of its class: the true class is the likeliest.
    assert (model.classes_[proba.argmax(axis=1)] == y).mean() > 0.9
    assert model.decision_function(X).shape == (200, 3)


def test_custom_loss_function_classifier_gets_a_sigmoid_link(binary):
    import jax.numpy as jnp

    def cross_entropy(y, f):
        return jnp.logaddexp(0.0, f) - y * f

    X, y = binary
    custom = JaxGBTClassifier(loss=cross_entropy, **SMALL).fit(X, y)
    builtin = JaxGBTClassifier(**SMALL).fit(X, y)
    np.testing.assert_allclose(custom.predict_proba(X), builtin.predict_proba(X), atol=1e-5)


def test_dataframe_names_and_importances(binary):
    pd = pytest.importorskip("pandas")
    X, y = binary
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = JaxGBTRegressor(**SMALL).fit(frame, y.astype(float))
    assert model.feature_names_in_.tolist() == ["a", "b", "c", "d"]
    assert model.n_features_in_ == 4
    assert model.booster_.feature_names == ("a", "b", "c", "d")
    importances = model.feature_importances_
    assert importances.shape == (4,) and importances.sum() == pytest.approx(1.0)
    assert importances.argmax() == 0
    np.testing.assert_array_equal(model.predict(frame), model.booster_.predict(frame))
    with pytest.raises(ValueError, match="feature names"):
        model.predict(frame.rename(columns={"a": "z"}))


def test_importances_are_zero_without_splits():
    X = np.arange(20.0).reshape(10, 2)
    model = JaxGBTRegressor(**SMALL).fit(X, np.ones(10))
    np.testing.assert_array_equal(model.feature_importances_, [0.0, 0.0])


def test_bad_input_is_refused_before_fitting(binary):
    X, y = binary
    with pytest.raises(ValueError, match="infinity"):
        JaxGBTRegressor(**SMALL).fit(np.where(np.isnan(X), np.inf, X), y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        JaxGBTClassifier(**SMALL).fit(X, np.zeros(200))
    with pytest.raises(ValueError, match="weight"):
        JaxGBTRegressor(**SMALL).fit(X, y, sample_weight=np.zeros(200))
    with pytest.raises(ValueError, match="negative relevance"):
        JaxGBTRanker(**SMALL).fit(X, y - 1.0)


def test_positive_integer_weights_equal_repeated_rows(binary):
    # The property scikit-learn's weight check asks for, which holds without zero weights,
    # and without score noise: its decay counts rows (CatBoost's), which repeats change.
    X, y = binary
    weight = np.random.default_rng(1).integers(1, 4, size=200)
    weighted = JaxGBTRegressor(random_strength=0.0, **SMALL).fit(X, y, sample_weight=weight)
    repeated = JaxGBTRegressor(random_strength=0.0, **SMALL).fit(X.repeat(weight, axis=0),
                                                                 y.repeat(weight))
    np.testing.assert_allclose(weighted.predict(X), repeated.predict(X), rtol=1e-5, atol=1e-6)


@pytest.fixture(scope="module")
def adult_numeric():
    """Adult's numeric columns (bundled), 1,000 training rows and 2,000 test rows, with
    the income labels as they are: about a quarter of the rows earn ">50K"."""
    from jaxgbt.datasets import load_adult

    train, test = load_adult()
    numeric = train.select_dtypes("number").columns
    return (train[numeric][:1000].to_numpy(np.float32), train["income"][:1000].to_numpy(),
            test[numeric][:2000].to_numpy(np.float32), test["income"][:2000].to_numpy())


def test_class_weight_weighs_the_rows_of_each_class(adult_numeric):
    X, y, X_test, y_test = adult_numeric
    # "balanced": N / (K x the class's rows), as scikit-learn's classifiers weigh them.
    classes, counts = np.unique(y, return_counts=True)
    balanced_rows = (len(y) / (2 * counts.astype(np.float64)))[np.searchsorted(classes, y)]
    balanced = JaxGBTClassifier(class_weight="balanced", **SMALL).fit(X, y)
    by_rows = JaxGBTClassifier(**SMALL).fit(X, y, sample_weight=balanced_rows)
    np.testing.assert_array_equal(balanced.predict_proba(X_test), by_rows.predict_proba(X_test))
    # A dict multiplies the rows' own weights; labels it does not name weigh 1.
    weight = np.random.default_rng(2).uniform(0.5, 2.0, len(y))
    named = JaxGBTClassifier(class_weight={">50K": 3.0}, **SMALL).fit(X, y, sample_weight=weight)
    by_rows = JaxGBTClassifier(**SMALL).fit(X, y, sample_weight=weight * np.where(
        y == ">50K", 3.0, 1.0))
    np.testing.assert_array_equal(named.predict_proba(X_test), by_rows.predict_proba(X_test))
    # Weighing the rarer class up trades precision for its recall on held-out rows.
    plain = JaxGBTClassifier(**SMALL).fit(X, y)
    rich = y_test == ">50K"
    recall = {name: (model.predict(X_test)[rich] == ">50K").mean()
              for name, model in (("plain", plain), ("balanced", balanced))}
    assert recall["balanced"] > recall["plain"] + 0.15, recall
    assert (balanced.predict(X_test) == ">50K").mean() > (plain.predict(X_test) == ">50K").mean()


@pytest.mark.parametrize("class_weight, match", [
    ({"maybe": 2.0}, r"class_weight names labels \['maybe'\] that y does not hold"),
    ({">50K": -1.0}, "each must be a finite number >= 0"),
    ("auto", "pass None, 'balanced' or a dict"),
], ids=["unknown label", "negative weight", "unknown value"])
def test_a_bad_class_weight_is_refused_before_fitting(adult_numeric, class_weight, match):
    X, y, _, _ = adult_numeric
    model = JaxGBTClassifier(class_weight=class_weight, **SMALL)
    with pytest.raises(ValueError, match=match):
        model.fit(X, y)
    assert not hasattr(model, "booster_")


def test_class_weight_names_of_other_libraries_are_answered():
    with pytest.raises(TypeError, match=r"'auto_class_weights' \(jaxgbt calls it class_weight"):
        JaxGBTClassifier(auto_class_weights="Balanced")
    with pytest.raises(ValueError, match=r"'scale_pos_weight' \(jaxgbt calls it class_weight"):
        JaxGBTClassifier().set_params(scale_pos_weight=3.0)
    with pytest.raises(TypeError, match=r"'class_weight' \(jaxgbt calls it sample_weight, "
                                        r"one weight per row; JaxGBTClassifier takes"):
        jaxgbt.fit("logistic", np.zeros((4, 1)), np.array([0.0, 1.0, 0.0, 1.0]),
                   class_weight="balanced")
    assert clone(JaxGBTClassifier(class_weight="balanced")).class_weight == "balanced"


# -- validation sets, pickle, ranking ---------------------------------------------------


def test_eval_set_early_stopping_and_pickle(binary):
    X, y = binary
    labels = np.array(["no", "yes"])
    model = JaxGBTClassifier(n_trees=64, depth=3, n_bins=16, learning_rate=0.5)
    model.fit(X[:150], labels[y[:150]], eval_set=[(X[150:], labels[y[150:]])],
              early_stopping_rounds=5)
    assert model.best_iteration_ is not None and model.best_iteration_ < 63
    assert list(model.evals_result_) == ["valid_0"]
    losses = model.evals_result_["valid_0"]["logloss"]
    assert losses.argmin() == model.best_iteration_
    loaded = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(ValueError, match="eval_set holds labels"):
        model.fit(X, labels[y], eval_set=[(X, np.full(200, "maybe"))])


def test_predictions_of_the_first_trees(binary):
    X, y = binary
    labels = np.array(["no", "yes"])
    model = JaxGBTClassifier(**SMALL).fit(X, labels[y])
    first = model.booster_.first_trees(3)
    np.testing.assert_array_equal(model.predict_proba(X, n_trees=3)[:, 1], first.predict(X))
    np.testing.assert_array_equal(model.decision_function(X, n_trees=3), first.predict_raw(X))
    np.testing.assert_array_equal(model.predict(X, n_trees=3),
                                  labels[(np.asarray(first.predict(X)) > 0.5).astype(int)])
    assert not np.array_equal(model.predict_proba(X), model.predict_proba(X, n_trees=3))
    with pytest.raises(TypeError, match=r"'num_iteration' \(jaxgbt calls it n_trees"):
        model.predict_proba(X, num_iteration=3)
    with pytest.raises(TypeError, match=r"'raw_score' \(booster_.predict_raw\(X\) gives"):
        JaxGBTRegressor(**SMALL).fit(X, y).predict(X, raw_score=True)


def test_several_targets_are_one_multi_output_model(binary):
    X, y = binary
    Y = np.column_stack([y, np.nan_to_num(X[:, 1]) ** 2])
    model = JaxGBTRegressor(learning_rate=0.5, **SMALL).fit(X, Y)
    assert model.booster_.objective.name == "multi_squared_error"
    prediction = model.predict(X)
    assert prediction.shape == (200, 2)
    np.testing.assert_array_equal(prediction, jaxgbt.fit(
        "multi_squared_error", X, Y, learning_rate=0.5, **SMALL).predict(X))
    assert model.score(X, Y) > 0.6  # R2 averaged over the two targets
    # A loss function is given one margin per target.
    import jax.numpy as jnp

    custom = JaxGBTRegressor(loss=lambda t, f: 0.5 * jnp.sum((t - f) ** 2), learning_rate=0.5,
                             **SMALL).fit(X, Y)
    np.testing.assert_allclose(custom.predict(X), prediction, atol=1e-5)


def test_eval_fraction_holds_out_a_validation_set_and_stops_early(binary):
    # The rows held out are drawn class by class from the seed; the fit is then the one
    # with those rows as its eval_set and early stopping after 50 rounds.
    from sklearn.model_selection import train_test_split

    X, y = binary
    settings = dict(n_trees=96, depth=3, n_bins=16, learning_rate=0.5, seed=3)
    model = JaxGBTClassifier(eval_fraction=0.25, **settings).fit(X, y)
    kept, held = (np.sort(part) for part in train_test_split(
        np.arange(200), test_size=0.25, random_state=3, stratify=y))
    explicit = JaxGBTClassifier(**settings).fit(X[kept], y[kept],
                                                eval_set=[(X[held], y[held])],
                                                early_stopping_rounds=50)
    assert model.best_iteration_ == explicit.best_iteration_ < 95
    np.testing.assert_array_equal(model.predict_proba(X), explicit.predict_proba(X))
    assert len(model.evals_result_["valid_0"]["logloss"]) == model.booster_.n_trees


def test_eval_fraction_holds_out_whole_queries(binary):
    from sklearn.model_selection import train_test_split

    X, y = binary
    group = np.repeat(np.arange(20), 10)
    settings = dict(n_trees=16, depth=3, n_bins=16)
    model = JaxGBTRanker(eval_fraction=0.3, **settings).fit(X, y, group=group)
    _, held_queries = train_test_split(np.arange(20), test_size=0.3, random_state=0)
    held = np.isin(group, held_queries)
    explicit = JaxGBTRanker(**settings).fit(X[~held], y[~held], group=group[~held],
                                            eval_set=[(X[held], y[held])],
                                            eval_group=[group[held]],
                                            early_stopping_rounds=50)
    np.testing.assert_array_equal(model.predict(X), explicit.predict(X))
    np.testing.assert_array_equal(model.evals_result_["valid_0"]["ndcg@10"],
                                  explicit.evals_result_["valid_0"]["ndcg@10"])


def test_a_bad_eval_fraction_is_refused_before_fitting(binary):
    X, y = binary
    for fraction in (0.0, 1.5, "0.2", True):
        with pytest.raises(ValueError, match="must be a number strictly between 0 and 1"):
            JaxGBTRegressor(eval_fraction=fraction, **SMALL).fit(X, y)
    with pytest.raises(ValueError, match="eval_set and eval_fraction were both given"):
        JaxGBTRegressor(eval_fraction=0.2, **SMALL).fit(X, y, eval_set=[(X, y)])
    with pytest.raises(TypeError, match=r"'validation_fraction' \(jaxgbt calls it eval_fraction"):
        JaxGBTRegressor(validation_fraction=0.1)


def test_init_model_continues_a_fitted_estimator(binary):
    X, y = binary
    first = JaxGBTRegressor(**SMALL).fit(X, y)
    more = JaxGBTRegressor(**SMALL).fit(X, y, init_model=first)
    assert more.booster_.n_trees == 2 * SMALL["n_trees"]


def test_ranker_with_queries(binary):
    X, _ = binary
    rng = np.random.default_rng(2)
    relevance = np.clip(np.round(np.nan_to_num(X[:, 0]) + 1 + 0.3 * rng.normal(size=200)),
                        0, 3)
    group = np.repeat(np.arange(20), 10)
    ranker = JaxGBTRanker(**SMALL).fit(X, relevance, group=group,
                                       eval_set=[(X, relevance)], eval_group=[group])
    assert ranker.booster_.objective.name == "lambdarank_ndcg"
    assert ranker.predict(X).shape == (200,)
    assert ranker.score(X, relevance, group=group) > 0.9
    assert list(ranker.evals_result_["valid_0"]) == ["ndcg@10"]
    with pytest.raises(ValueError, match="contiguous"):
        JaxGBTRanker(**SMALL).fit(X, relevance, group=np.tile(np.arange(20), 10))


def test_jaxgbt_imports_without_sklearn():
    code = ("import sys; sys.modules['sklearn'] = None\n"
            "import jaxgbt\n"
            "try:\n    jaxgbt.JaxGBTRegressor\nexcept ImportError as error:\n"
            "    print(error)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert "pip install 'jaxgbt[sklearn]'" in out.stdout


# -- real data --------------------------------------------------------------------------


def test_cross_val_score_over_a_pipeline(binary):
    X, y = binary
    labels = np.array(["no", "yes"])[y]
    scores = cross_val_score(make_pipeline(StandardScaler(), JaxGBTClassifier(**SMALL)),
                             X, labels, cv=2)
    assert scores.shape == (2,) and scores.min() > 0.7


@pytest.mark.slow
def test_grid_search_over_a_pipeline_on_adult():
    pd = pytest.importorskip("pandas")
    path = SHARED_DATA / "adult" / "adult_train.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared data sits beside the repository)")
    from sklearn.compose import make_column_transformer

    frame = pd.read_csv(path).sample(n=3000, random_state=0)
    y = frame.pop("income")  # "<=50K" / ">50K"
    text = frame.select_dtypes(exclude="number").columns
    frame[text] = frame[text].astype("category")  # with NaN where the field was empty
    numeric = frame.columns.difference(text)
    scale = make_column_transformer((StandardScaler(), numeric), remainder="passthrough",
                                    verbose_feature_names_out=False)
    pipeline = make_pipeline(scale.set_output(transform="pandas"),
                             JaxGBTClassifier(n_trees=30, n_bins=32))
    search = GridSearchCV(pipeline, {"jaxgbtclassifier__depth": [3, 4]}, cv=2)
    search.fit(frame, y)
    model = search.best_estimator_[-1]
    assert model.classes_.tolist() == ["<=50K", ">50K"]
    assert model.booster_.encoder is not None  # the category columns were encoded
    assert set(model.feature_names_in_) == set(frame.columns)
    assert search.best_score_ > 0.82
