"""Tests for jaxgbt.export: serialized StableHLO that reloads without jaxgbt."""

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import zipfile
from contextlib import contextmanager

import jax
import numpy as np
import pytest
from conftest import SMALL, make_binary

import jaxgbt
from jaxgbt.io import ModelFormatError
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
    # Exports name GPU platforms by their lowering (cuda, rocm); JAX's backend is "gpu".
    backends = {"gpu" if name in ("cuda", "rocm") else name for name in exported.platforms}
    assert jax.default_backend() in backends


def test_export_rejects_bad_arguments(model_and_data, tmp_path):
    model, _ = model_and_data
    with pytest.raises(ValueError, match="method="):
        jaxgbt.export(model, tmp_path / "m", method="leaf_index")
    with pytest.raises(ValueError, match="batch_size="):
        jaxgbt.export(model, tmp_path / "m", batch_size=0)
    assert not list(tmp_path.iterdir())  # nothing half-written


# ---------------------------------------------------------------------------------------
# load_exported on damaged, foreign and hostile files. With path.json beside it (it holds
# the file's SHA-256), any change to the program is refused before jax reads it. Without
# it, the checks are jax's own reader and the signature: damaged program bytes may then
# load (a flipped bit inside the StableHLO) and even crash XLA's parser when called, so
# the variants without a description are those that jax's reader refuses or reads whole
# (truncations, empty and foreign files).

FUZZ_ROWS = 5
HANG_SECONDS = 120  # SIGALRM backstop: a hang fails the test instead of stalling CI


@pytest.fixture(scope="module")
def exported_file(model_and_data, tmp_path_factory):
    model, X = model_and_data
    folder = tmp_path_factory.mktemp("exported")
    path = jaxgbt.export(model, folder / "m.stablehlo")
    jaxgbt.save(model, folder / "m.jgbt")
    X = X[:FUZZ_ROWS]
    return {"program": path.read_bytes(), "description": (folder / "m.stablehlo.json")
            .read_bytes(), "jgbt": (folder / "m.jgbt").read_bytes(), "X": X,
            "reference": np.asarray(model.predict_raw(X))}


def _damaged(data: bytes, rng, n_cuts: int, n_flips: int, n_edits: int):
    """(name, bytes): truncations, bit flips, byte insertions and deletions of ``data``."""
    variants = [(f"cut@{cut}", data[:cut])
                for cut in np.linspace(1, len(data) - 1, n_cuts).astype(int)]
    for _ in range(n_flips):
        position, bit = int(rng.integers(len(data))), int(rng.integers(8))
        flipped = bytearray(data)
        flipped[position] ^= 1 << bit
        variants.append((f"flip@{position}.{bit}", bytes(flipped)))
    for _ in range(n_edits):
        position = int(rng.integers(len(data)))
        variants.append((f"insert@{position}", data[:position]
                         + bytes([int(rng.integers(256))]) + data[position:]))
        variants.append((f"delete@{position}", data[:position] + data[position + 1:]))
    return variants


def _foreign(exported_file, rng):
    """(name, bytes): files that are not exported programs."""
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("notes.txt", "not a model")
    return [("empty", b""), ("zip", zipped.getvalue()), ("jgbt", exported_file["jgbt"]),
            ("json", exported_file["description"]), ("text", b"hello\n" * 100),
            ("zeros", bytes(len(exported_file["program"])))] + [
        (f"random{size}", rng.bytes(size)) for size in (4, 64, len(exported_file["program"]))]


