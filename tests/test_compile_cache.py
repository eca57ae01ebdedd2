"""The persistent compilation cache: on by default in jaxgbt's directory, off on request,
and never over a directory the user chose. Each case runs in a fresh process, since JAX
reads the cache settings once, at its first compilation."""

import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import python_path

ROOT = Path(__file__).resolve().parents[1]
FIT = ("import numpy as np, jax, jaxgbt; "
       "X = np.arange(64, dtype=np.float32).reshape(32, 2); "
       "jaxgbt.fit('squared_error', X, X[:, 0], n_trees=2, depth=2, n_bins=8)"
       ".leaf_value.block_until_ready(); "
       "print(jax.config.jax_compilation_cache_dir)")


def _run(code: str, **env) -> str:
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith(("JAXGBT_", "JAX_COMPILATION"))}
    environment.update(env, PYTHONPATH=python_path())
    return subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                          text=True, env=environment, cwd=ROOT).stdout.strip()


def test_a_fit_stores_its_programs_in_jaxgbt_directory(tmp_path):
    assert _run(FIT, JAXGBT_CACHE_DIR=str(tmp_path)) == str(tmp_path)
    assert any(tmp_path.iterdir())  # the training chunk took over 0.1 s to compile


def test_opting_out_and_a_users_directory_are_respected(tmp_path):
    show = "import jax, jaxgbt; print(jax.config.jax_compilation_cache_dir)"
    assert _run(show, JAXGBT_COMPILATION_CACHE="0", JAXGBT_CACHE_DIR=str(tmp_path)) == "None"
    mine = tmp_path / "mine"
    assert _run(show, JAX_COMPILATION_CACHE_DIR=str(mine),
                JAXGBT_CACHE_DIR=str(tmp_path)) == str(mine)
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # not a directory: the cache stays off, with no warning
    assert _run(show, JAXGBT_CACHE_DIR=str(blocked / "xla")) == "None"


# A fit whose raw predictions are printed (as their bytes' digest); with "boom", tracing
# the training chunk fails, so the fit can only run a chunk an earlier process stored.
CHUNK_FIT = """
import hashlib, sys, numpy as np, jax, jaxgbt
from jaxgbt.engine import compile as compile_module
# Every program kept in JAX's cache, the eager ones traced beside the chunk too (as on a
# loaded machine, where they take over jaxgbt's threshold): hits for them must not stop
# the chunk's store.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
if "boom" in sys.argv[2]:
    def compiled_chunk(*args, **kwargs):
        raise AssertionError("the training chunk was traced")
    compile_module.compiled_chunk = compiled_chunk
if "patched" in sys.argv[2]:  # a constant the program depends on, set at run time
    import jaxgbt.core.tree
    jaxgbt.core.tree.SMALL_SEARCH_CELLS = 1
X = np.arange(96, dtype=np.float32).reshape(48, 2) % 7
loss = {"logistic": "logistic", "quantile": "quantile@0.8", "softmax_full": "softmax",
        "mine": lambda y, f: (y - f) ** 2}[sys.argv[1]]
y = (X[:, 0] > 3).astype(np.float32)
options = {}
if sys.argv[1] == "softmax_full":  # each leaf's 3 x 3 system solved by LAPACK
    y, options = X[:, 0] % 3, {"hessian": "full"}
model = jaxgbt.fit(loss, X, y, n_trees=3, depth=2, n_bins=8, **options)
print(hashlib.sha256(np.asarray(model.predict_raw(X)).tobytes()).hexdigest())
"""


def _chunk_fit(tmp_path, loss: str, boom: bool = False, patched: bool = False,
               **env) -> str:
    options = ("boom " if boom else "") + ("patched" if patched else "")
    return _run(CHUNK_FIT.replace("sys.argv[1]", repr(loss)).replace("sys.argv[2]", repr(options)),
                JAXGBT_CACHE_DIR=str(tmp_path), **env)


def test_a_later_process_runs_the_stored_chunk_without_tracing_it(tmp_path):
    chunks = tmp_path / "chunks"
    first = _chunk_fit(tmp_path, "logistic")
    stored = list(chunks.iterdir())
    assert len(stored) == 1
    assert _chunk_fit(tmp_path, "logistic", boom=True) == first
    # A module constant set at run time keys another program: the stored one is not run.
    with pytest.raises(subprocess.CalledProcessError) as failed:
        _chunk_fit(tmp_path, "logistic", boom=True, patched=True)
    assert "the training chunk was traced" in failed.value.stderr
    # A parametrised built-in is keyed by its parameter too: a new file, not a wrong one.
    _chunk_fit(tmp_path, "quantile")
    assert len(list(chunks.iterdir())) == 2
    # A file whose structures name anything but jaxgbt's NamedTuples is refused and
    # dropped; the chunk then comes from JAX's cache, and is not stored from there
    # (serialized again, such an executable lacked its kernels).
    header = json.dumps(['{"namedtuple": "os:system", "fields": [0]}', "0"]).encode()
    stored[0].write_bytes(zlib.compress(len(header).to_bytes(8, "little") + header + b"x"))
    assert _chunk_fit(tmp_path, "logistic") == first
    assert not stored[0].exists()
    # With JAX's cache emptied too, it is compiled, stored, and run from the file again.
    for program in tmp_path.glob("*-cache"):
        program.unlink()
    assert _chunk_fit(tmp_path, "logistic") == first
    assert _chunk_fit(tmp_path, "logistic", boom=True) == first


def test_a_stored_chunk_runs_in_a_later_process_with_several_devices(tmp_path):
    # A fit without a mesh runs on one device; loaded onto every device of the backend,
    # the stored chunk asked for arguments sharded over both and refused the fit's.
    flags = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                   "--xla_force_host_platform_device_count=2"]))
    first = _chunk_fit(tmp_path, "logistic", XLA_FLAGS=flags)
    assert len(list((tmp_path / "chunks").iterdir())) == 1
    assert _chunk_fit(tmp_path, "logistic", boom=True, XLA_FLAGS=flags) == first


def test_a_stored_chunk_that_calls_lapack_runs_in_a_later_process(tmp_path):
    # JAX sets up XLA:CPU's LAPACK kernels when it lowers a program that calls one; a
    # stored chunk is loaded without lowering, and its solve jumped to a null address.
    first = _chunk_fit(tmp_path, "softmax_full")
    assert len(list((tmp_path / "chunks").iterdir())) == 1
    assert _chunk_fit(tmp_path, "softmax_full", boom=True) == first


def test_a_loss_of_the_users_is_not_stored_as_a_chunk(tmp_path):
    _chunk_fit(tmp_path, "mine")
    assert not (tmp_path / "chunks").exists()
    assert any(tmp_path.iterdir())  # JAX's own cache holds its programs
