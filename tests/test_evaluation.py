import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, make_binary, make_regression

import jaxgbt
from jaxgbt import metrics


@pytest.fixture(scope="module")
def split():
    X, y = make_regression(seed=41, n_rows=512)
    return X[:256], y[:256], X[256:], y[256:]


def test_history_equals_metrics_of_staged_predictions(split, tmp_path):
    X, y, X_val, y_val = split
    model = jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val), (X, y)],
                       eval_metric=["rmse", "mae"], **dict(SMALL, n_trees=20))
    assert set(model.history) == {"valid_0:rmse", "valid_0:mae", "valid_1:rmse", "valid_1:mae"}
    staged = np.asarray(model.staged_predict_raw(X_val))
    expected = np.sqrt(np.mean((staged - y_val[None]) ** 2, axis=1))
    np.testing.assert_allclose(model.history["valid_0:rmse"], expected, rtol=1e-5)
    assert model.best_round is None  # no early stopping asked for: predict uses every tree
    np.testing.assert_array_equal(model.predict(X_val), model.predict(X_val, n_trees=20))


def test_a_shorter_fit_with_an_eval_set_compiles_nothing_new(split):
    # 40 rounds score chunks of 16, 16 and 8 trees; 24 rounds then need only programs
    # compiled for those. The new trees of each chunk are cut from the trees so far on
    # the host: eager device slices compiled one program per (length, start) pair.
    from conftest import count_compilations

    X, y, X_val, y_val = split
    options = dict(eval_set=[(X_val, y_val)], **dict(SMALL, n_trees=40))
    jaxgbt.fit("squared_error", X, y, **options)
    compiled, stop = count_compilations()
    try:
        model = jaxgbt.fit("squared_error", X, y, **{**options, "n_trees": 24})
    finally:
        stop()
    assert compiled == []
    assert len(model.history["valid_0:rmse"]) == 24


def test_early_stopping_stops_at_the_right_round_and_predicts_with_the_best():
    # Validation labels are the opposite of the training labels: the first rounds help
    # nothing, so the best round is 0 and training stops early_stopping_rounds later,
    # at the end of that chunk of 16 rounds.
    X, y = make_binary(seed=42)
    model = jaxgbt.fit("logistic", X, y, eval_set=[(X, 1 - y)], early_stopping_rounds=5,
                       **dict(SMALL, n_trees=200))
    assert int(model.best_round) == 0
    assert model.n_trees == 16
    history = np.asarray(model.history["valid_0:logloss"])
    assert np.all(np.diff(history) > 0)
    np.testing.assert_allclose(model.predict(X), model.predict(X, n_trees=1), rtol=1e-6)


def test_early_stopping_picks_the_minimum_of_a_u_shaped_curve():
    rng = np.random.default_rng(43)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    y = (X[:, 0] + rng.normal(size=600) * 2).astype(np.float32)  # mostly noise: overfits
    model = jaxgbt.fit("squared_error", X[:300], y[:300], eval_set=[(X[300:], y[300:])],
                       early_stopping_rounds=10, learning_rate=0.5,
                       **dict(SMALL, n_trees=300, depth=4))
    history = np.asarray(model.history["valid_0:rmse"])
    best = int(model.best_round)
    assert best == int(np.argmin(history)) and best < model.n_trees - 10
    assert model.n_trees < 300 and model.n_trees - 1 - best >= 10
    full = model.predict(X[300:], n_trees=model.n_trees)
    best_rmse = float(np.sqrt(np.mean((np.asarray(model.predict(X[300:])) - y[300:]) ** 2)))
    np.testing.assert_allclose(best_rmse, history[best], rtol=1e-5)
    assert best_rmse <= float(np.sqrt(np.mean((np.asarray(full) - y[300:]) ** 2)))


def test_default_metric_follows_the_objective_and_custom_losses_use_themselves(split):
    X, y, X_val, y_val = split
    assert list(jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val)],
                           **SMALL).history) == ["valid_0:rmse"]

    def my_loss(y, f):
        return 0.5 * (y - f) ** 2

    model = jaxgbt.fit(my_loss, X, y, eval_set=[(X_val, y_val)], **SMALL)
    staged = np.asarray(model.staged_predict_raw(X_val))
    np.testing.assert_allclose(model.history["valid_0:loss"],
                               np.mean(0.5 * (staged - y_val[None]) ** 2, axis=1), rtol=1e-5)


def test_callbacks_see_every_round_with_its_scores(split):
    X, y, X_val, y_val = split
    seen = []

    def record(state):
        seen.append((state.round, state.rounds_done, dict(state.scores),
                     state.history["valid_0:rmse"].copy()))

    model = jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val)], callbacks=[record],
                       **dict(SMALL, n_trees=40))
    history = np.asarray(model.history["valid_0:rmse"], np.float64)
    assert [entry[0] for entry in seen] == list(range(40))
    for round_index, rounds_done, scores, so_far in seen:
        assert rounds_done == round_index + 1
        assert scores == {"valid_0:rmse": history[round_index]}
        np.testing.assert_array_equal(so_far, history[:rounds_done])


@pytest.fixture(scope="module")
def stopped_at_round_23(split):
    X, y, X_val, y_val = split
    return jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val)],
                      callbacks=[lambda state: state.round == 23], **dict(SMALL, n_trees=64))


