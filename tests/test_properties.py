"""Properties of ``fit`` over drawn inputs: any input either raises a clear ValueError or
TypeError before anything is traced, naming an argument that was wrong, or trains a
finite model whose predictions equal a float64 NumPy evaluation of its own trees.

Hypothesis draws the data's dtypes (float32/64, int, bool), NaN and inf cells in X, y
and the weights, weights that are zero, huge or negative, and hyperparameters in and out
of range. Every new shape compiles a training program (about 2 s), so shapes come from
a few fixed (N, F, depth) triples, two losses and two row samplers: the default profile
sees a handful of compiled programs. Runs are derandomized and keep no database, so CI
sees the same examples each time.
"""

import atexit
import os
import shutil
import tempfile
import traceback
import warnings

import numpy as np
import pytest
import reference
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

import jaxgbt

# Hypothesis caches constants in ./.hypothesis while pytest collects: keep them out of the
# working tree.
if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _HYPOTHESIS_HOME = tempfile.mkdtemp(prefix="jaxgbt-hypothesis-")
    atexit.register(shutil.rmtree, _HYPOTHESIS_HOME, ignore_errors=True)
    set_hypothesis_home_dir(_HYPOTHESIS_HOME)

PROPERTIES = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# (N rows, F features, depth): each compiles its own program, so there are few.
SHAPES = [(32, 2, 1), (64, 3, 3)]
LOSSES = ["squared_error", "logistic"]
X_DTYPES = [np.float32, np.float64, np.int32, np.bool_]


class Case:
    """One drawn call of ``fit``: its arguments and the arguments made invalid on purpose
    (``wrong``: names an error message may give; empty when every argument is valid)."""

    def __init__(self, loss, X, y, arguments, wrong):
        self.loss, self.X, self.y, self.arguments, self.wrong = loss, X, y, arguments, wrong

    def __repr__(self):  # what hypothesis prints for a failing example
        X = self.X
        return (f"Case(loss={self.loss!r}, X={X.dtype}{X.shape} with "
                f"{int(np.isnan(X).sum()) if X.dtype.kind == 'f' else 0} NaN, "
                f"y={self.y!r}, arguments={self.arguments!r}, wrong={self.wrong})")


def _cells(draw, shape, n_max: int):
    """Up to ``n_max`` distinct flat indices of an array of ``shape``."""
    size = int(np.prod(shape))
    return draw(st.lists(st.integers(0, size - 1), max_size=n_max, unique=True))


