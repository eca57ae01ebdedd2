"""DataFrames of pandas, polars and pyarrow as X and y (``jaxgbt.data.frames``), and the
checks of labels: columns, nulls, categorical dtypes and class labels."""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, assert_same_model, make_regression

import jaxgbt
from jaxgbt import objectives
from jaxgbt.data import frames
from jaxgbt.data.validation import takes_scalar_labels

pd = pytest.importorskip("pandas")

NAMES = ["a", "b", "c", "d"]
CITIES = ["berlin", "lima", "oslo"]
LIBRARIES = ["pandas", "polars", "pyarrow", "recordbatch"]


def make_frame(library: str, columns: dict):
    """A DataFrame of ``library`` from {name: NumPy array or list}."""
    if library == "pandas":
        return pd.DataFrame(columns)
    if library == "polars":
        pl = pytest.importorskip("polars")
        return pl.DataFrame(columns)
    pa = pytest.importorskip("pyarrow")
    arrays = {name: pa.array(values) for name, values in columns.items()}
    return pa.table(arrays) if library == "pyarrow" else pa.record_batch(arrays)


def categorical_column(library: str, labels: list):
    """Labels (None missing) as the library's categorical column type."""
    if library == "pandas":
        return pd.Categorical(labels)
    if library == "polars":
        pl = pytest.importorskip("polars")
        return pl.Series(labels, dtype=pl.Categorical)
    pa = pytest.importorskip("pyarrow")
    return pa.array(labels).dictionary_encode()


def with_column(library: str, frame, name: str, column):
    if library == "pandas":
        return frame.assign(**{name: column})
    if library == "polars":
        return frame.with_columns(**{name: column})
    return frame.append_column(name, column) if library == "pyarrow" else \
        frame.add_column(frame.num_columns, name, column)


@pytest.fixture(scope="module")
def data():
    return make_regression()


@pytest.fixture(scope="module")
def array_model(data):
    X, y = data
    return jaxgbt.fit("squared_error", X, y, feature_names=NAMES, **SMALL)


@pytest.fixture(scope="module")
def city_data():
    """A numeric column and a categorical one whose labels carry the signal."""
    X, _ = make_regression(seed=3)
    rng = np.random.default_rng(3)
    code = rng.integers(0, len(CITIES), X.shape[0])
    labels = [CITIES[c] for c in code]
    labels[:5] = [None] * 5  # missing cities: a category of their own
    code = np.where(np.arange(code.size) < 5, np.nan, code).astype(np.float32)
    y = (X[:, 0] + 2.0 * np.nan_to_num(code, nan=3.0)).astype(np.float32)
    return X[:, 0], labels, code, y


@pytest.fixture(scope="module")
def city_model(city_data):
    x, labels, _, y = city_data
    frame = pd.DataFrame({"x": x, "city": pd.Categorical(labels)})
    return jaxgbt.fit("squared_error", frame, y, **SMALL)


# Reading X ---------------------------------------------------------------------------------


@pytest.mark.parametrize("library", LIBRARIES)
def test_a_frame_fits_and_predicts_as_its_array(library, data, array_model):
    X, y = data
    frame = make_frame(library, dict(zip(NAMES, X.T, strict=True)))
    model = jaxgbt.fit("squared_error", frame, y, **SMALL)
    assert model.feature_names == tuple(NAMES)
    assert_same_model(model, array_model)
    expected = np.asarray(array_model.predict(X))
    np.testing.assert_array_equal(np.asarray(model.predict(frame)), expected)
    np.testing.assert_array_equal(np.asarray(model.leaf_index(frame)),
                                  np.asarray(array_model.leaf_index(X)))


