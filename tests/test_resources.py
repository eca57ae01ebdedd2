import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import SMALL, make_regression

import jaxgbt
from jaxgbt.engine import resources


def test_estimate_counts_each_part():
    need = resources.estimate_fit_memory(n_rows=1000, n_features=10, n_bins=256, depth=6,
                                         n_outputs=1)
    assert need.binned == 10 * 1000
    assert need.histograms == resources._HISTOGRAM_COPIES * 10 * 32 * 256 * 2 * 4
    split = resources.estimate_fit_memory(1000, 10, 256, 6, 1, n_devices=4)
    assert split.binned == 10 * 250 and split.histograms == need.histograms
    # One more level doubles the histograms; a second output doubles them too.
    assert resources.estimate_fit_memory(1000, 10, 256, 7, 1).histograms == 2 * need.histograms
    assert resources.estimate_fit_memory(1000, 10, 256, 6, 2).histograms == 2 * need.histograms
    # A sampled round's gathered rows: their bins, (g, h), row ids and slots in use.
    gathered = resources.estimate_fit_memory(1000, 10, 256, 6, 1, gathered_rows=500)
    assert gathered.rows - need.rows == 500 * (10 + 4 * 4)


def test_available_bytes_is_positive_on_this_machine():
    free = resources.available_bytes(jax.devices()[0])
    assert free is None or free > 0


@pytest.mark.parametrize("depth, pattern", [(12, "lower depth"), (1, "fewer rows")])
def test_fit_that_would_not_fit_fails_early_naming_the_parameter(monkeypatch, depth, pattern):
    X, y = make_regression(seed=31)
    budget = resources.estimate_fit_memory(len(y), X.shape[1], 16, 3, 1).total
    monkeypatch.setattr(resources, "available_bytes", lambda device: budget // 2)
    with pytest.raises(MemoryError, match=pattern):
        jaxgbt.fit("squared_error", X, y, **dict(SMALL, depth=depth))


def test_nan_gradients_name_the_loss_the_round_and_the_rows():
    X, y = make_regression(seed=32)
    y = y + 10.0

    def capped_loss(y, f):  # undefined past f = 3: sqrt of a negative number
        return 0.5 * (f - y) ** 2 + 0.01 * jnp.sqrt(3.0 - f)

    with pytest.raises(FloatingPointError,
                       match=r"loss 'custom:capped_loss' gave NaN or infinite gradients in "
                             r"round \d+ for \d+ of 256 rows"):
        jaxgbt.fit(capped_loss, X, y, base_score=0.0, learning_rate=1.0, l2=0.0, **SMALL)


def test_traced_fit_skips_host_checks_but_stays_correct():
    X, y = make_regression(seed=33)
    raw = jax.jit(lambda rate: jaxgbt.fit("squared_error", X, y, learning_rate=rate,
                                          **SMALL).predict_raw(X))(0.2)
    single = jaxgbt.fit("squared_error", X, y, learning_rate=0.2, **SMALL).predict_raw(X)
    np.testing.assert_allclose(raw, single, rtol=1e-6, atol=1e-6)
