"""Rows given in chunks (``jaxgbt.ChunkedData``): the same model as the rows in memory,
Parquet files, weights, the column summaries' accuracy, and clear errors."""

import os

import numpy as np
import pytest
from conftest import N_ROWS, SMALL, make_regression

import jaxgbt
from jaxgbt.data import chunks

ARRAYS = ("feature", "threshold", "default_left", "leaf_value", "base_score")


@pytest.fixture(scope="module")
def rows():
    X, y = make_regression(3)
    X[::9, 1] = np.nan  # missing values go to their own bin either way
    X[:, 3] = np.round(X[:, 3])  # a few-valued column
    weight = np.random.default_rng(1).uniform(0, 2, N_ROWS).astype(np.float32)
    return X, y, weight


def chunked(X, y, weight=None, n_chunks=7, **kwargs):
    parts = np.array_split(np.arange(X.shape[0]), n_chunks)
    return jaxgbt.ChunkedData(
        lambda: [(X[p], y[p]) + (() if weight is None else (weight[p],)) for p in parts],
        **kwargs)


def assert_same_model(a, b):
    for name in ARRAYS:
        np.testing.assert_array_equal(np.asarray(getattr(a, name)),
                                      np.asarray(getattr(b, name)), err_msg=name)


@pytest.fixture(scope="module")
def in_memory(rows):
    X, y, _ = rows
    return jaxgbt.fit("squared_error", X, y, **SMALL)


@pytest.mark.parametrize("n_chunks", [1, 7])
def test_chunks_give_the_in_memory_model_bit_for_bit(rows, in_memory, n_chunks):
    X, y, _ = rows
    model = jaxgbt.fit("squared_error", chunked(X, y, n_chunks=n_chunks), None, **SMALL)
    assert_same_model(model, in_memory)


def test_weighted_chunks_give_the_weighted_model(rows):
    X, y, weight = rows
    expected = jaxgbt.fit("squared_error", X, y, sample_weight=weight, **SMALL)
    model = jaxgbt.fit("squared_error", chunked(X, y, weight), None, **SMALL)
    assert_same_model(model, expected)


def test_thresholds_equal_the_in_memory_cuts(rows):
    X, y, weight = rows
    for w in (None, weight):
        read = chunks.read_chunked(chunked(X, y, w, n_chunks=5), None, sample_weight=None,
                                   group=None, categorical_features=None,
                                   objective=jaxgbt.objectives.resolve("squared_error"),
                                   kind="row")
        memory = jaxgbt.data.dataset.Dataset.read(
            X, y, sample_weight=w, group=None, categorical_features=None,
            objective=jaxgbt.objectives.resolve("squared_error"), kind="row")
        for n_bins in (4, 16, 256):
            np.testing.assert_array_equal(read.thresholds(n_bins, 0),
                                          memory.thresholds(n_bins, 0))


