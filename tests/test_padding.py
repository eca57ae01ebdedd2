"""jaxgbt.engine.padding: training rows padded to a bucket of row counts change no model,
and fits on nearby row counts share one compiled chunk."""

import numpy as np
import pytest
from conftest import assert_same_numbers, count_compilations

import jaxgbt
from jaxgbt.engine import compile as compile_module
from jaxgbt.engine import padding

N_ROWS = 203  # padded to 256


def _data(n_rows=N_ROWS, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=n_rows) > 0).astype(np.float32)
    return X, y


def test_bucket_rows_is_a_ladder_of_quarter_steps():
    assert [padding.bucket_rows(n) for n in (1, 17, 256, 257, 1000, 1025, 1100, 1300, 2000,
                                             2048)] \
        == [256, 256, 256, 320, 1024, 1280, 1280, 1536, 2048, 2048]
    for n in range(1, 5000):
        bucket = padding.bucket_rows(n)
        assert n <= bucket and (bucket <= 256 or bucket - n < bucket / 5)
    # 1,000 to 2,000 rows in steps of 100: five programs.
    assert len({padding.bucket_rows(n) for n in range(1000, 2001, 100)}) == 5


FITS = {
    "plain": dict(),
    "bernoulli rows gathered": dict(subsample=0.5),
    "ordered": dict(boosting="ordered"),
    "depthwise, weights": dict(grow_policy="depthwise", sample_weight=True),
    "poisson": dict(subsample=0.8, sampling="poisson", colsample_bylevel=0.6),
    "bayesian, random strength": dict(sampling="bayesian", random_strength=1.0),
    "mvs, weights": dict(sampling="mvs", subsample=0.5, sample_weight=True),
    "quantile, base_margin": dict(loss="quantile@0.7", base_margin=True),
    "early stopping": dict(eval_set=True, early_stopping_rounds=2),
}
FAST = ("plain", "bernoulli rows gathered", "ordered", "mvs, weights")


@pytest.mark.parametrize("name", [name if name in FAST else pytest.param(
    name, marks=pytest.mark.slow) for name in FITS])
def test_padded_fit_is_the_unpadded_one_bit_for_bit(monkeypatch, name):
    options = dict(FITS[name])
    X, y = _data()
    loss = options.pop("loss", "logistic")
    if options.pop("sample_weight", False):
        options["sample_weight"] = np.random.default_rng(1).uniform(0.5, 2.0, N_ROWS)
    if options.pop("base_margin", False):
        options["base_margin"] = np.linspace(-1, 1, N_ROWS).astype(np.float32)
    if options.pop("eval_set", False):
        options["eval_set"] = [_data(100, seed=2)]

    def fitted():
        return jaxgbt.fit(loss, X, y, n_trees=20, depth=3, learning_rate=0.5, **options)

    padded = fitted()
    monkeypatch.setattr(padding, "bucket_rows", lambda n_rows: n_rows)
    unpadded = fitted()

    for field in ("feature", "threshold", "default_left", "split_gain", "leaf_value",
                  "cover", "base_score"):
        assert_same_numbers(getattr(padded, field), getattr(unpadded, field), err_msg=field)
    assert padded.best_round == unpadded.best_round
    assert_same_numbers(padded.predict(X), unpadded.predict(X))


def test_row_counts_in_one_bucket_share_the_compiled_chunk():
    X, y = _data(230)
    before = set(compile_module._CHUNK_PROGRAMS)  # keys; a full cache drops its oldest
    for n_rows in (225, 230, 240):  # all padded to 256
        jaxgbt.fit("squared_error", X[:n_rows], y[:n_rows], n_trees=3, depth=2)
    assert len(set(compile_module._CHUNK_PROGRAMS) - before) == 1


