"""A Booster keeps its column names, and predict matches a DataFrame's columns by name."""

import json
import zipfile

import jax
import numpy as np
import pytest
from conftest import SMALL, assert_same_model, make_regression

import jaxgbt
from jaxgbt.io import ModelFormatError

pd = pytest.importorskip("pandas")

NAMES = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def data():
    X, y = make_regression()
    frame = pd.DataFrame(X, columns=NAMES)
    return frame, y


@pytest.fixture(scope="module")
def model(data):
    frame, y = data
    return jaxgbt.fit("squared_error", frame, y, **SMALL)


def test_names_from_a_data_frame(model):
    assert model.feature_names == tuple(NAMES)
    assert jax.tree.leaves(model)  # names are static: not among the leaves
    assert all(not isinstance(leaf, str) for leaf in jax.tree.leaves(model))


def test_names_from_the_argument_and_none_for_arrays(data):
    frame, y = data
    X = frame.to_numpy()
    named = jaxgbt.fit("squared_error", X, y, feature_names=NAMES, **SMALL)
    assert named.feature_names == tuple(NAMES)
    assert jaxgbt.fit("squared_error", X, y, **SMALL).feature_names is None


def test_names_differing_from_the_columns_raise(data):
    frame, y = data
    with pytest.raises(ValueError, match="differs from X's columns"):
        jaxgbt.fit("squared_error", frame, y, feature_names=NAMES[::-1], **SMALL)
    with pytest.raises(ValueError, match="has 2 names but X has 4"):
        jaxgbt.fit("squared_error", frame.to_numpy(), y, feature_names=["a", "b"], **SMALL)
    with pytest.raises(ValueError, match="repeats"):
        jaxgbt.fit("squared_error", frame.to_numpy(), y, feature_names=["a"] * 4, **SMALL)
    with pytest.raises(TypeError, match="strings"):
        jaxgbt.fit("squared_error", frame.to_numpy(), y, feature_names=list(range(4)),
                   **SMALL)


def test_reordered_columns_predict_the_same(model, data):
    frame, _ = data
    expected = np.asarray(model.predict(frame))
    reordered = frame[NAMES[::-1]]
    np.testing.assert_array_equal(np.asarray(model.predict(reordered)), expected)
    np.testing.assert_array_equal(np.asarray(model.leaf_index(reordered)),
                                  np.asarray(model.leaf_index(frame)))
    np.testing.assert_array_equal(np.asarray(model.staged_predict_raw(reordered)),
                                  np.asarray(model.staged_predict_raw(frame)))
    # An array is read by position, as before.
    np.testing.assert_array_equal(np.asarray(model.predict(frame.to_numpy())), expected)


def test_missing_and_unknown_columns_raise(model, data):
    frame, _ = data
    with pytest.raises(ValueError, match=r"missing columns \['c'\]"):
        model.predict(frame.drop(columns="c"))
    with pytest.raises(ValueError, match=r"unknown columns \['z'\].*exactly the columns"):
        model.predict(frame.assign(z=1.0))
    renamed = frame.rename(columns={"a": "A"})
    with pytest.raises(ValueError, match=r"missing columns \['a'\]; unknown columns \['A'\]"):
        model.predict(renamed)


def test_names_survive_save_and_load(model, data, tmp_path):
    frame, _ = data
    path = tmp_path / "model.jaxgbt"
    model.save(path)
    loaded = jaxgbt.load(path)
    assert loaded.feature_names == tuple(NAMES)
    np.testing.assert_array_equal(np.asarray(loaded.predict(frame[NAMES[::-1]])),
                                  np.asarray(model.predict(frame)))


def _rewrite_header(source, target, change):
    with zipfile.ZipFile(source) as archive, zipfile.ZipFile(target, "w") as out:
        for info in archive.infolist():
            content = archive.read(info)
            if info.filename == "header.json":
                header = json.loads(content)
                change(header)
                content = json.dumps(header).encode()
            out.writestr(info.filename, content)


def test_files_without_names_load_with_none_and_bad_names_fail(model, tmp_path):
    path = tmp_path / "model.jaxgbt"
    model.save(path)
    old = tmp_path / "old.jaxgbt"
    _rewrite_header(path, old, lambda header: header.pop("feature_names"))
    assert jaxgbt.load(old).feature_names is None
    for bad in (["a"] * 4, ["a", "b"], [1, 2, 3, 4], "abcd"):
        broken = tmp_path / "broken.jaxgbt"
        _rewrite_header(path, broken, lambda header, bad=bad: header.update(feature_names=bad))
        with pytest.raises(ModelFormatError, match="feature_names"):
            jaxgbt.load(broken)