@st.composite
def cases(draw):
    n_rows, n_features, depth = draw(st.sampled_from(SHAPES))
    loss = draw(st.sampled_from(LOSSES))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    wrong = set()
    # Half the cases have no invalid argument at all; the other half may have several.
    hostile = draw(st.booleans())

    dtype = draw(st.sampled_from(X_DTYPES))
    X = rng.normal(size=(n_rows, n_features)) * draw(st.sampled_from([1.0, 1e-30, 1e30]))
    if dtype == np.bool_:
        X = X > 0
    elif dtype == np.int32:
        X = np.clip(np.round(X * 3), -1e6, 1e6)
    X = X.astype(dtype)
    if dtype in (np.float32, np.float64):
        for cell in _cells(draw, X.shape, 8):
            X.flat[cell] = np.nan
        if draw(st.booleans()):  # a whole column missing
            X[:, draw(st.integers(0, n_features - 1))] = np.nan
        infinite = _cells(draw, X.shape, 2) if hostile else []
        for cell in infinite:
            X.flat[cell] = draw(st.sampled_from([np.inf, -np.inf]))
        if infinite:
            wrong.add("X")

    signal = np.nan_to_num(np.asarray(X[:, 0], np.float64))
    if loss == "logistic":
        y = (signal > np.median(signal)).astype(draw(st.sampled_from([np.float32, np.int64,
                                                                      np.bool_])))
    else:
        y = (np.sign(signal) + rng.normal(size=n_rows)).astype(
            draw(st.sampled_from([np.float32, np.float64])))
    bad_labels = _cells(draw, y.shape, 2) if hostile and y.dtype.kind == "f" else []
    for row in bad_labels:
        y[row] = draw(st.sampled_from([np.nan, np.inf]))
    if bad_labels:
        wrong.add("y")

    arguments = dict(n_trees=draw(st.integers(1, 4)), depth=depth, n_bins=16)
    weight_kind = draw(st.sampled_from(["none", "ones", "some zero", "huge"]
                                       + (["negative", "nan", "all zero"] if hostile else [])))
    if weight_kind != "none":
        weight = rng.uniform(0.5, 2.0, size=n_rows)
        if weight_kind == "some zero":
            weight[: n_rows // 2] = 0.0
        elif weight_kind == "huge":
            weight *= 1e30
        elif weight_kind in ("negative", "nan"):
            weight[draw(st.integers(0, n_rows - 1))] = -1.0 if weight_kind == "negative" else np.nan
            wrong.add("sample_weight")
        elif weight_kind == "all zero":
            weight[:] = 0.0
            wrong.add("sample_weight")
        arguments["sample_weight"] = weight.astype(draw(st.sampled_from([np.float32,
                                                                         np.float64])))

    def number(name, valid, invalid):
        """A value of hyperparameter ``name``: drawn from ``valid`` or ``invalid``."""
        if hostile and draw(st.integers(0, 5)) == 0:  # now and then, out of range
            wrong.add(name)
            return draw(invalid)
        return draw(valid)

    positive = st.floats(1e-3, 1e3)
    arguments["learning_rate"] = number("learning_rate", st.floats(1e-3, 1.0),
                                        st.sampled_from([0.0, -0.1, np.nan, np.inf]))
    arguments["l2"] = number("l2", st.floats(0.0, 1e3), st.sampled_from([-1.0, np.nan, np.inf]))
    arguments["min_child_weight"] = number("min_child_weight", st.floats(0.0, 1e3),
                                           st.sampled_from([-1.0, np.nan]))
    arguments["min_split_gain"] = number("min_split_gain", st.floats(0.0, 10.0),
                                         st.sampled_from([-1.0, np.nan]))
    arguments["l1"] = number("l1", st.sampled_from([0.0]) | positive,
                             st.sampled_from([-1.0, np.inf]))
    arguments["subsample"] = number("subsample", st.sampled_from([1.0, 0.5]),
                                    st.sampled_from([0.0, 1.5, np.nan]))
    return Case(loss, X, y, arguments, wrong)


def _raised_on_the_host(error: BaseException) -> bool:
    """No frame between ``fit`` and the raise is JAX's: the error was not raised while
    tracing or running a compiled program."""
    frames = traceback.extract_tb(error.__traceback__)
    return not any(f"jax{os.sep}_src" in frame.filename for frame in frames)


def _check(case: Case) -> None:
    """The property, on one drawn case."""
    inputs = (case.X.copy(), case.y.copy(),
              {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in case.arguments.items()})
    try:
        with warnings.catch_warnings():
            # A drawn case may warn (a loss flat where every row has weight 0, ...): the
            # property is about errors and results.
            warnings.simplefilter("ignore")
            model = jaxgbt.fit(case.loss, case.X, case.y, **case.arguments)
    except (ValueError, TypeError) as error:
        message = str(error)
        assert case.wrong, f"valid input refused: {type(error).__name__}: {message}"
        assert any(name in message for name in case.wrong), (
            f"the message names none of {sorted(case.wrong)}: {message}")
        assert _raised_on_the_host(error), f"raised while tracing: {message}"
        event(f"refused: {type(error).__name__}")
        return
    finally:  # nothing passed in was changed
        np.testing.assert_array_equal(case.X, inputs[0])
        np.testing.assert_array_equal(case.y, inputs[1])
        for name, value in inputs[2].items():
            np.testing.assert_array_equal(case.arguments[name], value)
    assert not case.wrong, f"trained although {sorted(case.wrong)} were invalid"
    event("trained")
    arrays = {name: np.asarray(getattr(model, name)) for name in
              ("feature", "threshold", "default_left", "leaf_value", "base_score")}
    assert np.isfinite(arrays["leaf_value"]).all() and np.isfinite(arrays["base_score"]).all()
    X64 = np.asarray(case.X, np.float32).astype(np.float64)  # what the model reads
    expected, _ = reference.predict(X64, **arrays)
    raw = np.asarray(model.predict_raw(case.X), np.float64).reshape(expected.shape)
    # float32 sums of T + 1 terms against a float64 sum: a few ulps of the largest terms.
    scale = np.abs(arrays["base_score"]).max() + np.abs(arrays["leaf_value"]).max(axis=(1, 2)).sum()
    np.testing.assert_allclose(raw, expected, rtol=0, atol=1e-6 * (1.0 + scale))


@settings(PROPERTIES, max_examples=40)
@given(case=cases())
def test_fit_refuses_clearly_or_trains_a_model_its_trees_explain(case):
    _check(case)


@pytest.mark.slow
@settings(PROPERTIES, max_examples=100)
@given(case=cases())
def test_fit_refuses_clearly_or_trains_a_model_its_trees_explain_longer(case):
    _check(case)