def test_a_callback_stopping_at_round_23_gives_the_fit_of_24_trees(split, stopped_at_round_23):
    X, y, X_val, y_val = split
    reference = jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val)],
                           **dict(SMALL, n_trees=24))
    model = stopped_at_round_23
    assert model.n_trees == 24 and model.best_round is None
    for name in ("feature", "threshold", "leaf_value", "base_score"):
        np.testing.assert_array_equal(getattr(model, name), getattr(reference, name))
    np.testing.assert_array_equal(model.history["valid_0:rmse"],
                                  reference.history["valid_0:rmse"])


@pytest.mark.parametrize("stop_round", [23, 10])
def test_a_callback_stop_keeps_the_checkpoint_consistent(split, stopped_at_round_23, tmp_path,
                                                         stop_round):
    # The stop falls inside the second chunk; the checkpoint keeps the first (16 rounds),
    # and the same fit resumes from it and stops at the same round: at 23, inside the
    # chunk it runs, and at 10, among the rounds the checkpoint held.
    X, y, X_val, y_val = split
    settings = dict(SMALL, n_trees=64, eval_set=[(X_val, y_val)], checkpoint_every=16,
                    checkpoint_path=tmp_path / "fit.ckpt")
    jaxgbt.fit("squared_error", X, y, callbacks=[lambda state: state.round == 23], **settings)
    resumed = jaxgbt.fit("squared_error", X, y,
                         callbacks=[lambda state: state.round == stop_round], **settings)
    assert resumed.n_trees == stop_round + 1
    np.testing.assert_array_equal(resumed.leaf_value,
                                  stopped_at_round_23.leaf_value[:stop_round + 1])


def test_a_callback_with_a_period_sees_the_model_so_far(split):
    X, y, _, _ = split
    seen = []

    def record(state):
        seen.append((state.round, state.model().n_trees, np.asarray(state.model().predict(X))))

    final = jaxgbt.fit("squared_error", X, y, callbacks=[jaxgbt.Callback(record, period=10)],
                       **dict(SMALL, n_trees=40))
    assert [(r, n) for r, n, _ in seen] == [(9, 10), (19, 20), (29, 30), (39, 40)]
    for _, n_trees, predicted in seen:
        np.testing.assert_array_equal(predicted, final.predict(X, n_trees=n_trees))
    with pytest.raises(ValueError, match="period must be an integer >= 1"):
        jaxgbt.Callback(record, period=0)


def test_history_is_recorded_under_vmap(split):
    X, y, X_val, y_val = split
    rates = jnp.array([0.05, 0.5])
    models = jax.vmap(lambda r: jaxgbt.fit("squared_error", X, y, learning_rate=r,
                                           eval_set=[(X_val, y_val)], **SMALL))(rates)
    history = np.asarray(models.history["valid_0:rmse"])
    assert history.shape == (2, SMALL["n_trees"])
    single = jaxgbt.fit("squared_error", X, y, learning_rate=0.5, eval_set=[(X_val, y_val)],
                        **SMALL)
    np.testing.assert_allclose(history[1], single.history["valid_0:rmse"], rtol=1e-5)


def test_ranking_eval_set_with_groups():
    rng = np.random.default_rng(44)
    X = rng.normal(size=(240, 4)).astype(np.float32)
    y = np.clip(np.round(X[:, 0] + 1), 0, 3).astype(np.float32)
    group = np.repeat(np.arange(24), 10)
    model = jaxgbt.fit("lambdarank_ndcg", X, y, group=group,
                       eval_set=[dict(X=X, y=y, group=group, name="train")], **SMALL)
    expected = metrics.ndcg_at(10)(y, model.predict(X), group=group)
    np.testing.assert_allclose(model.history["train:ndcg@10"][-1], expected, rtol=1e-5)


@pytest.mark.parametrize("arguments, error, pattern", [
    (dict(early_stopping_rounds=5), ValueError, "needs a validation set"),
    (dict(eval_set=[(np.zeros((4, 3), np.float32), np.zeros(4))]), ValueError, "3 features"),
    (dict(eval_set=["nope"]), TypeError, r"eval_set\[0\] must be"),
    (dict(eval_set=[{"X": 1}]), ValueError, "must have keys X and y"),
    (dict(eval_set=[(np.zeros((4, 4), np.float32), np.zeros(4))], eval_metric="nope"),
     ValueError, "nope"),
    (dict(callbacks=[3]), TypeError, "callbacks must be functions"),
])
def test_bad_evaluation_arguments(split, arguments, error, pattern):
    X, y, _, _ = split
    with pytest.raises(error, match=pattern):
        jaxgbt.fit("squared_error", X, y, **arguments, **SMALL)


def test_best_round_and_history_survive_save_and_load(split, tmp_path):
    X, y, X_val, y_val = split
    model = jaxgbt.fit("squared_error", X, y, eval_set=[(X_val, y_val)], learning_rate=0.9,
                       early_stopping_rounds=3, **dict(SMALL, n_trees=64))
    model.save(tmp_path / "m.jgbt")
    loaded = jaxgbt.load(tmp_path / "m.jgbt")
    assert int(loaded.best_round) == int(model.best_round)
    np.testing.assert_allclose(loaded.history["valid_0:rmse"], model.history["valid_0:rmse"])
    np.testing.assert_array_equal(loaded.predict(X_val), model.predict(X_val))