def test_clear_caches_drops_compiled_chunks_and_fit_clears_near_the_map_limit(monkeypatch):
    X, y = _data(230)
    fit = dict(n_trees=3, depth=2, learning_rate=0.3)
    jaxgbt.fit("squared_error", X, y, **fit)
    compiled, stop = count_compilations()
    try:
        jaxgbt.fit("squared_error", X, y, **fit)
        assert "jit(_compiled_chunk)" not in compiled  # held
        jaxgbt.clear_caches()
        assert not compile_module._CHUNK_PROGRAMS
        again = jaxgbt.fit("squared_error", X, y, **fit)
        assert "jit(_compiled_chunk)" in compiled
    finally:
        stop()
    assert compile_module.memory_maps() > 0  # Linux: the count the limit applies to
    # A process past the threshold drops every program before compiling a new chunk,
    # and says so; the fit is the same.
    monkeypatch.setattr(compile_module, "MAPS_BEFORE_CLEARING", 0)
    cleared = []
    monkeypatch.setattr(compile_module, "clear_caches",
                        lambda: cleared.append(True) or jaxgbt.clear_caches())
    with pytest.warns(RuntimeWarning, match="memory maps"):
        model = jaxgbt.fit("squared_error", X, y, **dict(fit, depth=3))
    assert cleared and np.all(np.isfinite(np.asarray(model.leaf_value)))
    monkeypatch.undo()
    assert_same_numbers(jaxgbt.fit("squared_error", X, y, **fit).leaf_value, again.leaf_value)


def test_later_row_counts_in_a_bucket_compile_only_the_loss_constant():
    # The chunk, the start's check and the labels' transfer are shared within a bucket.
    # The loss's constant start is computed on the real rows (its float sums over padded
    # rows could round otherwise), one small program per row count.
    # Row counts no other test here fits (a program compiled earlier in this process
    # would not be compiled again).
    X, y = _data(251)
    jaxgbt.fit("squared_error", X[:243], y[:243], n_trees=3, depth=2)
    compiled, stop = count_compilations()
    try:
        for n_rows in (247, 251):  # the bucket of 256 rows, as 243
            jaxgbt.fit("squared_error", X[:n_rows], y[:n_rows], n_trees=3, depth=2)
    finally:
        stop()
    assert len(compiled) <= 2 and all("_initial_margin" in name or name == "?"
                                      for name in compiled), compiled


def test_goss_group_losses_meshes_and_large_fits_keep_their_rows():
    X, y = _data()
    from jaxgbt.core.config import BoostConfig
    from jaxgbt.core.round import TrainData
    data = TrainData(bins=None, y=y, weight=np.ones(N_ROWS, np.float32))
    plain = BoostConfig(loss=None, depth=2, n_bins=8)
    assert padding.padded_row_count(plain, data, None, None) == 256
    for config in (BoostConfig(loss=None, depth=2, n_bins=8, row_sampling="goss"),
                   BoostConfig(loss=None, depth=2, n_bins=8, grouped=True)):
        assert padding.padded_row_count(config, data, None, None) == N_ROWS
    assert padding.padded_row_count(plain, data, None, mesh="a mesh") == N_ROWS
    large = TrainData(bins=None, y=None, weight=np.ones(padding.MAX_PADDED_ROWS + 1))
    assert padding.padded_row_count(plain, large, None, None) == padding.MAX_PADDED_ROWS + 1


def test_sparse_data_of_one_shape_shares_the_compiled_chunk():
    # 0/1 columns summed from their entries: the entries, counted from the data, are
    # padded to a bucket as the rows are, so two fits of one shape with 590 and 610
    # values other than 0 run one program (each count compiled its own before) and
    # each model is the one of its count unpadded.
    from jaxgbt.data import binning

    def data(n_ones, seed):
        rng = np.random.default_rng(seed)
        X = np.zeros(300 * 24, np.float32)
        X[rng.choice(X.size, n_ones, replace=False)] = 1.0
        X = X.reshape(300, 24)
        return X, (X[:, :4].sum(axis=1) + rng.normal(size=300) > 0.5).astype(np.float32)

    X, y = data(590, 0)
    thresholds = binning.compute_thresholds(X, 256)
    thresholds = binning.trimmed(thresholds, binning.bins_needed(thresholds, 256, 300))
    group = binning.sparse_group(X, thresholds)
    assert group is not None and group.n_entries == 640
    assert binning.bucket_entries(610, 300) == 640
    fit = dict(n_trees=3, depth=3)
    first = jaxgbt.fit("logistic", X, y, **fit)
    X2, y2 = data(610, 1)
    compiled, stop = count_compilations()
    try:
        second = jaxgbt.fit("logistic", X2, y2, **fit)
    finally:
        stop()
    assert not any("_compiled_chunk" in name for name in compiled), compiled
    for model, (X_, y_) in ((first, (X, y)), (second, (X2, y2))):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(binning, "bucket_entries", lambda n_entries, n_rows: n_entries)
            exact = jaxgbt.fit("logistic", X_, y_, **fit)
        assert_same_numbers(model.leaf_value, exact.leaf_value)
        assert_same_numbers(model.feature, exact.feature)