def test_parquet_files_row_group_by_row_group(rows, in_memory, tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    X, y, weight = rows
    names = [f"x{j}" for j in range(X.shape[1])]
    paths = []
    for i, part in enumerate(np.array_split(np.arange(N_ROWS), 3)):
        columns = {name: X[part, j] for j, name in enumerate(names)}
        table = pa.table({**columns, "target": y[part], "w": weight[part]})
        paths.append(tmp_path / f"part{i}.parquet")
        pq.write_table(table, paths[-1], row_group_size=40)
    source = jaxgbt.ChunkedData.from_parquet(paths, label="target", columns=names)
    model = jaxgbt.fit("squared_error", source, None, **SMALL)
    assert_same_model(model, in_memory)
    assert model.feature_names == tuple(names)
    weighted = jaxgbt.fit("squared_error",
                          jaxgbt.ChunkedData.from_parquet(paths, label="target", weight="w"),
                          None, **SMALL)
    assert_same_model(weighted, jaxgbt.fit("squared_error", X, y, sample_weight=weight,
                                           **SMALL))
    with pytest.raises(ValueError, match="label='nope' is not a column"):
        jaxgbt.ChunkedData.from_parquet(paths, label="nope")


def _frame(X, y, weight, rows, library):
    pd = pytest.importorskip(library)
    columns = {f"x{j}": X[rows, j] for j in range(X.shape[1])}
    return pd.DataFrame({**columns, "target": y[rows], "w": weight[rows]})


@pytest.mark.parametrize("library", ["pandas", "polars"])
def test_frames_with_their_label_column_give_the_in_memory_model(rows, in_memory, library):
    X, y, weight = rows
    parts = np.array_split(np.arange(N_ROWS), 4)
    frames = [_frame(X, y, weight, part, library) for part in parts]
    source = jaxgbt.ChunkedData.from_frames(lambda: iter(frames), label="target",
                                           columns=[f"x{j}" for j in range(X.shape[1])])
    assert_same_model(jaxgbt.fit("squared_error", source, None, **SMALL), in_memory)
    weighted = jaxgbt.ChunkedData.from_frames(lambda: iter(frames), label="target", weight="w")
    model = jaxgbt.fit("squared_error", weighted, None, **SMALL)
    assert_same_model(model, jaxgbt.fit("squared_error", X, y, sample_weight=weight, **SMALL))
    assert model.feature_names == tuple(f"x{j}" for j in range(X.shape[1]))
    assert list(frames[0].columns)[-2:] == ["target", "w"]  # the frames are left whole


def test_frames_name_the_chunk_that_lacks_a_column(rows):
    X, y, weight = rows
    good = _frame(X, y, weight, np.arange(100), "pandas")
    bad = good.drop(columns=["target"])
    source = jaxgbt.ChunkedData.from_frames(lambda: [good, bad], label="target")
    with pytest.raises(ValueError, match="label='target' is not a column of chunk 1"):
        jaxgbt.fit("squared_error", source, None, **SMALL)
    with pytest.raises(TypeError, match="must be a DataFrame"):
        jaxgbt.fit("squared_error", jaxgbt.ChunkedData.from_frames(lambda: [X], label="y"),
                   None, **SMALL)
    with pytest.raises(TypeError, match="a function returning an iterable of DataFrames"):
        jaxgbt.ChunkedData.from_frames([good], label="target")


def test_dask_partitions_one_at_a_time_give_the_in_memory_model(rows, in_memory):
    dd = pytest.importorskip("dask.dataframe")
    X, y, weight = rows
    frame = dd.from_pandas(_frame(X, y, weight, np.arange(N_ROWS), "pandas"), npartitions=3)
    names = [f"x{j}" for j in range(X.shape[1])]
    model = jaxgbt.fit("squared_error",
                       jaxgbt.ChunkedData.from_dask(frame, label="target", columns=names),
                       None, **SMALL)
    assert_same_model(model, in_memory)
    with pytest.raises(ValueError, match="weight='nope' is not a column of the Dask DataFrame"):
        jaxgbt.ChunkedData.from_dask(frame, label="target", weight="nope")
    with pytest.raises(TypeError, match="takes a dask.dataframe.DataFrame"):
        jaxgbt.ChunkedData.from_dask(X, label="target")


def test_parquet_text_column_is_refused(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "text.parquet"
    pq.write_table(pa.table({"x": ["a", "b", "c"], "y": [1.0, 2.0, 3.0]}), path)
    with pytest.raises(TypeError, match=r"non-number columns \['x'\]"):
        jaxgbt.fit("squared_error", jaxgbt.ChunkedData.from_parquet(path, label="y"), None,
                   **SMALL)


def test_cache_dir_maps_the_bins_and_leaves_nothing(rows, in_memory, tmp_path):
    X, y, _ = rows
    model = jaxgbt.fit("squared_error", chunked(X, y, cache_dir=tmp_path), None, **SMALL)
    assert_same_model(model, in_memory)
    if os.name == "posix":
        assert not list(tmp_path.iterdir())


def test_eval_set_and_early_stopping(rows):
    X, y, _ = rows
    model = jaxgbt.fit("squared_error", chunked(X, y), None, eval_set=[(X[:64], y[:64])],
                       early_stopping_rounds=3, **SMALL)
    assert "valid_0:rmse" in model.history


def test_inconsistent_widths_name_the_chunk(rows):
    X, y, _ = rows
    source = jaxgbt.ChunkedData(lambda: [(X[:50], y[:50]), (X[50:100], y[50:100]),
                                         (X[100:, :3], y[100:])])
    with pytest.raises(ValueError, match="chunk 2 X of chunks has 3 columns"):
        jaxgbt.fit("squared_error", source, None, **SMALL)


def test_nan_labels_name_the_chunk(rows):
    X, y, _ = rows
    bad = y.copy()
    bad[70] = np.nan
    with pytest.raises(ValueError, match="chunk 1 y of chunks has 1 NaN .* row 18 of the chunk"):
        jaxgbt.fit("squared_error", chunked(X, bad, n_chunks=5), None, **SMALL)


@pytest.mark.parametrize("make, match", [
    (lambda: [], "gave 0 rows in 0 chunks"),
    (lambda: [(np.zeros((0, 4), np.float32), np.zeros(0, np.float32))], "gave 0 rows"),
    (lambda: [np.zeros((3, 4))], "must be a tuple"),
    (lambda: 5, "must be a function returning an iterable"),
])
def test_bad_sources_are_refused(make, match):
    with pytest.raises((TypeError, ValueError), match=match):
        jaxgbt.fit("squared_error", jaxgbt.ChunkedData(make), None, **SMALL)


def test_arguments_that_need_rows_in_memory_are_refused(rows, in_memory):
    X, y, weight = rows
    source = chunked(X, y)
    for kwargs, match in [(dict(init_model=in_memory), "init_model"),
                          (dict(sample_weight=weight), "sample_weight"),
                          (dict(categorical_features=[0]), "categorical_features")]:
        with pytest.raises(ValueError, match=match):
            jaxgbt.fit("squared_error", source, None, **kwargs, **SMALL)
    with pytest.raises(ValueError, match="pass y=None"):
        jaxgbt.fit("squared_error", source, y, **SMALL)


def test_a_source_that_changes_between_reads_is_refused(rows):
    X, y, _ = rows
    reads = []

    def make():
        reads.append(1)
        return [(X, y)] if len(reads) == 1 else [(X[:100], y[:100])]

    with pytest.raises(ValueError, match="gave other rows when read again"):
        jaxgbt.fit("squared_error", jaxgbt.ChunkedData(make), None, **SMALL)


def test_small_columns_are_summarised_exactly():
    values = np.random.default_rng(0).integers(0, 500, 5000).astype(np.float32)
    summary = chunks.ColumnSummary(size=512)
    for part in np.array_split(values, 13):
        summary.add(chunks.summarise(part, None))
    exact = chunks.summarise(values, None)
    for got, want in zip(summary.result(), exact, strict=True):
        np.testing.assert_array_equal(got, want)


def test_large_columns_are_summarised_within_the_stated_error():
    rng = np.random.default_rng(0)
    values = rng.normal(size=200_000).astype(np.float32)
    weights = rng.uniform(0, 3, values.size)
    size = 256
    summary = chunks.ColumnSummary(size=size)
    for part in np.array_split(np.arange(values.size), 97):
        summary.add(chunks.summarise(values[part], weights[part]))
    result = summary.result()
    assert result.value.size <= 2 * size * (len(summary.levels) + 1) + 1
    order = np.argsort(values)
    below = np.cumsum(weights[order])[np.searchsorted(values[order], result.value,
                                                      side="right") - 1]
    error = np.abs(np.cumsum(result.mass) - below).max() / weights.sum()
    assert error <= (len(summary.levels) + 1) / size
    assert np.cumsum(result.count)[-1] == values.size
