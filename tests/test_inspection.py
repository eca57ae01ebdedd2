"""Permutation importance, shap.Explanation interop and the plots (jaxgbt.plot)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import SMALL, make_binary, python_path

import jaxgbt

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture(scope="module")
def named():
    X, y = make_binary()
    frame = pd.DataFrame(X, columns=["age", "income", "height", "noise"])
    model = jaxgbt.fit("logistic", frame[:200], y[:200], eval_set=[(frame[200:], y[200:])],
                       eval_metric=["logloss", "auc"], **SMALL)
    return frame, y, model


def _loop_permutation_importance(model, X, y, metric, n_repeats, orders):
    """The drops by a Python loop over columns and repeats, with the given row orders."""
    baseline = float(metric(y, model.predict(X)))
    out = np.zeros((X.shape[1], n_repeats))
    for j in range(X.shape[1]):
        for r in range(n_repeats):
            shuffled = X.copy()
            shuffled[:, j] = X[orders[r], j]
            out[j, r] = baseline - float(metric(y, model.predict(shuffled)))
    return out


def test_permutation_importance_matches_a_loop(named):
    import jax

    frame, y, model = named
    result = jaxgbt.permutation_importance(model, frame[200:], y[200:], metric="auc",
                                          n_repeats=3, seed=7)
    assert result.feature_names == ("age", "income", "height", "noise")
    assert result.importances.shape == (4, 3)
    X = frame[200:].to_numpy()
    orders = np.asarray(jax.vmap(lambda k: jax.random.permutation(k, X.shape[0]))(
        jax.random.split(jax.random.PRNGKey(7), 3)))
    expected = _loop_permutation_importance(model, X, y[200:], jaxgbt.metrics.auc, 3, orders)
    np.testing.assert_allclose(result.importances, expected, atol=1e-6)
    np.testing.assert_allclose(result.importances_mean, expected.mean(1), atol=1e-6)
    # y depends on columns 0..2 only: shuffling "noise" costs (about) nothing.
    assert result.importances_mean[:3].max() > 0.05
    assert abs(result.importances_mean[3]) < result.importances_mean[:3].max() / 3


def test_permutation_importance_signs_and_errors(named):
    frame, y, model = named
    by_logloss = jaxgbt.permutation_importance(model, frame, y, metric="logloss", n_repeats=2)
    assert by_logloss.importances_mean[:3].max() > 0  # a worse (higher) loss is a positive drop
    with pytest.raises(ValueError, match="unknown metric"):
        jaxgbt.permutation_importance(model, frame, y, metric="nope")
    with pytest.raises(ValueError, match="n_repeats"):
        jaxgbt.permutation_importance(model, frame, y, n_repeats=0)
    with pytest.raises(ValueError, match="labels"):
        jaxgbt.permutation_importance(model, frame, y[:10])


_EXPLAIN_IN_A_PROCESS = """
import numpy as np, pandas as pd, shap, jaxgbt
rng = np.random.default_rng(0)
X = rng.normal(size=(120, 4)).astype(np.float32)
y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(np.float32)
frame = pd.DataFrame(X, columns=["age", "income", "height", "noise"])
model = jaxgbt.fit("logistic", frame, y, n_trees=8, depth=3, n_bins=16)
explanation = model.explain(frame[:30])
assert isinstance(explanation, shap.Explanation)
assert list(explanation.feature_names) == ["age", "income", "height", "noise"]
np.testing.assert_allclose(explanation.values, np.asarray(model.shap_values(frame[:30])))
np.testing.assert_allclose(explanation.values.sum(1) + explanation.base_values,
                           np.asarray(model.predict_raw(frame[:30])), atol=1e-5)
np.testing.assert_array_equal(explanation.data, frame[:30].to_numpy())
print("explained")
"""


@pytest.mark.skipif(importlib.util.find_spec("shap") is None, reason="shap is not installed")
def test_explain_is_a_shap_explanation():
    # In a process of its own: shap brings numba and its own LLVM, which is kept out of
    # the test process, where XLA's compiler runs for the rest of the suite.
    environment = dict(os.environ, PYTHONPATH=python_path(), JAXGBT_COMPILATION_CACHE="0")
    done = subprocess.run([sys.executable, "-c", _EXPLAIN_IN_A_PROCESS], capture_output=True,
                          text=True, env=environment, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("explained")


@pytest.fixture
def pyplot():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


def test_plots_are_labelled_with_the_column_names(named, pyplot):
    frame, _, model = named
    ax = jaxgbt.plot.importance(model, "gain")
    labels = {t.get_text() for t in ax.get_yticklabels()}
    assert labels <= {"age", "income", "height", "noise"} and "age" in labels
    phi = model.shap_values(frame)
    ax = jaxgbt.plot.shap_summary(phi, frame)
    assert {t.get_text() for t in ax.get_yticklabels()} == {"age", "income", "height", "noise"}
    ax = jaxgbt.plot.dependence(phi, frame, "age", color_by="income")
    assert ax.get_xlabel() == "age" and "age" in ax.get_ylabel()
    ax = jaxgbt.plot.tree(model, 0)
    assert "level 0:" in ax.get_title(loc="left")
    ax = jaxgbt.plot.learning_curve(model)
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"valid_0:logloss",
                                                                  "valid_0:auc"}
    depthwise = jaxgbt.fit("logistic", frame, make_binary()[1], grow_policy="depthwise",
                           **SMALL)
    ax = jaxgbt.plot.tree(depthwise, 1)
    assert any("<=" in t.get_text() for t in ax.texts)


def test_plot_errors(named, pyplot):
    frame, y, model = named
    phi = np.asarray(model.shap_values(frame))
    with pytest.raises(ValueError, match="one output"):
        jaxgbt.plot.shap_summary(np.stack([phi, phi], axis=2), frame)
    with pytest.raises(ValueError, match="not one of the columns"):
        jaxgbt.plot.dependence(phi, frame, "weight")
    with pytest.raises(ValueError, match="no history"):
        jaxgbt.plot.learning_curve(jaxgbt.fit("logistic", frame, y, **SMALL))
    with pytest.raises(ValueError, match="outside"):
        jaxgbt.plot.tree(model, model.n_trees)


def test_missing_matplotlib_names_the_extra(named, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib") or name == "shap":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r"jaxgbt\[plot\]"):
        jaxgbt.plot.importance(named[2])
    with pytest.raises(ImportError, match=r"jaxgbt\[shap\]"):
        named[2].explain(named[0][:5])
