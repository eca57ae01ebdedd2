import numpy as np
import pytest
from conftest import SMALL, make_regression

import jaxgbt


@pytest.mark.parametrize("options", [{}, dict(subsample=0.7, colsample_bylevel=0.5)])
def test_continuing_a_model_equals_one_long_fit(options):
    X, y = make_regression(seed=61)
    whole = jaxgbt.fit("squared_error", X, y, seed=3, **options, **dict(SMALL, n_trees=20))
    first = jaxgbt.fit("squared_error", X, y, seed=3, **options, **dict(SMALL, n_trees=8))
    continued = jaxgbt.fit("squared_error", X, y, seed=3, init_model=first, **options,
                           **dict(SMALL, n_trees=12))
    assert continued.n_trees == 20
    np.testing.assert_array_equal(continued.feature, whole.feature)
    np.testing.assert_allclose(continued.leaf_value, whole.leaf_value, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(continued.predict(X), whole.predict(X), rtol=1e-5, atol=1e-5)


def test_continuing_on_new_data_and_history():
    X, y = make_regression(seed=62, n_rows=512)
    first = jaxgbt.fit("squared_error", X[:256], y[:256], eval_set=[(X[256:], y[256:])],
                       **SMALL)
    more = jaxgbt.fit("squared_error", X[256:], y[256:], init_model=first,
                      eval_set=[(X[256:], y[256:])], **SMALL)
    history = np.asarray(more.history["valid_0:rmse"])
    assert history.shape == (16,)
    np.testing.assert_allclose(history[:8], first.history["valid_0:rmse"])
    # Trained on the validation rows themselves, the second half keeps improving on them.
    assert history[-1] < history[7]


def test_init_model_must_match():
    X, y = make_regression(seed=63)
    first = jaxgbt.fit("squared_error", X, y, **SMALL)
    with pytest.raises(ValueError, match="depth: model 3 vs fit 4"):
        jaxgbt.fit("squared_error", X, y, init_model=first, **dict(SMALL, depth=4))
    with pytest.raises(ValueError, match="n_features: model 4 vs fit 3"):
        jaxgbt.fit("squared_error", X[:, :3], y, init_model=first, **SMALL)
    with pytest.raises(TypeError, match="init_model must be a jaxgbt Booster"):
        jaxgbt.fit("squared_error", X, y, init_model="model.jgbt", **SMALL)
    with pytest.raises(ValueError, match="base_score and init_model"):
        jaxgbt.fit("squared_error", X, y, init_model=first, base_score=0.0, **SMALL)
