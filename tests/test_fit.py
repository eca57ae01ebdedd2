import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from conftest import MODEL_ARRAYS, SMALL, count_compilations, make_regression, two_devices

import jaxgbt
from jaxgbt import objectives, spec
from jaxgbt.data import dataset
from jaxgbt.engine import compile as chunk_compile


def _rmse(model, X, y):
    return float(np.sqrt(np.mean((np.asarray(model.predict(X)) - y) ** 2)))


def test_boosting_reduces_training_loss_and_predicts_shapes(regression_data):
    X, y = regression_data
    model = jaxgbt.fit("squared_error", X, y, **SMALL)
    assert model.predict(X).shape == (X.shape[0],)
    assert model.leaf_value.shape == (SMALL["n_trees"], 2 ** SMALL["depth"], 1)
    staged = np.asarray(model.staged_predict_raw(X))
    errors = np.sqrt(np.mean((staged - y[None]) ** 2, axis=1))
    assert np.all(np.diff(errors) < 0), errors
    np.testing.assert_allclose(staged[-1], model.predict_raw(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.base_score, [y.mean()], rtol=1e-5)


def test_vmap_over_learning_rate_l2_and_weights_equals_separate_fits(regression_data):
    X, y = regression_data
    # Few distinct values per feature: every value gets its own bin whatever the weights,
    # so unweighted binning (used when weights are traced under vmap) equals weighted.
    X = np.round(X * 2) / 2
    rates = jnp.array([0.05, 0.3])
    l2s = jnp.array([0.5, 4.0])
    weights = jnp.stack([jnp.ones(len(y)), jnp.linspace(0.1, 3.0, len(y))])

    def fit_predict(rate, l2, weight):
        return jaxgbt.fit("squared_error", X, y, learning_rate=rate, l2=l2, sample_weight=weight,
                          **SMALL).predict_raw(X)

    stacked = jax.vmap(fit_predict)(rates, l2s, weights)
    for i in range(2):
        single = jaxgbt.fit("squared_error", X, y, learning_rate=float(rates[i]), l2=float(l2s[i]),
                            sample_weight=np.asarray(weights[i]), **SMALL)
        np.testing.assert_allclose(stacked[i], single.predict_raw(X), rtol=1e-5, atol=1e-5)
    assert not np.allclose(stacked[0], stacked[1])


def test_vmapped_members_equal_single_fits_with_the_same_parameters(regression_data):
    X, y = regression_data
    rates = jnp.array([0.1, 0.4])
    models = jax.vmap(lambda r: jaxgbt.fit("squared_error", X, y, learning_rate=r, **SMALL))(rates)
    assert models.leaf_value.shape[0] == 2
    for i, rate in enumerate([0.1, 0.4]):
        single = jaxgbt.fit("squared_error", X, y, learning_rate=rate, **SMALL)
        np.testing.assert_array_equal(models.feature[i], single.feature)
        np.testing.assert_allclose(models.leaf_value[i], single.leaf_value, rtol=1e-5, atol=1e-6)


def test_learning_rate_schedule(regression_data):
    X, y = regression_data
    constant = jaxgbt.fit("squared_error", X, y, learning_rate=0.2, **SMALL)
    scheduled = jaxgbt.fit("squared_error", X, y, learning_rate=optax.constant_schedule(0.2),
                           **SMALL)
    np.testing.assert_allclose(scheduled.predict_raw(X), constant.predict_raw(X), rtol=1e-6)
    # The schedule sees the round index: 0.2 for rounds 0-3, then 0.
    stop_at_4 = optax.piecewise_constant_schedule(0.2, {4: 0.0})
    stopped = jaxgbt.fit("squared_error", X, y, learning_rate=stop_at_4, **SMALL)
    np.testing.assert_allclose(stopped.leaf_value[:4], constant.leaf_value[:4], rtol=1e-6)
    np.testing.assert_array_equal(stopped.leaf_value[4:], 0.0)


def test_no_recompilation_when_data_values_hyperparameters_or_n_trees_change():
    X, y = make_regression(seed=5)
    jaxgbt.fit("squared_error", X, y, **SMALL)
    programs = list(chunk_compile._CHUNK_PROGRAMS.values())
    compiled, stop = count_compilations()
    try:
        X2, y2 = make_regression(seed=6)
        jaxgbt.fit("squared_error", X2, y2, learning_rate=0.3, l2=2.0, l1=0.1,
                   min_split_gain=0.01, min_child_weight=2.0, **{**SMALL, "n_trees": 37})
    finally:
        stop()
    assert compiled == []
    assert list(chunk_compile._CHUNK_PROGRAMS.values()) == programs


def test_fits_differing_in_tree_settings_share_the_start_checks():
    # The start's gradient and loss checks read only the loss and the labels: a new
    # depth, bin count, growth policy or constraint must not compile them again.
    X, y = make_regression(seed=7)
    jaxgbt.fit("squared_error", X, y, **SMALL)
    compiled, stop = count_compilations()
    try:
        jaxgbt.fit("squared_error", X, y, n_trees=3, depth=2, n_bins=8, grow_policy="depthwise",
                   monotone_constraints=[1, 0, 0, 0])
    finally:
        stop()
    assert not [name for name in compiled if "start_check" in name or "derivatives" in name]
    assert any("chunk" in name for name in compiled)  # the tree's own program is new


@pytest.mark.parametrize("path", ["plain", "ordered", "init_model", "resume"])
def test_the_training_program_is_compiled_before_binning_and_then_used(path, monkeypatch,
                                                                        tmp_path):
    # Compiled ahead of the bins, so the compiler's memory is handed back before the
    # binned matrix exists; train must then find that program, not compile another.
    X, y = make_regression(seed=7)
    kwargs = dict(SMALL, sample_weight=np.linspace(0.5, 2.0, len(y)))
    if path == "ordered":
        kwargs["boosting"] = "ordered"
    if path == "init_model":
        kwargs["init_model"] = jaxgbt.fit("squared_error", X, y, **SMALL)
    if path == "resume":
        kwargs.update(checkpoint_path=tmp_path / "fit.ckpt", checkpoint_every=1)
        jaxgbt.fit("squared_error", X, y, **kwargs)
        kwargs["n_trees"] = 2 * SMALL["n_trees"]  # resumes from the checkpoint's rounds
    monkeypatch.setattr(chunk_compile, "_CHUNK_PROGRAMS", collections.OrderedDict())
    held_at_binning = []
    apply_bins = dataset.apply_bins

    def recording_apply_bins(*args):
        held_at_binning.append(set(chunk_compile._CHUNK_PROGRAMS))
        return apply_bins(*args)

    monkeypatch.setattr(dataset, "apply_bins", recording_apply_bins)
    model = jaxgbt.fit("squared_error", X, y, **kwargs)
    assert len(held_at_binning[0]) == 1
    assert set(chunk_compile._CHUNK_PROGRAMS) == held_at_binning[0]
    assert _rmse(model, X, y) < float(np.std(y))


def test_the_heap_is_trimmed_around_a_compilation_and_after_large_binnings(regression_data,
                                                                          monkeypatch):
    # malloc_trim costs a small warm fit 5%: it runs before and after compiling the
    # chunk, after binning only from TRIMMED_BINNING_CELLS, and not at all on a warm fit.
    import jaxgbt.fitting as fitting

    X, y = regression_data
    calls = []
    monkeypatch.setattr(chunk_compile, "release_free_heap", lambda: calls.append("compile"))
    monkeypatch.setattr(fitting, "release_free_heap", lambda: calls.append("binning"))
    monkeypatch.setattr(chunk_compile, "_CHUNK_PROGRAMS", collections.OrderedDict())
    jaxgbt.fit("squared_error", X, y, **SMALL)
    assert calls == ["compile", "compile"]
    calls.clear()
    jaxgbt.fit("squared_error", X, y, **SMALL)
    assert calls == []
    monkeypatch.setattr(fitting, "TRIMMED_BINNING_CELLS", X.size)
    jaxgbt.fit("squared_error", X, y, **SMALL)
    assert calls == ["binning"]


def test_data_without_missing_values_fit_the_same_model_searching_missing_left_alone(
        monkeypatch):
    # X without NaN: the chunk is compiled with missing_values=False, and its searches
    # score missing-left alone where they would score both directions in one pass
    # (ONE_DIRECTION_MIN_CELLS lowered so that this small three-class search is one);
    # the model is the one of both directions, bit for bit. A schedule of its own makes
    # the configuration new, so that both fits are traced here.
    import jaxgbt.core.split as split
    from jaxgbt.data.dataset import Dataset

    X, score = make_regression(seed=5)
    y = np.digitize(score, np.quantile(score, [1 / 3, 2 / 3])).astype(np.int32)
    monkeypatch.setattr(split, "ONE_DIRECTION_MIN_CELLS", 512)  # 4 x 4 x 16 cells, K = 3
    directions = []
    lefts = split._lefts
    monkeypatch.setattr(split, "_lefts", lambda sums, d: directions.append(d) or lefts(sums, d))
    kwargs = dict(SMALL, learning_rate=lambda round_index: 0.3)
    alone = jaxgbt.fit("softmax", X, y, **kwargs)
    assert set(directions) == {1}
    directions.clear()
    monkeypatch.setattr(Dataset, "may_hold_missing", lambda self: True)
    both = jaxgbt.fit("softmax", X, y, **kwargs)
    assert set(directions) == {2}
    np.testing.assert_array_equal(np.asarray(alone.predict_raw(X)),
                                  np.asarray(both.predict_raw(X)))
    for name in MODEL_ARRAYS:
        np.testing.assert_array_equal(np.asarray(getattr(alone, name)),
                                      np.asarray(getattr(both, name)))


def test_may_hold_missing_finds_a_nan_in_any_block_of_rows_and_in_sparse_x(monkeypatch):
    import scipy.sparse

    from jaxgbt.data import dataset as dataset_module

    monkeypatch.setattr(dataset_module, "_NAN_SCAN_ROWS", 100)
    X, y = make_regression(seed=6)

    def holds(X):
        return dataset.Dataset.read(X, y, sample_weight=None, group=None,
                                    categorical_features=None,
                                    objective=objectives.resolve("squared_error"),
                                    kind="row").may_hold_missing()

    assert not holds(X)
    with_nan = X.copy()
    with_nan[250, 3] = np.nan  # in the third block of 100 rows
    assert holds(with_nan)
    assert not holds(scipy.sparse.csr_matrix(X))
    assert holds(scipy.sparse.csr_matrix(with_nan))


def test_compiled_programs_are_bounded(regression_data, monkeypatch):
    X, y = regression_data
    monkeypatch.setattr(chunk_compile, "MAX_CHUNK_PROGRAMS", 1)
    jaxgbt.fit("squared_error", X, y, **SMALL)
    shallow = jaxgbt.fit("squared_error", X, y, **{**SMALL, "depth": 2})
    assert len(chunk_compile._CHUNK_PROGRAMS) == 1
    assert shallow.leaf_value.shape[1] == 4


def _library_dots(program_text: str) -> tuple[int, int]:
    """(dot products inside XLA:CPU's library fusions, dot products anywhere) in a
    compiled program's HLO text."""
    library = {re.search(r"calls=%([\w.\-]+)", line).group(1)
               for line in program_text.splitlines() if "__ynn_fusion" in line}
    bodies = re.split(r"\n(?=%[\w.\-]+ )", program_text)
    in_library = sum(body.count(" dot(") for body in bodies
                     if body.split(" ", 1)[0].lstrip("%") in library)
    return in_library, program_text.count(" dot(")


def test_the_chunk_leaves_its_products_to_xla_on_cpu(regression_data, monkeypatch):
    # The prefix sums' small products ran faster as XLA's own loops than as calls into
    # its kernel library; only the training chunk is compiled so, and not where the
    # user's XLA_FLAGS set the option themselves.
    if jax.default_backend() != "cpu":
        pytest.skip("an option of XLA:CPU's compilations")
    X, y = regression_data
    wide = chunk_compile.WIDE_VECTOR_OPTIONS if chunk_compile.wide_vectors_measured() else ()
    assert chunk_compile.chunk_compiler_options("cpu") == chunk_compile.CPU_CHUNK_OPTIONS + wide
    assert chunk_compile.chunk_compiler_options("gpu") == ()
    monkeypatch.setattr(chunk_compile, "_CHUNK_PROGRAMS", collections.OrderedDict())
    jaxgbt.fit("squared_error", X, y, **SMALL)
    (program,) = chunk_compile._CHUNK_PROGRAMS.values()
    in_library, dots = _library_dots(program.as_text())
    assert dots > 0 and in_library == 0
    # The same product shape compiled with XLA's defaults does go through the library.
    product = jax.jit(jnp.matmul).lower(jnp.ones((5120, 17)), jnp.ones((17, 16)))
    assert _library_dots(product.compile().as_text()) == (1, 1)
    options = dict(chunk_compile.CPU_CHUNK_OPTIONS)
    assert _library_dots(product.compile(compiler_options=options).as_text()) == (0, 1)
    chunk_compile.chunk_compiler_options.cache_clear()
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_experimental_ynn_fusion_type=dot")
    try:  # the user's option is left to them, the others kept
        assert chunk_compile.chunk_compiler_options("cpu") == wide
    finally:
        chunk_compile.chunk_compiler_options.cache_clear()


def test_wide_vectors_only_where_measured(monkeypatch):
    # 512-bit vectors were measured faster on an AMD processor with AVX-512 alone, for
    # histograms of many bins: not without AVX-512, not on Intel's, not for few bins, and
    # not where the user's XLA_FLAGS set the width.
    def cpuinfo(vendor, flags):
        first = f"processor\t: 0\nvendor_id\t: {vendor}\nflags\t\t: {flags}\n"
        return first + "\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\nflags\t\t: avx512f\n"
    assert chunk_compile.wide_vectors_measured(cpuinfo("AuthenticAMD", "sse avx2 avx512f"))
    assert not chunk_compile.wide_vectors_measured(cpuinfo("AuthenticAMD", "sse avx2"))
    assert not chunk_compile.wide_vectors_measured(cpuinfo("GenuineIntel", "avx2 avx512f"))
    assert not chunk_compile.wide_vectors_measured("")
    # Only the first processor's fields are read, each as its words.
    fields = chunk_compile.processor_fields(
        cpuinfo("AuthenticAMD", "avx2") + "cpu family\t: 25\nmodel name\t: AMD EPYC 9R14\n")
    assert fields["flags"] == ["avx2"] and "cpu family" not in fields
    assert chunk_compile.processor_fields("model name\t: AMD EPYC 9R14\n") == {
        "model name": ["AMD", "EPYC", "9R14"]}
    if jax.default_backend() != "cpu":
        return
    monkeypatch.setattr(chunk_compile, "wide_vectors_measured", lambda: True)
    chunk_compile.chunk_compiler_options.cache_clear()
    try:
        assert chunk_compile.chunk_compiler_options("cpu") == (
            chunk_compile.CPU_CHUNK_OPTIONS + chunk_compile.WIDE_VECTOR_OPTIONS)
        # Few bins (0/1 columns: 4) keep the default width: slower there at three classes.
        few = chunk_compile.WIDE_VECTOR_MIN_BINS // 2
        assert chunk_compile.chunk_compiler_options("cpu", few) == chunk_compile.CPU_CHUNK_OPTIONS
        chunk_compile.chunk_compiler_options.cache_clear()
        monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=256")
        assert chunk_compile.chunk_compiler_options("cpu") == chunk_compile.CPU_CHUNK_OPTIONS
        # An option this XLA does not know is left out, the others kept.
        monkeypatch.delenv("XLA_FLAGS")
        chunk_compile.chunk_compiler_options.cache_clear()
        monkeypatch.setattr(chunk_compile, "WIDE_VECTOR_OPTIONS",
                            (("xla_cpu_no_such_option", 512),))
        assert not chunk_compile._known_options((("xla_cpu_no_such_option", 512),))
        assert chunk_compile.chunk_compiler_options("cpu") == chunk_compile.CPU_CHUNK_OPTIONS
    finally:
        chunk_compile.chunk_compiler_options.cache_clear()


def test_missing_values_learn_their_direction():
    rng = np.random.default_rng(3)
    x = rng.normal(size=2000).astype(np.float32)
    missing = rng.random(2000) < 0.4
    # Missing rows behave like large x: only a split that sends NaN right separates them.
    y = ((x > 0.8) | missing).astype(np.float32)
    x[missing] = np.nan
    X = np.stack([x, rng.normal(size=2000).astype(np.float32)], axis=1)
    model = jaxgbt.fit("logistic", X, y, n_trees=20, depth=1, learning_rate=0.5)
    assert int(model.feature[0, 0]) == 0 and not bool(model.default_left[0, 0])
    p = np.asarray(model.predict(X))
    assert p[missing].min() > 0.8 and p[~missing & (x < 0.5)].max() < 0.2
    # Filling NaN with a constant loses the separation this model keeps.
    assert np.mean((p > 0.5) == y) > 0.99


def test_zero_hessian_loss_gives_a_finite_model(regression_data):
    X, y = regression_data

    def absolute_error(y, f):
        return jnp.abs(y - f)

    model = jaxgbt.fit(absolute_error, X, y, l2=0.0, **SMALL)
    assert np.isfinite(np.asarray(model.leaf_value)).all()
    assert np.isfinite(np.asarray(model.predict(X))).all()


def test_vector_output_loss(regression_data):
    X, y = regression_data
    Y = np.stack([y, -2 * y], axis=1)

    def multi_squared_error(y, f):
        return 0.5 * jnp.sum((y - f) ** 2)

    model = jaxgbt.fit(multi_squared_error, X, Y, n_outputs=2, learning_rate=0.5, **SMALL)
    assert model.leaf_value.shape == (SMALL["n_trees"], 2 ** SMALL["depth"], 2)
    pred = np.asarray(model.predict(X))
    assert pred.shape == (X.shape[0], 2)
    # The outputs share tree structure; -2y is fitted as well, relative to its scale.
    np.testing.assert_allclose(pred[:, 1], -2 * pred[:, 0], rtol=1e-4, atol=1e-4)
    assert np.mean((pred - Y) ** 2) < 0.5 * np.mean((Y - Y.mean(0)) ** 2)


@two_devices
def test_rows_split_over_two_devices_give_the_one_device_model():
    X, y = make_regression(seed=7, n_rows=255)  # odd: one padding row on the second device
    one = jaxgbt.fit("squared_error", X, y, **SMALL)
    two = jaxgbt.fit("squared_error", X, y, devices="all", **SMALL)
    np.testing.assert_array_equal(two.feature, one.feature)
    np.testing.assert_array_equal(two.threshold, one.threshold)
    np.testing.assert_allclose(two.leaf_value, one.leaf_value, rtol=1e-5, atol=1e-6)


@two_devices
def test_large_narrow_fits_split_rows_over_every_cpu_device_by_default(monkeypatch):
    # The rule's row floor lowered so that small data stand for large (one shape, fast).
    monkeypatch.setattr(spec, "AUTO_MESH_MIN_ROWS", 200)
    X, y = make_regression(seed=7, n_rows=255)
    one = jaxgbt.fit("squared_error", X, y, devices=jax.devices()[:1], **SMALL)
    every = jaxgbt.fit("squared_error", X, y, devices="all", **SMALL)
    assert not np.array_equal(every.leaf_value, one.leaf_value)  # the two paths tell apart
    np.testing.assert_array_equal(jaxgbt.fit("squared_error", X, y, **SMALL).leaf_value,
                                  every.leaf_value)
    # What one device alone does keeps the default on one device.
    for loss, settings in (("squared_error", {"boosting": "ordered"}), ("absolute_error", {}),
                           ("squared_error", {"subsample": 0.9})):
        alone = jaxgbt.fit(loss, X, y, devices=jax.devices()[:1], **settings, **SMALL)
        np.testing.assert_array_equal(jaxgbt.fit(loss, X, y, **settings, **SMALL).leaf_value,
                                      alone.leaf_value)


@pytest.mark.parametrize("change, expected", [
    ({}, True), ({"n_rows": 49_999}, False), ({"n_columns": 65}, False),
    ({"kind": "group"}, False), ({"boosting": "ordered"}, False),
    ({"row_sampling": "bernoulli"}, False), ({"row_sampling": "bayesian"}, False),
    ({"grow_policy": "depthwise"}, True), ({"grow_policy": "lossguide"}, False),
    ({"traced": True}, False), ({"sparse": True}, False), ({"chunked": True}, False)])
def test_the_automatic_mesh_rule(change, expected):
    args = dict(n_rows=50_000, n_columns=64, objective=objectives.resolve("logistic"),
                kind="row", boosting="plain", row_sampling="none", grow_policy="oblivious",
                traced=False, sparse=False, chunked=False)
    args.update(change)
    several = len(jax.local_devices()) > 1 and jax.default_backend() == "cpu"
    assert (spec.automatic_mesh(**args) is not None) == (expected and several)


def test_gradient_of_predictions_with_respect_to_leaves(regression_data):
    X, y = regression_data
    model = jaxgbt.fit("squared_error", X, y, **SMALL)
    grads = jax.grad(lambda m: jnp.sum(m.predict_raw(X)), allow_int=True)(model)
    leaves = np.asarray(model.leaf_index(X))  # [N, T]
    counts = np.stack([np.bincount(leaves[:, t], minlength=8) for t in range(SMALL["n_trees"])])
    np.testing.assert_allclose(grads.leaf_value[..., 0], counts)


def test_same_seed_same_model(regression_data):
    X, y = regression_data
    a = jaxgbt.fit("squared_error", X, y, seed=3, **SMALL)
    b = jaxgbt.fit("squared_error", X, y, seed=3, **SMALL)
    for field in ("feature", "threshold", "default_left", "leaf_value", "base_score"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


def test_min_split_gain_prunes_every_level(regression_data):
    X, y = regression_data
    model = jaxgbt.fit("squared_error", X, y, min_split_gain=1e9, **SMALL)
    assert np.all(np.asarray(model.split_gain) == 0)
    # Pass-through levels send every row to leaf 0.
    assert np.all(np.asarray(model.leaf_index(X)) == 0)


@pytest.mark.parametrize("n_trees", [1, 17])
def test_n_trees_not_a_multiple_of_the_chunk(regression_data, n_trees):
    X, y = regression_data
    model = jaxgbt.fit("squared_error", X, y, **{**SMALL, "n_trees": n_trees})
    assert model.n_trees == n_trees
    assert np.abs(np.asarray(model.leaf_value[-1])).max() > 0


def test_prediction_batches_share_a_few_compiled_programs(regression_data):
    # Every XLA compilation counts, the link and the encoder included: batches of 1 to 64
    # rows are padded to 16, 32 and 64 rows, one program each.
    from jaxgbt.data.transfer import batch_rows

    assert [batch_rows(n) for n in (1, 16, 17, 1000, 131072, 131073, 10**6)] == [
        16, 16, 32, 1024, 131072, 196608, 1048576]
    X, y = regression_data
    model = jaxgbt.fit("logistic", X, (y > 0).astype(np.float32), **SMALL)
    reference = np.asarray(model.predict(jnp.asarray(X)))  # a device array is not padded
    compiled, stop = count_compilations()
    try:
        for n_rows in range(1, 65):
            np.testing.assert_allclose(model.predict(X[:n_rows]), reference[:n_rows],
                                       rtol=1e-6)
    finally:
        stop()
    assert 3 <= len(compiled) <= 3 * 4, compiled  # per bucket: margins, link, and a copy
    compiled, stop = count_compilations()
    try:
        for n_rows in (3, 20, 50):
            model.predict(X[:n_rows])
    finally:
        stop()
    assert compiled == []


def test_tree_counts_in_a_bucket_share_one_prediction_program(regression_data):
    # Models and n_trees of 9 to 16 trees are padded to 16 tree slots; the padding
    # trees are never visited, and the sums are those of the model cut to its trees.
    from jaxgbt.model import _predict_raw, bucket_trees

    assert [bucket_trees(n) for n in (0, 1, 8, 9, 16, 17, 33, 300)] == [
        8, 8, 8, 16, 16, 32, 64, 512]
    X, y = regression_data
    model = jaxgbt.fit("squared_error", X, y, **{**SMALL, "n_trees": 16})
    cut_then_summed = jax.jit(_predict_raw)
    model.predict(X[:16], n_trees=9)
    compiled, stop = count_compilations()
    try:
        predictions = {n: np.asarray(model.predict(X[:16], n_trees=n)) for n in range(9, 17)}
        shorter = jaxgbt.fit("squared_error", X, y, **{**SMALL, "n_trees": 11})
        from_shorter = np.asarray(shorter.predict(X[:16]))
    finally:
        stop()
    assert [name for name in compiled if "margins" in name] == []
    rows = jnp.asarray(X[:16])  # a whole row bucket: predict pads nothing
    for n, got in predictions.items():
        want = np.asarray(cut_then_summed(model.first_trees(n), rows))[:, 0]
        np.testing.assert_array_equal(got, want, err_msg=f"n_trees={n}")
    np.testing.assert_array_equal(from_shorter,
                                  np.asarray(cut_then_summed(shorter, rows))[:, 0])