def test_categorical_frame_predicts_the_same_on_reordered_columns():
    X, y = make_regression()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1],
                          "colour": pd.Categorical(rng.choice(["red", "green", "blue"],
                                                              X.shape[0]))})
    model = jaxgbt.fit("squared_error", frame, y, **SMALL)
    assert model.encoder is not None and model.feature_names == ("x0", "x1", "colour")
    np.testing.assert_array_equal(np.asarray(model.predict(frame[["colour", "x1", "x0"]])),
                                  np.asarray(model.predict(frame)))


def test_fit_many_members_carry_the_names(data):
    frame, y = data
    models = jaxgbt.fit_many("squared_error", frame, y, params={"l2": [1.0, 10.0]}, **SMALL)
    assert models.feature_names == tuple(NAMES)
    assert models[1].feature_names == tuple(NAMES)
    single = jaxgbt.fit("squared_error", frame, y, l2=10.0, **SMALL)
    np.testing.assert_allclose(np.asarray(models[1].predict(frame[NAMES[::-1]])),
                               np.asarray(single.predict(frame)), rtol=1e-5, atol=1e-6)


def test_a_model_from_one_library_reads_the_frames_of_another(model, data):
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    frame, y = data
    expected = np.asarray(model.predict(frame))
    from_polars = jaxgbt.fit("squared_error", pl.from_pandas(frame), y, **SMALL)
    assert from_polars.feature_names == tuple(NAMES)
    for other in (pl.from_pandas(frame[NAMES[::-1]]), pa.Table.from_pandas(frame[NAMES[::-1]])):
        np.testing.assert_array_equal(np.asarray(model.predict(other)), expected)
        np.testing.assert_array_equal(np.asarray(from_polars.predict(other)), expected)
    with pytest.raises(ValueError, match=r"unknown columns \['z'\]"):
        model.predict(pa.Table.from_pandas(frame.assign(z=1.0)))


def test_eval_set_columns_are_matched_by_name(model, data):
    frame, y = data
    plain = jaxgbt.fit("squared_error", frame, y, eval_set=[(frame, y)], **SMALL)
    reordered = jaxgbt.fit("squared_error", frame, y, eval_set=[(frame[NAMES[::-1]], y)],
                           **SMALL)
    np.testing.assert_array_equal(np.asarray(reordered.history["valid_0:rmse"]),
                                  np.asarray(plain.history["valid_0:rmse"]))
    with pytest.raises(ValueError, match=r"eval_set\[0\] X's columns .*missing columns \['d'\]"):
        jaxgbt.fit("squared_error", frame, y, eval_set=[(frame[NAMES[:3]], y)], **SMALL)


def test_warm_start_reads_the_columns_in_the_model_order(model, data):
    frame, y = data
    expected = jaxgbt.fit("squared_error", frame, y, init_model=model, **SMALL)
    reordered = jaxgbt.fit("squared_error", frame[NAMES[::-1]], y, init_model=model, **SMALL)
    assert reordered.feature_names == tuple(NAMES)
    assert_same_model(reordered, expected)
    # An array continues by position and keeps the model's names.
    assert jaxgbt.fit("squared_error", frame.to_numpy(), y, init_model=model,
                      **SMALL).feature_names == tuple(NAMES)
    with pytest.raises(ValueError, match="init_model was trained on the columns"):
        jaxgbt.fit("squared_error", frame.to_numpy(), y, init_model=model,
                   feature_names=NAMES[::-1], **SMALL)


def test_constraints_by_column_name_are_those_by_index(data):
    # XGBoost and scikit-learn take constraints by column name: the same model as by index.
    frame, y = data
    by_name = jaxgbt.fit("squared_error", frame, y, monotone_constraints={"b": 1, "d": -1},
                         interaction_constraints=[["b", "d"], ["a", "c"]], **SMALL)
    by_index = jaxgbt.fit("squared_error", frame, y, monotone_constraints={1: 1, 3: -1},
                          interaction_constraints=[[1, 3], [0, 2]], **SMALL)
    assert_same_model(by_name, by_index)
    with pytest.raises(ValueError, match=r"monotone_constraints names 'e', which is not a "
                                         r"column of X; its columns are \['a', 'b', 'c', 'd'\]"):
        jaxgbt.fit("squared_error", frame, y, monotone_constraints={"e": 1}, **SMALL)
    with pytest.raises(ValueError, match=r"interaction_constraints names the column 'a', but "
                                         r"X has no column names"):
        jaxgbt.fit("squared_error", frame.to_numpy(), y, interaction_constraints=[["a", 1]],
                   **SMALL)
