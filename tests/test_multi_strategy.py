"""multi_strategy="one_output_per_tree": the outputs take turns, a tree each."""

import numpy as np
import pytest
from conftest import two_devices

import jaxgbt

RNG = np.random.default_rng(0)
X = RNG.normal(size=(400, 5)).astype(np.float32)
# Three independent targets: each output's trees see its own column alone.
Y = np.column_stack([X[:, 0] + 0.1 * RNG.normal(size=400), 2 * np.sin(X[:, 1]),
                     X[:, 2] * X[:, 3]]).astype(np.float32)
CLASSES = (np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * RNG.normal(size=400), [-0.5, 0.5])
           ).astype(np.float32)
PER_OUTPUT = dict(multi_strategy="one_output_per_tree", depth=3)


def _outputs_held(model) -> list[list[int]]:
    """For each tree, the outputs its leaves hold a value other than 0 for."""
    values = np.asarray(model.leaf_value)
    return [np.flatnonzero(np.any(tree != 0, axis=0)).tolist() for tree in values]


def test_each_output_gets_the_trees_of_a_fit_of_that_output_alone():
    # Squared error is a sum over outputs, so output k's trees, grown from its own g and
    # h at the margins the earlier trees give, are those of a one-output fit of column k.
    kw = dict(random_strength=0.0, learning_rate=0.3, **PER_OUTPUT)
    model = jaxgbt.fit("multi_squared_error", X, Y, n_trees=12, **kw)
    assert _outputs_held(model) == [[t % 3] for t in range(12)]
    kw.pop("multi_strategy")
    for k in range(3):
        alone = jaxgbt.fit("squared_error", X, Y[:, k], n_trees=4,
                           base_score=float(np.mean(Y[:, k], dtype=np.float64)), **kw)
        np.testing.assert_array_equal(np.asarray(model.feature)[k::3], alone.feature)
        np.testing.assert_array_equal(np.asarray(model.threshold)[k::3], alone.threshold)
        np.testing.assert_allclose(np.asarray(model.leaf_value)[k::3, :, k],
                                   np.asarray(alone.leaf_value)[:, :, 0], atol=1e-6)
        np.testing.assert_allclose(np.asarray(model.predict(X))[:, k], alone.predict(X),
                                   atol=1e-5)


def test_softmax_classes_take_turns_also_in_a_continued_model():
    # The Newton leaves of a search by weights and further Newton steps set one class's
    # values too; the continued model keeps the turn where the first one left it.
    kw = dict(split_curvature="weight", leaf_newton_steps=2, **PER_OUTPUT)
    first = jaxgbt.fit("softmax", X, CLASSES, n_trees=7, **kw)
    model = jaxgbt.fit("softmax", X, CLASSES, n_trees=5, init_model=first, **kw)
    assert _outputs_held(model) == [[t % 3] for t in range(12)]
    p = np.asarray(model.predict(X), np.float64)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)

    def log_loss(p):
        return -np.mean(np.log(p[np.arange(len(p)), CLASSES.astype(int)]))

    base = np.asarray(model.first_trees(0).predict(X), np.float64)
    assert log_loss(p) < log_loss(base) - 0.2


def test_members_of_a_sweep_are_their_own_fits():
    kw = dict(n_trees=6, **PER_OUTPUT)
    many = jaxgbt.fit_many("softmax", X, CLASSES, params={"learning_rate": [0.1, 0.3]}, **kw)
    for i, rate in enumerate([0.1, 0.3]):
        alone = jaxgbt.fit("softmax", X, CLASSES, learning_rate=rate, **kw)
        np.testing.assert_array_equal(many[i].feature, alone.feature)
        np.testing.assert_array_equal(many[i].predict(X), alone.predict(X))


@two_devices
def test_rows_split_over_devices_take_the_same_turns():
    # Each device's rows mask the other outputs alike; the histograms' sums over devices
    # give the one-device trees.
    kw = dict(n_trees=6, n_bins=16, **PER_OUTPUT)
    one = jaxgbt.fit("softmax", X, CLASSES, **kw)
    every = jaxgbt.fit("softmax", X, CLASSES, devices="all", **kw)
    assert _outputs_held(every) == [[t % 3] for t in range(6)]
    np.testing.assert_array_equal(every.feature, one.feature)
    np.testing.assert_array_equal(every.threshold, one.threshold)
    np.testing.assert_allclose(every.leaf_value, one.leaf_value, rtol=1e-5, atol=1e-6)


def test_bounds_of_a_monotone_depthwise_tree_hold_its_output_alone():
    model = jaxgbt.fit("multi_squared_error", X, Y, n_trees=6, grow_policy="depthwise",
                       monotone_constraints=[1, 0, 0, 0, 0], **PER_OUTPUT)
    assert _outputs_held(model) == [[t % 3] for t in range(6)]
    grid = np.repeat(X[:50], 9, axis=0)
    grid[:, 0] = np.tile(np.linspace(-2, 2, 9, dtype=np.float32), 50)
    along = np.asarray(model.predict(grid)).reshape(50, 9, 3)
    assert np.all(np.diff(along[:, :, 0], axis=1) >= 0)


@pytest.mark.parametrize(("loss", "y", "kwargs", "match"), [
    ("logistic", (CLASSES > 0).astype(np.float32), {}, "needs a loss of several outputs"),
    ("softmax", CLASSES, {"hessian": "full"}, "hessian='full' couples"),
    ("softmax", CLASSES, {"multi_strategy": "per_class"}, "multi_strategy"),
])
def test_a_strategy_that_cannot_apply_is_refused(loss, y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxgbt.fit(loss, X, y, n_trees=2, **{**PER_OUTPUT, **kwargs})


@pytest.mark.parametrize("curvature", ["hessian", "weight"])
def test_score_noise_of_a_tree_is_scaled_as_its_output_alone(curvature):
    # Its spread from the output's g and curvature (under a search by weights, that
    # output's weights alone), its decay from the rounds of that output: those of a
    # one-output fit, whose round r // K the tree at index r is.
    import jax.numpy as jnp

    from jaxgbt import spec
    from jaxgbt.core.config import BoostConfig
    from jaxgbt.core.round import TrainData, _on_output, _with_noise
    from jaxgbt.objectives.derivatives import Derivatives

    rates = dict.fromkeys(spec.RATES, 1.0)
    params = spec.boost_params(0.3, 1.0, 0.0, 0.0, 1.0, 0.0, 0, rates, 1.0, 1.0)
    weight = jnp.asarray(RNG.uniform(0.5, 2.0, (400, 1)), jnp.float32)
    data = TrainData(bins=None, y=None, weight=weight[:, 0])
    g, h = (jnp.asarray(RNG.normal(size=(400, 3)), jnp.float32),
            jnp.asarray(RNG.uniform(0.1, 1.0, (400, 3)), jnp.float32))

    def scale(n_outputs, at, round_index, output=None, **kw):
        config = BoostConfig(loss=None, depth=3, n_bins=16, n_outputs=n_outputs,
                             score_noise=True, split_curvature=curvature, **kw)
        noisy = _with_noise(config, params, data, at, weight, jnp.int32(round_index),
                            jnp.float32(0.3), output)
        return float(noisy.split.noise.scale)

    for round_index in (2, 31):
        output = jnp.arange(3) == round_index % 3
        k = round_index % 3
        per_output = scale(3, _on_output(Derivatives(g, h), output), round_index, output,
                           one_output_per_tree=True)
        alone = scale(1, Derivatives(g[:, k:k + 1], h[:, k:k + 1]), round_index // 3)
        assert per_output == pytest.approx(alone, rel=1e-6)