@contextmanager
def _no_hang(seconds: int):
    def on_alarm(signum, frame):
        raise AssertionError(f"load_exported or the call took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _loads_same_or_refuses(path, exported_file) -> str:
    """"loaded" when the file loads and predicts the original's margins, "refused" for a
    clear error naming the file; anything else fails."""
    try:
        exported = load_exported(path)
    except (ModelFormatError, ValueError, TypeError) as error:
        assert str(path) in str(error), error
        return "refused"
    np.testing.assert_array_equal(np.asarray(exported.call(exported_file["X"])),
                                  exported_file["reference"])
    return "loaded"


def _fuzz(exported_file, folder, seed: int, n_cuts: int, n_flips: int, n_edits: int):
    rng = np.random.default_rng(seed)
    program, description = exported_file["program"], exported_file["description"]
    path = folder / "v.stablehlo"
    sidecar = folder / "v.stablehlo.json"
    outcomes = {}
    with _no_hang(HANG_SECONDS):
        # The program damaged, its description intact: the checksum refuses every change.
        sidecar.write_bytes(description)
        for name, data in _damaged(program, rng, n_cuts, n_flips, n_edits) + _foreign(
                exported_file, rng):
            path.write_bytes(data)
            outcomes[f"program {name}"] = _loads_same_or_refuses(path, exported_file)
            assert outcomes[f"program {name}"] == "refused" or data == program, name
        # No description: truncated, empty and foreign files are refused (a cut in the
        # trailing padding loads unchanged).
        sidecar.unlink()
        for name, data in _damaged(program, rng, n_cuts, 0, 0) + _foreign(exported_file,
                                                                        rng):
            path.write_bytes(data)
            outcomes[f"alone {name}"] = _loads_same_or_refuses(path, exported_file)
        # The program intact, its description damaged: loads as before or is refused.
        path.write_bytes(program)
        for name, data in _damaged(description, rng, 4, max(4, n_flips // 8), 2):
            sidecar.write_bytes(data)
            outcomes[f"description {name}"] = _loads_same_or_refuses(path, exported_file)
    return outcomes


def test_damaged_and_foreign_files_are_refused_or_load_unchanged(exported_file, tmp_path):
    outcomes = _fuzz(exported_file, tmp_path, seed=0, n_cuts=40, n_flips=40, n_edits=10)
    assert len(outcomes) >= 150
    assert list(outcomes.values()).count("refused") >= 140


@pytest.mark.slow
def test_damaged_files_many_variants(exported_file, tmp_path):
    outcomes = _fuzz(exported_file, tmp_path, seed=1, n_cuts=400, n_flips=600, n_edits=150)
    assert len(outcomes) >= 1500


def test_load_exported_refuses_what_is_not_a_file(tmp_path):
    with pytest.raises(TypeError, match="load_exported: path must be a file path"):
        load_exported(None)
    with pytest.raises(FileNotFoundError):
        load_exported(tmp_path / "missing.stablehlo")
    with pytest.raises(ModelFormatError, match="not a regular file"):
        load_exported(tmp_path)
    with pytest.raises(ModelFormatError, match="/dev/zero.*not a regular file"):
        load_exported("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ModelFormatError, match="fifo.*not a regular file"):
        load_exported(fifo)  # a read would block forever


def test_load_exported_bounds_the_size(exported_file, tmp_path):
    path = tmp_path / "m.stablehlo"
    path.write_bytes(exported_file["program"])
    with pytest.raises(ModelFormatError, match="larger than 1000 bytes.*max_bytes="):
        load_exported(path, max_bytes=1000)
    assert load_exported(path, max_bytes=len(exported_file["program"])).in_avals


def test_description_must_match_the_program(model_and_data, tmp_path):
    model, X = model_and_data
    path = jaxgbt.export(model, tmp_path / "m.stablehlo")
    sidecar = tmp_path / "m.stablehlo.json"
    original = json.loads(sidecar.read_text())
    for change, match in [({"input": {"shape": ["n", 5], "dtype": "float32"}}, "input shape"),
                          ({"n_features": 5}, "n_features=5"),
                          ({"format": "jaxgbt.model"}, "format"),
                          ({"version": 2}, "version 2"),
                          ({"method": "leaf_index"}, "method"),
                          ({"output": {"shape": ["n", "2"]}}, "output"),
                          ({"sha256": "0" * 64}, "SHA-256")]:
        sidecar.write_text(json.dumps(original | change))
        with pytest.raises(ModelFormatError, match=match) as error:
            load_exported(path)
        assert "m.stablehlo" in str(error.value)
    sidecar.write_text("[1, 2]")
    with pytest.raises(ModelFormatError, match="not a JSON object"):
        load_exported(path)
    sidecar.unlink()  # without a description, the program's own signature is checked
    np.testing.assert_array_equal(load_exported(path).call(X[:3]), model.predict_raw(X[:3]))


@pytest.mark.parametrize("spec, match", [
    (jax.ShapeDtypeStruct((5, 3, 2), np.float32), r"input is float32 of shape \(5, 3, 2\)"),
    (jax.ShapeDtypeStruct((5, 3), np.int32), r"input is int32"),
    (jax.ShapeDtypeStruct((5, 3), np.float32), None),  # an identity: rank-2 output
])
def test_other_functions_are_refused(spec, match, tmp_path):
    exported = jax.export.export(jax.jit(lambda x: x))(spec)
    path = tmp_path / "other.stablehlo"
    path.write_bytes(exported.serialize())
    if match is None:
        # (N, F) -> (N, F) float32 has a prediction's signature: only path.json tells.
        assert load_exported(path).in_avals[0].shape == (5, 3)
        (tmp_path / "other.stablehlo.json").write_text(json.dumps({
            "format": "jaxgbt.exported", "version": 1, "method": "predict_raw",
            "input": {"shape": [5, 4], "dtype": "float32"}}))
        match = "input shape"
    with pytest.raises(ModelFormatError, match=match) as error:
        load_exported(path)
    assert "other.stablehlo" in str(error.value)


def test_functions_of_two_inputs_or_outputs_are_refused(tmp_path):
    x = jax.ShapeDtypeStruct((5, 3), np.float32)
    for name, exported, match in [
            ("two_in", jax.export.export(jax.jit(lambda a, b: a + b))(x, x), "takes 2 arrays"),
            ("two_out", jax.export.export(jax.jit(lambda a: (a[:, 0], a[:, 1])))(x),
             "returns 2 arrays")]:
        path = tmp_path / f"{name}.stablehlo"
        path.write_bytes(exported.serialize())
        with pytest.raises(ModelFormatError, match=match):
            load_exported(path)
