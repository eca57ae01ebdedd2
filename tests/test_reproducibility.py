"""Same data, parameters and seed give a bitwise identical model, in another process and
after a save/load round trip."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import jaxgbt

_FIT = textwrap.dedent("""
    import numpy as np
    import jaxgbt
    rng = np.random.default_rng(7)
    X = rng.normal(size=(512, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) - X[:, 1] ** 2 + rng.normal(size=512) > 0).astype(np.float32)
    weight = rng.random(512) + 0.5
    model = jaxgbt.fit("logistic", X, y, sample_weight=weight, n_trees=24, depth=4, n_bins=64,
                       learning_rate=0.3, l1=0.1, seed=5)
""")


@pytest.mark.slow
def test_a_fit_in_another_process_gives_the_same_bits(tmp_path):
    path = tmp_path / "other.jgbt"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    subprocess.run([sys.executable, "-c", _FIT + f"model.save({str(path)!r})"], env=env,
                   check=True)
    here = {}
    exec(_FIT, here)
    model, X = here["model"], here["X"]
    other = jaxgbt.load(path)
    for field in ("feature", "threshold", "default_left", "split_gain", "leaf_value",
                  "base_score"):
        np.testing.assert_array_equal(getattr(other, field), getattr(model, field), field)
    np.testing.assert_array_equal(other.predict(X), model.predict(X))