@pytest.mark.parametrize("library", LIBRARIES)
def test_columns_are_matched_by_name_after_save_and_load(library, data, array_model,
                                                         tmp_path):
    X, _ = data
    expected = np.asarray(array_model.predict(X))
    reordered = make_frame(library, {name: X[:, NAMES.index(name)] for name in NAMES[::-1]})
    np.testing.assert_array_equal(np.asarray(array_model.predict(reordered)), expected)
    array_model.save(tmp_path / "model.jgbt")
    loaded = jaxgbt.load(tmp_path / "model.jgbt")
    np.testing.assert_array_equal(np.asarray(loaded.predict(reordered)), expected)
    renamed = make_frame(library, {("A" if n == "a" else n): X[:, j]
                                   for j, n in enumerate(NAMES)})
    with pytest.raises(ValueError, match=r"missing columns \['a'\]; unknown columns \['A'\]"):
        loaded.predict(renamed)
    missing = make_frame(library, {n: X[:, j] for j, n in enumerate(NAMES) if n != "c"})
    with pytest.raises(ValueError, match=r"missing columns \['c'\]"):
        loaded.predict(missing)


@pytest.mark.parametrize("library", ["pandas", "polars", "pyarrow"])
def test_nullable_integers_and_booleans_with_nulls_are_missing(library, data):
    X, y = data
    ints = np.round(X[:, 0] * 3)
    flags = X[:, 1] > 0
    nulls = np.arange(ints.size) % 7 == 0
    as_floats = np.c_[np.where(nulls, np.nan, ints), np.where(nulls, np.nan, flags),
                      X[:, 2:]].astype(np.float32)
    int_list = [None if n else int(v) for v, n in zip(ints, nulls, strict=True)]
    flag_list = [None if n else bool(v) for v, n in zip(flags, nulls, strict=True)]
    if library == "pandas":
        columns = {"a": pd.array(int_list, dtype="Int64"),
                   "b": pd.array(flag_list, dtype="boolean")}
    else:
        columns = {"a": int_list, "b": flag_list}
    frame = make_frame(library, {**columns, "c": X[:, 2], "d": X[:, 3]})
    np.testing.assert_array_equal(frames.read(frame).numbers(), as_floats)
    model = jaxgbt.fit("squared_error", frame, y, **SMALL)
    assert_same_model(model, jaxgbt.fit("squared_error", as_floats, y, **SMALL))
    np.testing.assert_array_equal(np.asarray(model.predict(frame)),
                                  np.asarray(model.predict(as_floats)))


def test_the_table_of_each_library():
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    expected_kinds = (frames.NUMBERS, frames.CATEGORY, frames.LABELS, frames.NUMBERS)
    for frame in (
            pd.DataFrame({"n": [1.5, np.nan, 2.0], "k": pd.Categorical(["x", None, "y"]),
                          "s": ["u", None, "w"], "i": pd.array([1, None, 2], "Int64")}),
            pl.DataFrame({"n": [1.5, None, 2.0],
                          "k": pl.Series(["x", None, "y"], dtype=pl.Categorical),
                          "s": ["u", None, "w"], "i": [1, None, 2]}),
            pa.table({"n": [1.5, None, 2.0],
                      "k": pa.array(["x", None, "y"]).dictionary_encode(),
                      "s": ["u", None, "w"], "i": [1, None, 2]})):
        table = frames.read(frame)
        assert table.names == ("n", "k", "s", "i")
        assert table.kinds == expected_kinds
        np.testing.assert_array_equal(table.values[:, [0, 3]], [[1.5, 1], [np.nan] * 2, [2, 2]])
        # An Arrow dictionary's null must not take the label its index points at.
        assert table.labels[1].tolist() == ["x", None, "y"]
        assert table.labels[2].tolist() == ["u", None, "w"]
    enum = pl.DataFrame({"e": pl.Series(["b", "a"], dtype=pl.Enum(["b", "a"]))})
    assert frames.read(enum).kinds == (frames.CATEGORY,)


