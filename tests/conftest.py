"""Shared fixtures. Two CPU devices so that the row-sharded path runs in every test run."""

import atexit
import contextlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

# jaxgbt's own cache directory stays off: one run would load what another compiled
# (tests/test_compile_cache.py checks it in processes of its own). Instead each test run
# has a fresh directory of its own, made by its first process (under pytest-xdist, the
# one that starts the workers), named to the workers and to the processes tests start by
# the environment, and removed when that process exits (``atexit``): a program
# that one worker compiled, or compiled before its module's programs were dropped (below),
# is read back instead of compiled again. In JAX's cache, entries are written and read
# under a file lock only when a size cap is set, hence the cap (and filelock in the test
# extras): two workers may compile one program at the same time.
os.environ.setdefault("JAXGBT_COMPILATION_CACHE", "0")
RUN_CACHE_OWNER = ("JAX_COMPILATION_CACHE_DIR" not in os.environ
                   and importlib.util.find_spec("filelock") is not None)
if RUN_CACHE_OWNER:
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxgbt-test-run-xla-")
    atexit.register(shutil.rmtree, os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(16 << 30))
# The anchors (LightGBM, XGBoost, scikit-learn) wait for work by spinning their OpenMP
# threads, which takes the cores from the other test worker's compilations; sleeping
# waits change no result. Read when OpenMP starts, so set before any anchor is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# On GPUs, segment_sum adds with atomics, in an order that changes from run to run, and the
# tests compare models bit for bit: XLA's deterministic ops fix the order there
# (docs/reliability.md). XLA:CPU sums in row order already; the flag changes nothing there.
if "xla_gpu_deterministic_ops" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = " ".join(
        filter(None, [os.environ.get("XLA_FLAGS"), "--xla_gpu_deterministic_ops=true"]))

# Most of the suite's time is XLA compiling small programs, each run for milliseconds.
# XLA:CPU's loop emitters compile them in about two thirds of the time its default fusion
# emitters take (the suite: 481 s against 628 s on 2 cores), and run them 1.3-1.6x
# slower, which these programs do not feel (docs/benchmarks.md, "The test suite"). The
# suite passes under either; XLA_FLAGS=--xla_cpu_use_fusion_emitters=true runs it with
# XLA's default. The flag is checked once, in a child process, before it is set: XLA
# aborts on a flag it does not know, and later versions may drop this one.
LOOP_EMITTERS = "--xla_cpu_use_fusion_emitters=false"


def _xla_knows(flag: str) -> bool:
    env = dict(os.environ, XLA_FLAGS=" ".join(filter(None, [os.environ.get("XLA_FLAGS"), flag])),
               JAX_PLATFORMS="cpu")
    probe = "import jax.numpy as jnp; jnp.zeros(2).sum().block_until_ready()"
    try:
        return subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if ("xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", "")
        and not os.environ.get("JAXGBT_TEST_EMITTERS_CHECKED")):
    os.environ["JAXGBT_TEST_EMITTERS_CHECKED"] = "1"  # workers and children do not ask again
    if _xla_knows(LOOP_EMITTERS):
        os.environ["XLA_FLAGS"] = " ".join(filter(None, [os.environ.get("XLA_FLAGS"),
                                                         LOOP_EMITTERS]))

import jax  # noqa: E402

jax.config.update("jax_num_cpu_devices", 2)
jax.config.update("jax_numpy_rank_promotion", "raise")

import functools  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

# Each compiled XLA:CPU program holds about 20 memory maps, and Linux allows a process
# 65,530 (vm.max_map_count): the whole suite compiles more programs than that allows, and
# the compiler crashed once the maps ran out. Between modules, when the maps pass this
# count, the compiled programs are dropped (later modules compile what they need again).
MAPS_BEFORE_CLEARING = 25_000  # below fit's own threshold (engine.compile), which warns


@pytest.fixture(autouse=True, scope="module")
def _compiled_programs_within_the_map_limit():
    yield
    from jaxgbt.engine import compile as chunk_compile

    if chunk_compile.memory_maps() > MAPS_BEFORE_CLEARING:
        chunk_compile.clear_caches()


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected theirs
def pytest_collection_modifyitems(config, items):
    """A file's leading blocks run in the fast suite (``test_docs.FAST_BLOCKS``); when the
    whole file runs too (the slow suite, as in CI), its leading blocks run there, so the
    fast test is left out: the README's first block compiles several seconds of programs."""
    whole = {item.callspec.id for item in items
             if item.originalname == "test_python_blocks_run"}
    repeated = [item for item in items if item.originalname == "test_python_blocks_run"
                and ":first-" in item.callspec.id
                and item.callspec.id.split(":first-")[0] in whole]
    if repeated:
        config.hook.pytest_deselected(items=repeated)
        items[:] = [item for item in items if item not in repeated]


# The row-sharded path needs two devices of one platform: two CPU devices here, but a
# single GPU (where the default backend is that GPU) has one.
two_devices = pytest.mark.skipif(
    len(jax.devices()) < 2,
    reason=f"needs 2 devices; the default backend ({jax.default_backend()}) has 1")


def python_path() -> str:
    """PYTHONPATH for a Python subprocess that imports this checkout's jaxgbt: the
    repository first, what the test process has on PYTHONPATH after it (packages installed
    beside the interpreter's own, as on machines that carry them in a folder)."""
    return os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                         os.environ.get("PYTHONPATH")]))


