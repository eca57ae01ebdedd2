"""The boosting round (jaxgbt.core.round): plain and ordered boosting as strategies of one
round, and the round's place below the engine."""

import ast
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import reference
from conftest import make_regression

import jaxgbt.core
from jaxgbt.core.config import BoostConfig
from jaxgbt.core.layout import Oblivious
from jaxgbt.core.ordered import OrderedMargins, row_order
from jaxgbt.core.round import BoostParams, TrainData, boost_round
from jaxgbt.core.sampling import SamplingParams
from jaxgbt.core.split import SplitParams
from jaxgbt.data.binning import apply_bins, compute_thresholds
from jaxgbt.objectives import resolve

DEPTH, N_BINS, L2, LEARNING_RATE = 3, 16, 1.0, 0.5


def _round_inputs(ordered: bool):
    X, y = make_regression(seed=3)
    weight = np.linspace(0.5, 2.0, len(y), dtype=np.float32)
    bins = apply_bins(X, compute_thresholds(X, N_BINS, weight, 0))
    config = BoostConfig(loss=resolve("squared_error").loss, depth=DEPTH, n_bins=N_BINS,
                         ordered=ordered)
    one, zero = jnp.float32(1.0), jnp.float32(0.0)
    key = jax.random.PRNGKey(0)
    sampling = SamplingParams(key=key, subsample=one, colsample_bytree=one,
                              colsample_bylevel=one, goss_top_rate=one, goss_other_rate=one)
    params = BoostParams(learning_rate=jnp.float32(LEARNING_RATE),
                         split=SplitParams(l2=jnp.float32(L2), l1=zero, min_split_gain=zero,
                                           min_child_weight=zero),
                         hessian_floor=zero, sampling=sampling)
    data = TrainData(bins=jnp.asarray(bins), y=jnp.asarray(y), weight=jnp.asarray(weight),
                     order=row_order(key, len(y)) if ordered else None)
    return config, params, data


def test_the_ordered_strategy_grows_at_the_ordered_margins_and_sets_leaves_at_the_model():
    config, params, data = _round_inputs(ordered=True)
    plain_config = BoostConfig(loss=config.loss, depth=DEPTH, n_bins=N_BINS)
    y = np.asarray(data.y, np.float64)[:, None]
    model = jnp.zeros((len(y), 1), jnp.float32)
    shifted = jnp.asarray(np.asarray(data.bins[0], np.float32)[:, None] / N_BINS - 0.5)
    margins = OrderedMargins(model=model, ordered=shifted)
    new, (tree, bad_rows) = boost_round(config, params, data, margins, jnp.int32(0))
    # The structure is the plain round's at the ordered margins, ...
    _, (plain_tree, _) = boost_round(plain_config, params, data, shifted, jnp.int32(0))
    np.testing.assert_array_equal(tree.feature, plain_tree.feature)
    np.testing.assert_array_equal(tree.split_bin, plain_tree.split_bin)
    # ... the leaves are the Newton step of squared error (g = f - y, h = 1) at the model's.
    leaf = np.asarray(Oblivious().leaf_from_bins(data.bins, tree, N_BINS))
    w = np.asarray(data.weight, np.float64)[:, None]
    G = np.zeros((2**DEPTH, 1))
    H = np.zeros((2**DEPTH, 1))
    np.add.at(G, leaf, (np.asarray(model, np.float64) - y) * w)
    np.add.at(H, leaf, w)
    # (Leaves no row reached take their ancestors' mean.)
    expected = reference.fill_empty_leaves(-G / (H + L2), H[:, 0])
    np.testing.assert_allclose(tree.leaf_value, LEARNING_RATE * expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(tree.leaf_value, plain_tree.leaf_value, atol=1e-3)
    np.testing.assert_array_equal(new.model, model + tree.leaf_value[leaf])
    assert int(bad_rows) == 0


def test_a_plain_round_carries_one_margin_array():
    config, params, data = _round_inputs(ordered=False)
    raw = jnp.zeros((data.weight.shape[0], 1), jnp.float32)
    new, (tree, bad_rows) = boost_round(config, params, data, raw, jnp.int32(0))
    leaf = Oblivious().leaf_from_bins(data.bins, tree, N_BINS)
    np.testing.assert_array_equal(new, raw + tree.leaf_value[leaf])
    assert int(bad_rows) == 0


def test_core_imports_nothing_from_the_engine_or_above():
    # Layers: the round sits in core so that core never reaches up into the engine.
    above = ("jaxgbt.engine", "jaxgbt.model", "jaxgbt.io", "jaxgbt.fitting", "jaxgbt.sweeps",
             "jaxgbt.forest", "jaxgbt.differentiable")
    core = pathlib.Path(jaxgbt.core.__file__).parent
    imported = set()
    for path in core.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                imported.update((path.name, alias.name) for alias in node.names)
    assert ("round.py", "jaxgbt.core.ordered") in imported
    assert sorted((name, module) for name, module in imported
                  if module == "jaxgbt" or module.startswith(above)) == []