def test_frames_that_cannot_be_read_raise():
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    X, y = make_regression()
    with pytest.raises(TypeError, match="lazy frame.*collect"):
        jaxgbt.fit("squared_error", pl.LazyFrame({"a": X[:, 0], "b": X[:, 1]}), y, **SMALL)
    repeated = pa.table([X[:, 0], X[:, 1]], names=["a", "a"])
    with pytest.raises(ValueError, match=r"repeated column names \['a'\]"):
        jaxgbt.fit("squared_error", repeated, y, **SMALL)
    with pytest.raises(TypeError, match=r"the columns \['s'\] do not. Declare them"):
        jaxgbt.fit("squared_error", pl.DataFrame({"x": X[:, 0], "s": ["u"] * X.shape[0]}), y,
                   **SMALL)


# Categorical columns -----------------------------------------------------------------------


@pytest.mark.parametrize("library", LIBRARIES)
def test_categorical_columns_of_each_library_give_the_pandas_model(library, city_data,
                                                                   city_model):
    x, labels, code, y = city_data
    frame = with_column(library, make_frame(library, {"x": x}), "city",
                        categorical_column(library, labels))
    model = jaxgbt.fit("squared_error", frame, y, **SMALL)
    assert model.encoder.labels == city_model.encoder.labels == (None, tuple(CITIES))
    assert_same_model(model, city_model)
    reference = pd.DataFrame({"x": x, "city": pd.Categorical(labels)})
    expected = np.asarray(city_model.predict(reference))
    np.testing.assert_array_equal(np.asarray(model.predict(frame)), expected)
    # Any library's frame, columns in any order, predicts with either model.
    np.testing.assert_array_equal(np.asarray(city_model.predict(frame)), expected)
    if library in ("pandas", "polars"):
        np.testing.assert_array_equal(np.asarray(model.predict(frame[["city", "x"]])), expected)
    # Integer codes declared by index are the same model: codes 0..C-1 in label order.
    by_code = jaxgbt.fit("squared_error", np.c_[x, code], y, categorical_features=[1], **SMALL)
    assert_same_model(by_code, city_model)


@pytest.mark.parametrize("library", ["pandas", "polars", "pyarrow"])
def test_string_columns_are_categorical_when_declared(library, city_data, city_model):
    x, labels, _, y = city_data
    frame = make_frame(library, {"x": x, "city": labels})
    assert frames.read(frame).kinds == (frames.NUMBERS, frames.LABELS)
    with pytest.raises(TypeError, match=r"columns \['city'\] do not. Declare them"):
        jaxgbt.fit("squared_error", frame, y, **SMALL)
    model = jaxgbt.fit("squared_error", frame, y, categorical_features=["city"], **SMALL)
    assert_same_model(model, city_model)


def test_polars_enum_and_an_unseen_label(city_data, city_model):
    pl = pytest.importorskip("polars")
    x, labels, _, y = city_data
    enum = pl.Enum(CITIES[::-1] + ["quito"])  # its own order; labels are sorted anyway
    frame = pl.DataFrame({"x": x, "city": pl.Series(labels, dtype=enum)})
    model = jaxgbt.fit("squared_error", frame, y, **SMALL)
    assert_same_model(model, city_model)
    unseen = frame.head(4).with_columns(city=pl.Series(["quito"] * 4, dtype=enum))
    assert np.isfinite(np.asarray(model.predict(unseen))).all()


@pytest.fixture(scope="module")
def polars_cities(city_data):
    pl = pytest.importorskip("polars")
    x, labels, _, y = city_data
    return pl.DataFrame({"x": x, "city": pl.Series(labels, dtype=pl.Categorical)}), y


def test_fit_many_takes_categorical_frames(polars_cities, city_model):
    frame, y = polars_cities
    # 3 is l2's default here: 256 rows with a column of target statistics (CatBoost's
    # regime, jaxgbt.spec.search_defaults), as city_model was fitted.
    models = jaxgbt.fit_many("squared_error", frame, y, params={"l2": [3.0, 10.0]}, **SMALL)
    assert models.feature_names == ("x", "city")
    np.testing.assert_allclose(np.asarray(models[0].predict(frame)),
                               np.asarray(city_model.predict(frame)), rtol=1e-5, atol=1e-5)


def test_cv_takes_categorical_frames(polars_cities):
    frame, y = polars_cities
    result = jaxgbt.cv("squared_error", frame, y, n_folds=2, **SMALL)
    assert np.isfinite(result.best_score)


