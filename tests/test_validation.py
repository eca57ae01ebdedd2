"""Bad input: each case raises a clear error before any tracing, naming the argument."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, make_regression

import jaxgbt

X_OK, Y_OK = make_regression(seed=11)
Y_BINARY = (Y_OK > 0).astype(np.float32)


def _with(array, index, value):
    array = array.copy()
    array[index] = value
    return array


CASES = [
    # (id, fit arguments, exception type, message pattern)
    ("X 1-D", dict(X=X_OK[:, 0]), ValueError, "X must be 2-D"),
    ("X empty", dict(X=X_OK[:0], y=Y_OK[:0]), ValueError, "X is empty"),
    ("X no features", dict(X=X_OK[:, :0]), ValueError, "X is empty"),
    ("X one row", dict(X=X_OK[:1], y=Y_OK[:1]), ValueError, "X has 1 row"),
    ("X 3-D", dict(X=X_OK[:, :, None]), ValueError, "X must be 2-D"),
    ("X strings", dict(X=np.full((256, 4), "a")), TypeError, "X must hold numbers"),
    ("X objects", dict(X=_with(X_OK.astype(object), (2, 1), "a")), TypeError,
     "X must hold numbers; it has dtype object and holds str values such as 'a'"),
    ("X complex", dict(X=X_OK.astype(np.complex64)), TypeError, "real numbers"),
    ("X inf", dict(X=_with(X_OK, (3, 1), np.inf)), ValueError, "infinite values.*row 3"),
    ("y length", dict(y=Y_OK[:-1]), ValueError, "y has 255 rows but X has 256"),
    ("y nan", dict(y=_with(Y_OK, 5, np.nan)), ValueError, "y contains 1 NaN"),
    ("y inf", dict(y=_with(Y_OK, 5, np.inf)), ValueError, "y contains 1 NaN or infinite"),
    ("y strings", dict(y=np.array(["a"] * 256)), TypeError, "y must hold numbers"),
    ("logistic label 2", dict(loss="logistic", y=_with(Y_BINARY, 0, 2.0)), ValueError,
     "outside the domain of loss 'logistic'"),
    ("weights length", dict(sample_weight=np.ones(3)), ValueError, r"shape \(256,\)"),
    ("weights negative", dict(sample_weight=_with(np.ones(256), 0, -1.0)), ValueError,
     "negative"),
    ("weights nan", dict(sample_weight=_with(np.ones(256), 0, np.nan)), ValueError,
     "sample_weight contains NaN"),
    ("weights all zero", dict(sample_weight=np.zeros(256)), ValueError, "sums to 0"),
    ("n_trees zero", dict(n_trees=0), ValueError, "n_trees=0"),
    ("n_trees float", dict(n_trees=2.5), TypeError, "n_trees must be an integer"),
    ("depth zero", dict(depth=0), ValueError, "depth=0"),
    ("depth huge", dict(depth=30), ValueError, r"depth=30 .* \[1, 12\]"),
    ("n_bins 2", dict(n_bins=2), ValueError, r"n_bins=2 .* \[3, 256\]"),
    ("n_bins 300", dict(n_bins=300), ValueError, "n_bins=300"),
    ("learning_rate 0", dict(learning_rate=0.0), ValueError,
     "learning_rate=0.0 must be a finite number > 0"),
    ("learning_rate nan", dict(learning_rate=float("nan")), ValueError, "learning_rate"),
    ("l2 negative", dict(l2=-1.0), ValueError, "l2=-1.0"),
    ("l1 negative", dict(l1=-0.1), ValueError, "l1=-0.1"),
    ("min_child_weight nan", dict(min_child_weight=float("nan")), ValueError,
     "min_child_weight"),
    ("min_split_gain string", dict(min_split_gain="big"), TypeError, "min_split_gain must be"),
    ("unknown loss", dict(loss="hinge_of_doom"), ValueError, "not a built-in objective"),
    ("loss not callable", dict(loss=42), TypeError, "loss must be"),
    ("loss non-scalar", dict(loss=lambda y, f: jnp.stack([f, f])), ValueError,
     "must return a scalar"),
    ("loss raises", dict(loss=lambda y, f: y["missing"]), TypeError, "failed on one row"),
    ("loss nan gradients", dict(loss=lambda y, f: jnp.sqrt(y - 10.0) * f), FloatingPointError,
     "NaN or infinite gradients .* for 256 of 256 rows"),
    ("loss nan, gradient finite", dict(loss=lambda y, f: jnp.log(-1.0 - f * 0.0)),
     FloatingPointError, r"NaN or infinite at the starting margin .* for 256 of 256 rows"),
    ("loss nan for some rows",
     dict(loss=lambda y, f: (f - y) ** 2 + jnp.where(y > 1.0, jnp.log(-1.0 + 0.0 * f), 0.0)),
     FloatingPointError, rf"for {int((Y_OK > 1).sum())} of 256 rows \(rows "
                         rf"{int(np.argmax(Y_OK > 1))}, "),
    ("loss int", dict(loss=lambda y, f: jnp.round((f - y) ** 2).astype(jnp.int32)), TypeError,
     "must return a real float scalar .* dtype int32"),
    ("loss complex", dict(loss=lambda y, f: (f - y) ** 2 + 0j), TypeError,
     "must return a real float scalar .* dtype complex64"),
    ("base_score nan", dict(base_score=float("nan")), ValueError, "base_score=nan"),
    ("n_outputs zero", dict(n_outputs=0), ValueError, "n_outputs=0"),
    ("devices unknown", dict(devices="gpus"), ValueError, "devices='gpus'"),
    ("devices not devices", dict(devices=[1, 2]), TypeError, "list of jax devices"),
    ("link not callable", dict(link="sigmoid"), TypeError, "link must be a function"),
    ("n_trees past int32", dict(n_trees=2**31), ValueError, r"n_trees=2147483648 .* 1000000"),
    ("base_score text", dict(base_score="abc"), TypeError, "base_score='abc' must be a number"),
    ("base_score length", dict(base_score=[1.0, 2.0]), ValueError, r"base_score has shape \(2,\)"),
    ("eval_metric number", dict(eval_set=[(X_OK, Y_OK)], eval_metric=3), TypeError,
     "eval_metric=3 must be a metric name"),
    ("eval_set labels nan", dict(eval_set=[(X_OK, Y_OK), (X_OK, _with(Y_OK, 2, np.nan))]),
     ValueError, r"eval_set\[1\] y contains 1 NaN"),
    ("eval_set weights", dict(eval_set=[(X_OK, Y_OK, np.ones(3))]), ValueError,
     r"eval_set\[0\]: sample_weight must have shape"),
    ("verbose text", dict(verbose="loud"), TypeError, "verbose must be an integer"),
    ("monotone half", dict(monotone_constraints={0: 0.5}), ValueError,
     r"monotone_constraints\[0\]=0.5 must be -1"),
    ("schedule negative", dict(learning_rate=lambda r: 0.1 - 0.05 * r), ValueError,
     "at round 3 it is -0.05"),
    ("schedule not jax", dict(learning_rate=lambda r: float(r)), TypeError,
     "a schedule must be a JAX function of the round"),
    ("aft sigma negative", dict(loss="aft@-1"), ValueError, "aft_normal sigma=-1.0 must be"),
    ("weights overflow float32", dict(sample_weight=np.full(256, 1e39)), ValueError,
     "above float32's largest"),
    ("weights sum overflows", dict(sample_weight=np.full(256, 3e38)), ValueError,
     "sums past float32's largest"),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_bad_input_raises_a_clear_error(case):
    _, changes, error, pattern = case
    arguments = dict(loss="squared_error", X=X_OK, y=Y_OK, **SMALL)
    arguments.update(changes)
    loss, X, y = arguments.pop("loss"), arguments.pop("X"), arguments.pop("y")
    with pytest.raises(error, match=pattern):
        jaxgbt.fit(loss, X, y, **arguments)


def test_inputs_are_not_modified():
    X = _with(X_OK, (0, 0), np.nan)
    y = Y_OK.copy()
    weight = np.linspace(0.5, 1.5, 256)
    copies = X.copy(), y.copy(), weight.copy()
    jaxgbt.fit("squared_error", X, y, sample_weight=weight, **SMALL)
    for before, after in zip(copies, (X, y, weight), strict=True):
        np.testing.assert_array_equal(before, after)


@pytest.fixture(scope="module")
def small_model():
    return jaxgbt.fit("squared_error", X_OK, Y_OK, **SMALL)


@pytest.mark.parametrize("X, pattern", [
    (X_OK[:, :3], "X has 3 features but the model was trained on 4"),
    (X_OK[0], "X must be 2-D"),
    (np.full((2, 4), "x"), "X must hold numbers"),
])
def test_predict_checks_its_input(small_model, X, pattern):
    with pytest.raises((ValueError, TypeError), match=pattern):
        small_model.predict(X)


def test_first_trees_range(small_model):
    with pytest.raises(ValueError, match="n_trees=9 is outside"):
        small_model.predict(X_OK, n_trees=9)
    with pytest.raises(TypeError, match="n_trees must be an integer number of trees; got 2.5"):
        small_model.predict(X_OK, n_trees=2.5)
    np.testing.assert_allclose(small_model.predict(X_OK, n_trees=0),
                               np.full(256, float(small_model.base_score[0])))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fit_leaves_the_callers_X_as_it_was(dtype):
    # float32 X is read through a read-only view, not copied: the caller's array must
    # keep its values and its own (writeable) flag.
    X = X_OK.astype(dtype)
    before = X.copy()
    jaxgbt.fit("squared_error", X, Y_OK, **SMALL)
    assert X.flags.writeable
    np.testing.assert_array_equal(X, before)


def test_check_X_returns_a_read_only_array():
    from jaxgbt.data.validation import check_X

    X = X_OK.copy()
    checked = check_X(X)
    assert not checked.flags.writeable and X.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        checked[0, 0] = 1.0


def test_predict_refuses_complex_device_arrays_and_stacked_models(small_model):
    with pytest.raises(TypeError, match="X must hold real numbers; got a jax array of dtype "
                                        "complex64"):
        small_model.predict(jnp.asarray(X_OK) * (1 + 1j))
    many = jaxgbt.fit_many("squared_error", X_OK, Y_OK, {"l2": np.array([1.0, 2.0])}, **SMALL)
    with pytest.raises(ValueError, match="this Booster stacks 2 models"):
        many.predict(X_OK)


def test_masked_cells_are_missing_values(small_model):
    masked = np.ma.masked_array(X_OK, mask=X_OK > 1.0)
    as_nan = np.where(X_OK > 1.0, np.nan, X_OK)
    np.testing.assert_array_equal(small_model.predict(masked), small_model.predict(as_nan))
    refit = jaxgbt.fit("squared_error", masked, Y_OK, **SMALL)
    from conftest import assert_same_model
    assert_same_model(refit, jaxgbt.fit("squared_error", as_nan, Y_OK, **SMALL))


def test_rows_as_lists_and_objects_are_read_as_numbers(small_model):
    # A list of rows, and an object array of numbers with None for missing (as
    # scikit-learn and a DataFrame's object column are read), give the float array's
    # model and predictions; predict returned the list unread and failed on it.
    as_nan = _with(X_OK, (3, 1), np.nan)
    objects = _with(X_OK.astype(object), (3, 1), None)
    expected = small_model.predict(as_nan)
    np.testing.assert_array_equal(small_model.predict(as_nan.tolist()), expected)
    np.testing.assert_array_equal(small_model.predict(objects), expected)
    from conftest import assert_same_model
    assert_same_model(jaxgbt.fit("squared_error", objects, Y_OK, **SMALL),
                      jaxgbt.fit("squared_error", as_nan, Y_OK, **SMALL))
    flags = _with(as_nan.astype(object), (0, 0), np.True_)  # NumPy's bool is no numbers.Real
    np.testing.assert_array_equal(small_model.predict(flags),
                                  small_model.predict(_with(as_nan, (0, 0), 1.0)))
    with pytest.raises(TypeError, match="holds list values such as"):
        small_model.predict(_with(objects, (0, 0), [1.0]))
    np.testing.assert_array_equal(jaxgbt.soft_predict_raw(small_model, objects, 0.5),
                                  jaxgbt.soft_predict_raw(small_model, as_nan, 0.5))


def test_soft_predict_checks_its_temperature(small_model):
    for bad in (-1.0, 0.0, float("nan")):
        with pytest.raises(ValueError, match="temperature=.* must be finite and > 0"):
            jaxgbt.soft_predict_raw(small_model, X_OK, bad)


def test_load_and_save_refuse_what_is_not_a_file(small_model, tmp_path):
    import os

    with pytest.raises(TypeError, match="load: path must be a file path"):
        jaxgbt.load(None)
    with pytest.raises(TypeError, match="save: path must be a file path"):
        small_model.save(3)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        small_model.save(tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # opening it would block until a writer came
    for path in (fifo, "/dev/zero", tmp_path):  # /dev/zero would be read without end
        with pytest.raises(jaxgbt.io.archive.ModelFormatError, match="not a regular file"):
            jaxgbt.load(path)


@pytest.mark.parametrize("loss, pattern", [
    (lambda y, f: (y - jnp.round(f)) ** 2, "zero gradient for every row"),
    (lambda y, f: y ** 2 + 0.0 * f, "zero gradient for every row"),
    (lambda y, f: -((y - f) ** 2), "negative curvature"),
])
def test_losses_that_cannot_train_warn(loss, pattern):
    with pytest.warns(RuntimeWarning, match=pattern):
        jaxgbt.fit(loss, X_OK, Y_OK, **SMALL)


def test_a_perfect_start_does_not_warn():
    # Constant labels: the gradient is 0 at the start (the mean), not everywhere.
    jaxgbt.fit("squared_error", X_OK, np.full(256, 3.0, np.float32), **SMALL)


def test_cv_members_with_nan_gradients_raise():
    with pytest.raises(FloatingPointError, match="3 of 3 members have NaN or infinite leaf"):
        jaxgbt.cv(lambda y, f: jnp.sqrt(y - 10.0) * f, X_OK, Y_OK, n_folds=3, **SMALL)


def test_group_ids_as_huge_floats_are_refused():
    from jaxgbt.data.validation import check_group

    with pytest.raises(ValueError, match="float ids above 2\\*\\*53"):
        check_group(np.array([1e20, 1e20, 1e20 + 2**20, 1e20 + 2**20]), 4)
    np.testing.assert_array_equal(check_group(np.array([3.0, 3.0, 5.0]), 3), [3, 3, 5])


def test_a_group_loss_nan_for_some_groups_names_them():
    group = np.repeat(np.arange(8), 32)  # 8 queries of 32 rows

    def listwise(y_q, f_q, mask_q):
        # NaN for the queries whose first label is negative; the gradient stays finite.
        log_p = jax.nn.log_softmax(jnp.where(mask_q, f_q, -jnp.inf))
        broken = jnp.where(y_q[0] < 0, jnp.log(-1.0 + 0.0 * f_q[0]), 0.0)
        return -jnp.sum(jnp.where(mask_q, y_q * log_p, 0.0)) + broken

    y = np.abs(Y_OK).astype(np.float32)
    y[[0, 64, 65]] = -1.0  # queries 0 and 2
    with pytest.raises(FloatingPointError, match=r"for 2 of 8 groups \(groups 0, 2\)"):
        jaxgbt.fit(listwise, X_OK, y, group=group, **SMALL)



_PHI = np.zeros((4, 4), np.float32)
# (id, call on a fitted model, exception type, message pattern)
EXPLAIN_CASES = [
    ("shap_values X width", lambda m: m.shap_values(X_OK[:, :3]), ValueError,
     "X has 3 features"),
    ("shap_values background width", lambda m: m.shap_values(X_OK[:4], background=X_OK[:8, :3]),
     ValueError, "background: X has 3 features"),
    ("shap_values background empty", lambda m: m.shap_values(X_OK[:4], background=X_OK[:0]),
     ValueError, "background must hold"),
    ("shap_interaction_values n_trees", lambda m: m.shap_interaction_values(X_OK[:4], n_trees=99),
     ValueError, "n_trees=99"),
    ("feature_importance kind", lambda m: m.feature_importance("weight"), ValueError,
     "importance kind 'weight'"),
    ("feature_importance n_trees", lambda m: m.feature_importance(n_trees=-1), ValueError,
     "n_trees=-1"),
    ("permutation_importance y nan", lambda m: jaxgbt.inspection.permutation_importance(
        m, X_OK, _with(Y_OK, 7, np.nan), metric="rmse"), ValueError,
     r"y contains 1 NaN labels \(first at row 7\)"),
    ("permutation_importance y length", lambda m: jaxgbt.inspection.permutation_importance(
        m, X_OK, Y_OK[:5], metric="rmse"), ValueError, r"y has 5 labels \(shape \(5,\)\)"),
    ("permutation_importance y text", lambda m: jaxgbt.inspection.permutation_importance(
        m, X_OK, np.full(256, "a"), metric="rmse"), TypeError, "y must hold numbers"),
    ("permutation_importance metric", lambda m: jaxgbt.inspection.permutation_importance(
        m, X_OK, Y_OK, metric="bogus"), ValueError, "unknown metric 'bogus'"),
    ("plot.importance max_features", lambda m: jaxgbt.plot.importance(m, max_features=0),
     ValueError, "max_features=0"),
    ("plot.shap_summary phi nan", lambda m: jaxgbt.plot.shap_summary(
        np.full_like(_PHI, np.nan), X_OK[:4]), ValueError, "phi holds 16 NaN"),
    ("plot.shap_summary X width", lambda m: jaxgbt.plot.shap_summary(_PHI, X_OK[:4, :3]),
     ValueError, r"X must have shape \(N, 4\)"),
    ("plot.tree index", lambda m: jaxgbt.plot.tree(m, "first"), TypeError,
     "index must be an integer"),
]


@pytest.mark.parametrize("case", EXPLAIN_CASES, ids=[case[0] for case in EXPLAIN_CASES])
def test_explain_entry_points_check_their_input(small_model, case):
    pytest.importorskip("matplotlib")
    import jaxgbt.inspection
    import jaxgbt.plot  # noqa: F401 - the cases call it

    _, call, error, pattern = case
    with pytest.raises(error, match=pattern):
        call(small_model)


# -- keywords: other libraries' names answered with jaxgbt's ------------------------------


@pytest.mark.parametrize(("call", "where"), [
    (lambda **kw: jaxgbt.fit("logistic", X_OK, Y_BINARY, **kw), "fit"),
    (lambda **kw: jaxgbt.fit_many("logistic", X_OK, Y_BINARY, params={"l2": [1, 2]}, **kw),
     "fit_many"),
    (lambda **kw: jaxgbt.cv("logistic", X_OK, Y_BINARY, **kw), "cv"),
    (lambda **kw: jaxgbt.fit_auto("logistic", X_OK, Y_BINARY, **kw), "fit_auto"),
    (lambda **kw: jaxgbt.fit_forest(X_OK, Y_BINARY, **kw), "fit_forest"),
    (lambda **kw: jaxgbt.JaxGBTClassifier(**kw), "JaxGBTClassifier"),
])
def test_other_libraries_names_are_answered_with_jaxgbts(call, where):
    message = (rf"^{where}\(\) got unexpected keywords 'n_estimators' \(jaxgbt calls it "
               r"n_trees\), 'max_depth' \(jaxgbt calls it depth\); "
               rf"help\({where}\) lists what it takes\.$")
    with pytest.raises(TypeError, match=message):
        call(n_estimators=10, max_depth=3)
    with pytest.raises(TypeError, match=r"'dept' \(did you mean depth\?\)"):
        call(dept=3)


def test_an_estimators_set_params_answers_with_a_value_error():
    # scikit-learn's contract for a parameter the estimator lacks (GridSearchCV's grid).
    model = jaxgbt.JaxGBTRegressor()
    with pytest.raises(ValueError, match=r"'reg_lambda' \(jaxgbt calls it l2\)"):
        model.set_params(reg_lambda=3.0)
    assert model.set_params(l2=3.0).l2 == 3.0


def test_a_swept_name_of_another_library_is_answered_too():
    with pytest.raises(ValueError, match=r"'eta' is not a fit argument that can be swept "
                                         r"\(jaxgbt calls it learning_rate\)"):
        jaxgbt.fit_many("logistic", X_OK, Y_BINARY, params={"eta": [0.1, 0.3]})


def test_every_other_name_maps_to_a_keyword_fit_takes():
    from jaxgbt.spec import OTHER_LIBRARIES_NAMES, keyword_hint
    from jaxgbt.sweeps import FIT_KEYWORDS

    for name, ours in OTHER_LIBRARIES_NAMES.items():
        assert name not in FIT_KEYWORDS, name
        assert keyword_hint(name, FIT_KEYWORDS) == f"jaxgbt calls it {ours}", name
    # A name with no counterpart and nothing near it gets no hint, and a counterpart the
    # called function lacks is not offered.
    assert keyword_hint("gpu_id", FIT_KEYWORDS) == ""
    assert keyword_hint("num_class", {"n_trees", "depth"}) == ""


def test_settings_without_a_keyword_are_answered_with_what_does_the_same():
    # Not with the nearest name: n_jobs is not n_bins, nor extra_trees n_trees.
    from jaxgbt.spec import FIT_INSTEAD, keyword_hint
    from jaxgbt.sweeps import FIT_KEYWORDS

    for name, answer in FIT_INSTEAD.items():
        assert name not in FIT_KEYWORDS, name
        assert keyword_hint(name, FIT_KEYWORDS) == answer, name
    assert keyword_hint("n_jobs", FIT_KEYWORDS).startswith("jaxgbt calls it devices")
    with pytest.raises(TypeError, match=r"'extra_trees' \(no random thresholds; "):
        jaxgbt.fit("logistic", X_OK, Y_BINARY, extra_trees=True)
    # The estimators' fit too, before anything is fitted.
    pytest.importorskip("sklearn")
    with pytest.raises(TypeError, match=r"^JaxGBTRegressor\.fit\(\) got an unexpected keyword "
                                        r"argument 'eval_sample_weight' \(give each eval_set "):
        jaxgbt.JaxGBTRegressor().fit(X_OK, Y_BINARY, eval_sample_weight=[Y_BINARY])


def test_other_libraries_predict_options_are_answered_with_jaxgbts_methods():
    model = jaxgbt.fit("logistic", X_OK, Y_BINARY, n_trees=2, depth=2)
    with pytest.raises(TypeError, match=r"^Booster\.predict\(\) got unexpected keywords "
                                        r"'output_margin' \(predict_raw\(X\) gives the "
                                        r"margins\), 'num_iteration' \(jaxgbt calls it "
                                        r"n_trees, .*\); help\(Booster\.predict\)"):
        model.predict(X_OK, output_margin=True, num_iteration=1)
    for option, method in (("pred_contrib", "shap_values"), ("pred_leaf", "leaf_index")):
        with pytest.raises(TypeError, match=rf"'{option}' \({method}\(X\) gives them\)"):
            model.predict_raw(X_OK, **{option: True})
    assert_same = np.testing.assert_array_equal
    assert_same(model.predict(X_OK, n_trees=1), model.first_trees(1).predict(X_OK))