def count_compilations():
    """(a list that grows by the name of each program XLA compiles, a function that stops
    it): JAX's compile-duration events, with the jitted function's name where JAX gives it."""
    compiled = []

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiled.append(kwargs.get("fun_name", "?"))

    jax.monitoring.register_event_duration_secs_listener(listener)
    return compiled, lambda: jax.monitoring.unregister_event_duration_listener(listener)


# One small shape for most fits, so compiled programs are reused across tests.
N_ROWS, N_FEATURES = 256, 4
SMALL = dict(n_trees=8, depth=3, n_bins=16)


def make_regression(seed: int = 0, n_rows: int = N_ROWS):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, N_FEATURES)).astype(np.float32)
    y = (np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n_rows)).astype(np.float32)
    return X, y


def make_binary(seed: int = 0, n_rows: int = N_ROWS):
    X, score = make_regression(seed, n_rows)
    return X, (score > np.median(score)).astype(np.float32)


# The arrays of a Booster that decide its predictions.
MODEL_ARRAYS = ("feature", "threshold", "default_left", "split_gain", "leaf_value",
                "base_score")


# On CPU, two programs that add the same numbers in the same order (rows in row order,
# whatever the blocks, padding or gathering around them) give the same bits, and the
# tests say so. An accelerator's kernels choose their summation order by shape (XLA:GPU's
# deterministic scatter sorts, its reductions split by size), so there two such programs
# agree to float32 reassociation: integers (features, bins) exactly, floats to 1e-5.
SAME_BITS = jax.default_backend() == "cpu"


def assert_same_numbers(actual, desired, err_msg=""):
    """Equal bit for bit on CPU; elsewhere integer and boolean arrays equal and float
    arrays equal to float32 reassociation (rtol 1e-5, atol 1e-5)."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    if SAME_BITS or not np.issubdtype(desired.dtype, np.floating):
        np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
    else:
        np.testing.assert_allclose(actual, desired, rtol=1e-5, atol=1e-5, err_msg=err_msg)


def assert_same_model(a, b):
    """The two models' arrays are equal bit for bit (on CPU: see assert_same_numbers)."""
    for field in MODEL_ARRAYS:
        assert_same_numbers(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.fixture
def regression_data():
    return make_regression()


@pytest.fixture
def binary_data():
    return make_binary()


@pytest.fixture(scope="module")
def wavy_data():
    """Data for constraints: increasing in x0 on average but wavy, decreasing in x1 on
    average but wavy, so an unconstrained model follows the waves and is not monotone."""
    rng = np.random.default_rng(71)
    X = rng.normal(size=(600, 4)).astype(np.float32)
    y = (X[:, 0] + 0.8 * np.sin(4 * X[:, 0]) - X[:, 1] + 0.8 * np.sin(4 * X[:, 1])
         + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=600)).astype(np.float32)
    return X, y


@functools.cache
def small_adult_model():
    """A logistic model of adult's first 400 training rows with both categorical
    encodings (one-hot and target statistics: one_hot_max_size=4), 6 trees of depth 3,
    and the first 300 test rows without their label (a pandas DataFrame: read it, do not
    change it). Cached: the serving tests (ONNX, the JSON dump) read the same model."""
    import jaxgbt
    from jaxgbt.datasets import load_adult

    train, test = load_adult()
    y = (train.pop("income") == ">50K").to_numpy(np.float32)
    model = jaxgbt.fit("logistic", train[:400], y[:400],
                       categorical_features=list(train.select_dtypes(exclude="number")),
                       one_hot_max_size=4, n_trees=6, depth=3, n_bins=32)
    return model, test.drop(columns="income")[:300]


# Real datasets that are not bundled in jaxgbt/_data (GPL and LGPL R datasets: the package
# is Apache-2.0) are read from a folder beside the repository, or from JAXGBT_SHARED_DATA.
# Where one is missing its tests skip, saying what to fetch; JAXGBT_REQUIRE_SHARED_DATA=1
# makes them fail instead, for a machine that is meant to have the data.
SHARED_DATA = Path(os.environ.get("JAXGBT_SHARED_DATA")
                   or Path(__file__).resolve().parents[2] / "shared" / "data")


EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@contextlib.contextmanager
def experiment_modules(*names: str):
    """The experiment scripts' modules ``names``, imported as the scripts import each
    other: with experiments/ first on sys.path for the block's length."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(EXPERIMENTS))
        yield tuple(importlib.import_module(name) for name in names)


def shared_data(*parts: str) -> Path:
    """The path of a file under SHARED_DATA; skips the test (or fails it, with
    JAXGBT_REQUIRE_SHARED_DATA=1) when the file is absent, saying how to get it."""
    path = SHARED_DATA.joinpath(*parts)
    if path.exists():
        return path
    message = (f"{path} is absent: {'/'.join(parts)} is not bundled (docs/anchors.md, "
               "'Data for the tests', says where it comes from); put it there or set "
               "JAXGBT_SHARED_DATA to the folder that holds it.")
    if os.environ.get("JAXGBT_REQUIRE_SHARED_DATA"):
        pytest.fail(message)
    pytest.skip(message)
