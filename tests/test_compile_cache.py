"""The persistent compilation cache: on by default in jaxgbt's directory, off on request,
and never over a directory the user chose. Each case runs in a fresh process, since JAX
reads the cache settings once, at its first compilation."""

import os
import subprocess
import sys
from pathlib import Path

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
