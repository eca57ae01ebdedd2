"""fit(distributed=True) over 2 local CPU processes, and the ``jaxgbt launch`` command.

The 2-process tests start ``tests/distributed_worker.py`` through ``jaxgbt launch`` once
(module fixture): each process fits the worker's cases on its own, uneven share of the
rows; the models must equal one process's fits on all rows (raw predictions to 1e-5).
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxgbt
from jaxgbt.cli.launch import free_port, launch
from jaxgbt.data.binning import bins_needed, compute_thresholds, trimmed
from jaxgbt.data.distributed import gather_rows, merged_thresholds

sys.path.insert(0, str(Path(__file__).parent))
import distributed_worker as worker  # noqa: E402

WORKER = str(Path(__file__).parent / "distributed_worker.py")
# A run far above what 2 processes need (about 25 s here), so that a hang fails the test.
RUN_TIMEOUT_SECONDS = 300
COMPARED = ("plain", "weighted_eval", "softmax", "depthwise_huber", "categorical",
            "lambdarank")


def _env() -> dict:
    repo = str(Path(__file__).parent.parent)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [repo, *filter(None, [os.environ.get("PYTHONPATH")])])}


def _launched(out: Path, n_processes: int, **env) -> Path:
    """Runs the worker as ``n_processes`` processes through ``jaxgbt launch``."""
    done = subprocess.run([sys.executable, "-m", "jaxgbt", "launch", "--processes",
                           str(n_processes), "--", sys.executable, WORKER, str(out)],
                          env={**_env(), **env}, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_SECONDS)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory) -> Path:
    return _launched(tmp_path_factory.mktemp("distributed"), 2)


@pytest.fixture(scope="module")
def one_process_fits() -> dict:
    X, y, weight, classes = worker.data()
    train = np.arange(worker.N_ROWS - 100)
    held_out = np.arange(worker.N_ROWS - 100, worker.N_ROWS)
    fits = {}
    for name, kwargs in worker.cases(X, y, weight, classes, train, held_out).items():
        if name in COMPARED:
            model = jaxgbt.fit(kwargs.pop("loss"), kwargs.pop("X"), kwargs.pop("y"), **kwargs)
            everything = worker.with_categories(X) if name == "categorical" else X
            fits[name] = (model, np.asarray(model.predict_raw(everything)))
    return fits


@pytest.mark.slow
def test_cut_points_equal_one_process_cuts_of_all_rows(two_process_run):
    X, _, weight, _ = worker.data()
    train = X[: worker.N_ROWS - 100]
    parts = [train[: worker.SPLIT].copy(), train[worker.SPLIT:].copy()]
    for part in parts:
        part[::7, 2] = np.nan
    expected = compute_thresholds(np.concatenate(parts), 32, weight[: worker.N_ROWS - 100])
    expected = trimmed(expected, bins_needed(expected, 32))
    for process in (0, 1):
        np.testing.assert_array_equal(np.load(two_process_run / f"cuts_{process}.npy"),
                                      expected)


@pytest.mark.slow
@pytest.mark.parametrize("case", COMPARED)
def test_two_processes_train_the_one_process_model(two_process_run, one_process_fits, case):
    first, second = (np.load(two_process_run / f"{case}_{p}.npy") for p in (0, 1))
    np.testing.assert_array_equal(first, second)  # every process has the same model
    np.testing.assert_allclose(first, one_process_fits[case][1], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_a_query_split_over_processes_is_an_error_naming_it(two_process_run):
    for process in (0, 1):
        message = (two_process_run / f"split_query_{process}.txt").read_text()
        assert "query id 0 has rows in processes 0, 1" in message


@pytest.mark.slow
def test_four_processes_train_the_one_process_model(tmp_path, one_process_fits):
    _launched(tmp_path, 4, **{worker.CASES_ENV: "plain"})
    models = [np.load(tmp_path / f"plain_{p}.npy") for p in range(4)]
    cuts = [np.load(tmp_path / f"cuts_{p}.npy") for p in range(4)]
    for model, cut in zip(models[1:], cuts[1:], strict=True):
        np.testing.assert_array_equal(model, models[0])
        np.testing.assert_array_equal(cut, cuts[0])
    np.testing.assert_allclose(models[0], one_process_fits["plain"][1], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_sampled_rounds_agree_across_processes(two_process_run):
    first, second = (np.load(two_process_run / f"sampled_{p}.npy") for p in (0, 1))
    np.testing.assert_array_equal(first, second)
    assert np.isfinite(first).all() and first.std() > 0


@pytest.mark.slow
def test_a_dying_process_fails_the_other_with_a_clear_error(tmp_path):
    # Started without the launcher, which would stop the survivor itself.
    port = str(free_port())
    processes = [subprocess.Popen(
        [sys.executable, WORKER, str(tmp_path)],
        env={**_env(), worker.DIE_ENV: "1", "JAXGBT_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
             "JAXGBT_NUM_PROCESSES": "2", "JAXGBT_PROCESS_ID": str(i)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if i == 0 else subprocess.DEVNULL,
        text=True) for i in (0, 1)]
    try:
        _, survivor_err = processes[0].communicate(timeout=RUN_TIMEOUT_SECONDS)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert processes[1].returncode == 3
    assert processes[0].returncode != 0
    assert "could not exchange their data" in survivor_err


def test_one_process_distributed_fit_is_the_plain_fit():
    X, y, _, _ = worker.data()
    kwargs = dict(n_trees=4, depth=2, n_bins=16)
    plain = jaxgbt.fit("logistic", X[:200], y[:200], **kwargs)
    alone = jaxgbt.fit("logistic", X[:200], y[:200], distributed=True, **kwargs)
    np.testing.assert_allclose(alone.predict_raw(X[:200]), plain.predict_raw(X[:200]),
                               atol=1e-5)


def test_gather_rows_keeps_dtypes_and_shapes_in_one_process():
    arrays = [np.array([1.0 + 2**-40, 2.0]), np.array([[1, 2], [3, 4]], np.int8),
              np.array([True, False])]
    for before, after in zip(arrays, gather_rows(arrays), strict=True):
        assert after.dtype == before.dtype
        np.testing.assert_array_equal(after, before)


def test_merged_thresholds_in_one_process_equal_the_plain_ones():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    X[::5, 1] = np.nan
    X[:, 2] = np.round(X[:, 2])
    weight = rng.uniform(0, 2, 300).astype(np.float32)
    expected = compute_thresholds(X, 16, weight)
    np.testing.assert_array_equal(merged_thresholds(X, weight, 16),
                                  trimmed(expected, bins_needed(expected, 16)))


@pytest.mark.parametrize("kwargs, match", [
    (dict(distributed="yes"), "distributed must be True or False"),
    (dict(distributed=True, devices="all"), "does not take devices="),
    (dict(distributed=True, checkpoint_path="x.ckpt"), "does not take checkpoint_path"),
    (dict(distributed=True, base_margin=np.zeros(100, np.float32)), "does not take base_margin"),
    (dict(loss="absolute_error", distributed=True),  # 2 CPU devices in tests
     "distributed=True: loss 'absolute_error' needs all rows on one device"),
])
def test_distributed_refuses_what_it_does_not_support(kwargs, match):
    X, y, _, _ = worker.data()
    loss = kwargs.pop("loss", "logistic")
    with pytest.raises((TypeError, ValueError), match=match):
        jaxgbt.fit(loss, X[:100], y[:100], n_trees=2, depth=2, n_bins=8, **kwargs)


def test_launch_sets_each_process_environment_and_returns_zero(tmp_path):
    script = (f"import os, pathlib; e = os.environ; pathlib.Path(r'{tmp_path}', "
              "e['JAXGBT_PROCESS_ID']).write_text(e['JAXGBT_NUM_PROCESSES'] + ' ' + "
              "e['JAXGBT_COORDINATOR_ADDRESS'])")
    assert launch([sys.executable, "-c", script], 3) == 0
    seen = sorted(p.name for p in tmp_path.iterdir())
    assert seen == ["0", "1", "2"]
    assert len({p.read_text() for p in tmp_path.iterdir()}) == 1
    assert (tmp_path / "0").read_text().startswith("3 127.0.0.1:")


def test_launch_stops_the_others_and_returns_the_failure():
    script = ("import os, sys, time\n"
              "if os.environ['JAXGBT_PROCESS_ID'] == '1': sys.exit(7)\n"
              "time.sleep(600)")
    assert launch([sys.executable, "-c", script], 2, grace_seconds=2.0) == 7


def test_launch_refuses_no_command():
    with pytest.raises(ValueError, match="needs a command"):
        launch([], 2)


def test_initialize_reads_a_bad_process_count_with_a_clear_error(monkeypatch):
    monkeypatch.setenv(jaxgbt.distributed.NUM_PROCESSES_ENV, "two")
    with pytest.raises(ValueError, match="JAXGBT_NUM_PROCESSES='two' is not an integer"):
        jaxgbt.distributed.initialize("127.0.0.1:1")
