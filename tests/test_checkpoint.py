import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
from conftest import SMALL, assert_same_model, make_regression, python_path

import jaxgbt
from jaxgbt.io import ModelFormatError


def test_resumed_fit_equals_an_uninterrupted_one(tmp_path):
    X, y = make_regression(seed=21)
    arguments = dict(SMALL, n_trees=40)
    whole = jaxgbt.fit("squared_error", X, y, **arguments)
    path = tmp_path / "fit.ckpt"
    # A fit stopped after 20 rounds leaves a checkpoint at round 20; the 40-round fit
    # with the same data and parameters continues from it.
    jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
               **dict(arguments, n_trees=20))
    with zipfile.ZipFile(path) as archive:  # the format name files were written with
        assert json.loads(archive.read("header.json"))["format"] == "jaxgbt.checkpoint"
    resumed = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
                         **arguments)
    assert_same_model(resumed, whole)


def test_checkpoint_of_another_fit_is_refused(tmp_path):
    X, y = make_regression(seed=22)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)
    with pytest.raises(ValueError, match="checkpoint of a different fit"):
        jaxgbt.fit("squared_error", X, y, l2=5.0, checkpoint_path=path, **SMALL)
    with pytest.raises(ValueError, match="checkpoint of a different fit"):
        jaxgbt.fit("squared_error", X, y + 1, checkpoint_path=path, **SMALL)


def test_corrupted_checkpoint_is_refused(tmp_path):
    X, y = make_regression(seed=23)
    path = tmp_path / "fit.ckpt"
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ModelFormatError, match="not a valid jaxgbt checkpoint"):
        jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)


def _edit_checkpoint(path, edit_header=None, edit_arrays=None) -> None:
    """Rewrites the checkpoint at ``path`` in place, as a zip tool would: new CRCs, the
    header's checksums left as they were."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    header = json.loads(members["header.json"])
    if edit_header:
        edit_header(header)
    members["header.json"] = json.dumps(header).encode()
    for name, edit in (edit_arrays or {}).items():
        array = np.load(io.BytesIO(members[f"{name}.npy"]))
        buffer = io.BytesIO()
        np.save(buffer, edit(array))
        members[f"{name}.npy"] = buffer.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_checkpoint_edited_on_disk_is_refused(tmp_path):
    X, y = make_regression(seed=25)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)
    _edit_checkpoint(path, edit_arrays={"raw": lambda raw: np.full_like(raw, 1e30)})
    with pytest.raises(ModelFormatError, match=r"fit\.ckpt .*raw\.npy does not match its "
                                               r"SHA-256"):
        jaxgbt.fit("squared_error", X, y, checkpoint_path=path, **SMALL)


def test_version_1_checkpoint_without_checksums_resumes(tmp_path):
    X, y = make_regression(seed=26)
    arguments = dict(SMALL, n_trees=40)
    whole = jaxgbt.fit("squared_error", X, y, **arguments)
    path = tmp_path / "fit.ckpt"
    jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
               **dict(arguments, n_trees=20))
    # A version 1 checkpoint is a version 2 one without the header's sha256 field.
    _edit_checkpoint(path, lambda header: (header.pop("sha256"), header.update(version=1)))
    resumed = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
                         **arguments)
    assert_same_model(resumed, whole)


def test_checkpoint_inside_vmap_is_refused(tmp_path):
    import jax
    import jax.numpy as jnp

    X, y = make_regression(seed=24)
    with pytest.raises(ValueError, match="cannot be used inside jax.vmap"):
        jax.vmap(lambda r: jaxgbt.fit("squared_error", X, y, learning_rate=r,
                                      checkpoint_path=tmp_path / "c", **SMALL).leaf_value)(
            jnp.array([0.1, 0.2]))


_DATA = textwrap.dedent("""
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 6)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + rng.normal(size=2000) * 0.1).astype(np.float32)
""")
_TRAINER = _DATA + textwrap.dedent("""
    import pathlib
    import sys
    import time
    import jaxgbt

    def pause_in_the_third_chunk(state):
        # Chunks 1 and 2 are saved; chunk 3's save waits on this callback, which
        # tells the test it is here and sleeps until the process is killed.
        if state.rounds_done == 40:
            pathlib.Path(sys.argv[3]).touch()
            time.sleep(600)

    jaxgbt.fit("squared_error", X, y, n_trees=int(sys.argv[2]), depth=4, n_bins=32,
               checkpoint_path=sys.argv[1], checkpoint_every=16,
               callbacks=[pause_in_the_third_chunk])
""")


@pytest.mark.slow
def test_killed_training_process_resumes_to_the_same_model(tmp_path):
    """A training process is killed (SIGKILL) after its first checkpoints; the fit
    resumed from the last checkpoint equals an uninterrupted fit bit for bit."""
    script = tmp_path / "train.py"
    script.write_text(_TRAINER)
    path, paused = tmp_path / "run.ckpt", tmp_path / "paused"
    # The kill comes while the process is held inside its third chunk (a callback that
    # sleeps), after two saved checkpoints: no race with the speed of training.
    n_trees = 96
    env = dict(os.environ, PYTHONPATH=python_path())
    process = subprocess.Popen([sys.executable, str(script), str(path), str(n_trees),
                                str(paused)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not paused.exists():
            assert process.poll() is None, "the training process ended before its pause"
            assert time.monotonic() < deadline, "no pause within 120 s"
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL, "the process finished before it was killed"

    with zipfile.ZipFile(path) as archive:
        rounds_done = json.loads(archive.read("header.json"))["rounds_done"]
    assert rounds_done == 32

    data = {}
    exec(_DATA, data)  # the same data, in this process
    X, y = data["X"], data["y"]

    arguments = dict(n_trees=n_trees, depth=4, n_bins=32)
    resumed = jaxgbt.fit("squared_error", X, y, checkpoint_path=path, checkpoint_every=16,
                         **arguments)
    whole = jaxgbt.fit("squared_error", X, y, **arguments)
    assert_same_model(resumed, whole)
