"""Killing a process while it saves a model leaves a whole model at the path.

``save`` writes a temporary file in the target's folder, fsyncs it and renames it over the
target, so a writer killed at any moment leaves either the previous model or the complete
new one. SIGKILL allows no cleanup, so a ``.jaxgbt-*.tmp`` may be left next to the target;
that is allowed. (A power cut, which the fsync is for, cannot be simulated here.)
"""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import N_FEATURES, SMALL, make_binary, python_path

import jaxgbt
from jaxgbt.model import Booster

REPO = Path(__file__).resolve().parents[1]
KILLS = 5
SEED = 20261123

# Loads the large model, says so, then saves it over and over until killed.
WRITER = """
import sys
import jaxgbt
model = jaxgbt.load(sys.argv[1])
print("ready", flush=True)
while True:
    model.save(sys.argv[2])
    print("saved", flush=True)
"""


def _large_model(n_trees: int = 20_000, depth: int = 6) -> Booster:
    """A valid model big enough (about 6 MB) that one save takes a good fraction of a second.
    Random arrays stand in for a long fit: save and load do not care how a model was made."""
    rng = np.random.default_rng(SEED)
    per_level = (n_trees, depth)
    return Booster(
        feature=jnp.asarray(rng.integers(0, N_FEATURES, per_level), jnp.int32),
        threshold=jnp.asarray(rng.normal(size=per_level), jnp.float32),
        default_left=jnp.asarray(rng.random(per_level) < 0.5),
        split_gain=jnp.asarray(rng.random(per_level), jnp.float32),
        leaf_value=jnp.asarray(0.01 * rng.normal(size=(n_trees, 2**depth, 1)), jnp.float32),
        base_score=jnp.zeros(1, jnp.float32),
        objective=jaxgbt.objectives.logistic, n_features=N_FEATURES)


@pytest.mark.slow  # 6 to 15 s: five writer processes, each importing jax
def test_sigkill_during_save_leaves_the_old_or_the_new_model(tmp_path):
    X, y = make_binary()
    old = jaxgbt.fit("logistic", X, y, **SMALL)
    source = tmp_path / "new.jgbt"
    _large_model().save(source)
    started = time.perf_counter()
    jaxgbt.load(source).save(tmp_path / "timed.jgbt")
    save_seconds = time.perf_counter() - started
    expected = {"old": np.asarray(old.predict_raw(X)),
                "new": np.asarray(jaxgbt.load(source).predict_raw(X))}
    assert not np.array_equal(expected["old"], expected["new"])

    folder = tmp_path / "target"
    folder.mkdir()
    target = folder / "model.jgbt"
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               PYTHONPATH=python_path())
    rng = random.Random(SEED)
    outcomes = []
    for _ in range(KILLS):
        old.save(target)
        for leftover in folder.glob(".jaxgbt-*.tmp"):
            leftover.unlink()
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(source), str(target)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=env)
        try:
            if writer.stdout.readline() != "ready\n":
                writer.kill()
                _, errors = writer.communicate()
                raise AssertionError(f"the writer did not start:\n{errors}")
            # From before the first save starts to well into the third.
            time.sleep(rng.uniform(0.0, 2.5 * save_seconds))
            os.kill(writer.pid, signal.SIGKILL)
            output, _ = writer.communicate(timeout=30)
        finally:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
        assert writer.returncode == -signal.SIGKILL
        completed = output.count("saved")

        names = sorted(path.name for path in folder.iterdir())
        leftovers = [name for name in names
                     if name.startswith(".jaxgbt-") and name.endswith(".tmp")]
        assert [name for name in names if name not in leftovers] == ["model.jgbt"], names
        raw = np.asarray(jaxgbt.load(target).predict_raw(X))
        matches = [name for name, margins in expected.items() if np.array_equal(raw, margins)]
        assert matches, "the file at the target is a valid model, but neither the old nor the new"
        if completed:  # a save returned, so the rename had happened
            assert matches == ["new"]
        outcomes.append(f"{matches[0]} after {completed} saves, {len(leftovers)} temporary left")
    # The kills are timed at random, so which outcomes occur is shown (pytest -rP), not asserted.
    print("\n".join(outcomes))