def test_forests_take_categorical_frames(polars_cities):
    frame, y = polars_cities
    forest = jaxgbt.fit_forest(frame, y, n_trees=2, depth=2, n_bins=16)
    assert forest.model.encoder.labels[1] == tuple(CITIES)
    assert np.isfinite(forest.oob_score)
    np.testing.assert_array_equal(np.asarray(forest.model.predict(frame)),
                                  np.asarray(forest.model.predict(frame.to_pandas())))


# Labels ------------------------------------------------------------------------------------


def test_a_label_column_is_read_as_labels(data, array_model):
    pl = pytest.importorskip("polars")
    pa = pytest.importorskip("pyarrow")
    X, y = data
    for column in (y[:, None], pd.DataFrame({"y": y}), pl.DataFrame({"y": y}), pd.Series(y),
                   pl.Series(y), pa.chunked_array([y])):
        assert_same_model(jaxgbt.fit("squared_error", X, column, feature_names=NAMES, **SMALL),
                          array_model)


def test_which_losses_take_scalar_labels():
    assert takes_scalar_labels(objectives.squared_error, None, "row")
    assert takes_scalar_labels(objectives.softmax, None, "row")
    assert not takes_scalar_labels(objectives.multi_squared_error, None, "row")
    per_row = objectives.resolve(lambda y, f: (y - f) ** 2)
    reads_its_column = objectives.resolve(lambda y, f: (y[0] - f) ** 2)
    assert takes_scalar_labels(per_row, None, "row")
    assert not takes_scalar_labels(reads_its_column, None, "row")
    assert not takes_scalar_labels(per_row, 3, "row")


@pytest.mark.parametrize("labels, found", [
    ([1, 2, 3], r"\[1, 2, 3\] \(3 distinct\)"),
    ([0, 1, 3], r"\[0, 1, 3\]"),
    ([0, 0.5, 1], r"\[0, 0.5, 1\]"),
    ([0, 1, -1], r"\[-1, 0, 1\]"),
])
def test_class_labels_must_be_0_to_k_minus_1(labels, found):
    X, _ = make_regression()
    y = np.resize(np.asarray(labels, np.float32), X.shape[0])
    with pytest.raises(ValueError, match=f"y holds the labels {found}.*np.unique"):
        jaxgbt.fit("softmax", X, y, **SMALL)


def test_string_labels_and_eval_set_classes_raise():
    pl = pytest.importorskip("polars")
    X, _ = make_regression()
    words = np.resize(np.array(["cat", "dog"]), X.shape[0])
    for y in (words, words.astype(object), pd.Series(words), pl.Series(words),
              pd.Series(pd.Categorical(words)), pd.DataFrame({"y": words})):
        with pytest.raises(TypeError, match=r"y must hold numbers; it holds strings such as "
                                            r"\['cat'.*return_inverse"):
            jaxgbt.fit("logistic", X, y, **SMALL)
    y = np.resize(np.arange(3, dtype=np.float32), X.shape[0])
    with pytest.raises(ValueError, match=r"eval_set\[0\] y holds the labels \[0, 3\].*among "
                                         r"the model's 0, 1, ..., 2"):
        jaxgbt.fit("softmax", X, y, eval_set=[(X[:4], np.array([0, 3, 0, 3]))], **SMALL)


def test_a_column_of_labels_in_cv_and_eval_sets(data):
    X, y = data
    column = y[:, None]
    model = jaxgbt.fit("squared_error", X, y, eval_set=[(X, pd.DataFrame({"y": y}))], **SMALL)
    assert np.isfinite(np.asarray(model.history["valid_0:rmse"])).all()
    binary = (column > 0).astype(np.float32)
    result = jaxgbt.cv("logistic", X, binary, n_folds=2, **SMALL)
    assert np.isfinite(result.best_score)
    assert jnp.isfinite(jaxgbt.fit("multi_squared_error", X, column, **SMALL).predict(X)).all()
