"""JAX's persistent compilation cache, on by default in a user cache directory.

A fit's compiled programs (the chunk of rounds, prediction) are stored on disk, so a new
process that fits or predicts a shape seen before loads them instead of compiling again
(docs/benchmarks.md has the time saved). The cache is JAX's own; jaxgbt only points it at
a directory when the user has not configured one.

Opting out: set the environment variable ``JAXGBT_COMPILATION_CACHE=0`` before importing
jaxgbt. A directory set by the user (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)`` before the import) is left as it
is, and so is ``jax_enable_compilation_cache=False``. ``JAXGBT_CACHE_DIR`` moves jaxgbt's
directory (default ``$XDG_CACHE_HOME/jaxgbt/xla``, else ``~/.cache/jaxgbt/xla``). The
directory is not pruned (JAX's size cap needs the optional ``filelock`` package); it can be
deleted at any time.
"""

import os
from pathlib import Path

import jax

# Programs that took less than this to compile are not stored. Reading one back takes
# 1-3 ms, where the start's programs (the first margin, the first gradients' check) and
# predict's link compile in 0.02-0.07 s each: stored too (the threshold was 0.1 s), they
# took a later process's compile time from 0.28-0.33 s to 0.16-0.18 s at 2,000 x 28
# (docs/benchmarks.md, "Compile"). Below it are the eager operations of any JAX code in
# the process, which would fill the directory with files.
MIN_COMPILE_SECONDS = 0.02
OPT_OUT_VALUES = ("0", "false", "no", "off")


def default_cache_dir() -> Path:
    """Where jaxgbt keeps compiled programs unless ``JAXGBT_CACHE_DIR`` says otherwise."""
    if os.environ.get("JAXGBT_CACHE_DIR"):
        return Path(os.environ["JAXGBT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "jaxgbt" / "xla"


def enable_persistent_cache() -> Path | None:
    """Points JAX's persistent compilation cache at ``default_cache_dir()`` unless the user
    opted out or configured the cache; returns the directory in use by jaxgbt, or None.

    A directory that cannot be created or written leaves the cache off: JAX would warn on
    every compile that fails to store its program.
    """
    if os.environ.get("JAXGBT_COMPILATION_CACHE", "1").strip().lower() in OPT_OUT_VALUES:
        return None
    configured = jax.config.jax_compilation_cache_dir is not None
    if configured or not jax.config.jax_enable_compilation_cache:
        return None
    directory = default_cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(directory, os.W_OK):
        return None
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return directory
