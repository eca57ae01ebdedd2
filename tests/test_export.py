"""Tests for jaxgbt.export: serialized StableHLO that reloads without jaxgbt."""

import json
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from conftest import SMALL, make_binary

import jaxgbt
from jaxgbt.io.export import load_exported

# Runs in a fresh interpreter: imports jax and numpy only, then checks jaxgbt never loaded.
_FRESH_PROCESS = textwrap.dedent("""
    import sys
    import jax
    import numpy as np

    X = np.load(sys.argv[1])
    for path in sys.argv[2:]:
        with open(path, "rb") as file:
            exported = jax.export.deserialize(bytearray(file.read()))
        np.save(path + ".out.npy", np.asarray(exported.call(X)))
    assert not any(name.startswith("jaxgbt") for name in sys.modules), "jaxgbt was imported"
""")


@pytest.fixture(scope="module")
def model_and_data():
    X, y = make_binary(n_rows=256)
    X = X.copy()
    X[::9, 2] = np.nan  # missing values follow default_left in the exported program too
    return jaxgbt.fit("logistic", X, y, **SMALL), X


def test_exported_predictions_identical_in_a_fresh_process(model_and_data, tmp_path):
    model, X = model_and_data
    raw_path = jaxgbt.export(model, tmp_path / "raw.stablehlo")
    prob_path = jaxgbt.export(model, tmp_path / "prob.stablehlo", method="predict")
    fixed_path = jaxgbt.export(model, tmp_path / "fixed.stablehlo", batch_size=len(X))
    np.save(tmp_path / "X.npy", X)
    subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(tmp_path / "X.npy"),
                    str(raw_path), str(prob_path), str(fixed_path)],
                   cwd=tmp_path, check=True, timeout=120)
    raw = np.asarray(model.predict_raw(X))
    np.testing.assert_array_equal(np.load(f"{raw_path}.out.npy"), raw)
    np.testing.assert_array_equal(np.load(f"{fixed_path}.out.npy"), raw)
    np.testing.assert_array_equal(np.load(f"{prob_path}.out.npy"), np.asarray(model.predict(X)))


def test_symbolic_batch_serves_any_number_of_rows(model_and_data, tmp_path):
    model, X = model_and_data
    exported = load_exported(jaxgbt.export(model, tmp_path / "m.stablehlo"))
    for rows in (1, 7, 100):
        np.testing.assert_array_equal(exported.call(X[:rows]), model.predict_raw(X[:rows]))
    fixed = load_exported(jaxgbt.export(model, tmp_path / "f.stablehlo", batch_size=7))
    with pytest.raises(ValueError, match="shape"):
        fixed.call(X[:8])


def test_sidecar_describes_the_function(model_and_data, tmp_path):
    model, _ = model_and_data
    path = jaxgbt.export(model, tmp_path / "m.stablehlo", platforms=("cpu",))
    description = json.loads((tmp_path / "m.stablehlo.json").read_text())
    assert description["format"] == "jaxgbt.exported"
    assert description["input"] == {"shape": ["n", 4], "dtype": "float32"}
    assert description["output"]["shape"] == ["n"]
    assert description["objective"] == "logistic" and description["platforms"] == ["cpu"]
    assert load_exported(path).platforms == ("cpu",)


def test_default_export_lowers_for_accelerators_too(model_and_data, tmp_path):
    model, _ = model_and_data
    exported = load_exported(jaxgbt.export(model, tmp_path / "m.stablehlo"))
    assert set(exported.platforms) >= {"cpu", "cuda", "tpu"}
    assert jax.default_backend() in exported.platforms


def test_export_rejects_bad_arguments(model_and_data, tmp_path):
    model, _ = model_and_data
    with pytest.raises(ValueError, match="method="):
        jaxgbt.export(model, tmp_path / "m", method="leaf_index")
    with pytest.raises(ValueError, match="batch_size="):
        jaxgbt.export(model, tmp_path / "m", batch_size=0)
    assert not list(tmp_path.iterdir())  # nothing half-written
