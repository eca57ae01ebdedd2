"""fit(distributed=True) over 2 and 4 local CPU processes, and the ``jaxgbt launch`` command.

The multi-process tests start ``tests/distributed_worker.py`` three times, all at once
(module fixture ``started_runs``): through ``jaxgbt launch`` as 2 processes (every case)
and as 4 (the plain case), and as 2 processes started by hand of which one dies. Each
process fits the worker's cases on its own, uneven share of the rows; the models must
equal one process's fits on all rows (raw predictions to 1e-5), which this process
computes while the others run. Each test waits for the run it reads. The 2-process run
also stops a fit after a checkpoint and resumes it, and continues a model.
"""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from conftest import python_path, two_devices

import jaxgbt
from jaxgbt.cli.launch import free_port, launch
from jaxgbt.data.binning import bins_needed, compute_thresholds, trimmed
from jaxgbt.data.distributed import (
    _column_summaries,
    check_queries_apart,
    gather_rows,
    merged_thresholds,
    thresholds_of_summaries,
)

sys.path.insert(0, str(Path(__file__).parent))
import distributed_worker as worker  # noqa: E402

WORKER = str(Path(__file__).parent / "distributed_worker.py")
# A run far above what the runs need (about 25 s here for the 2 processes), so that a hang
# fails the test.
RUN_TIMEOUT_SECONDS = 300
COMPARED = ("plain", "weighted_eval", "softmax", "depthwise_huber", "categorical",
            "lambdarank")


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": python_path()}


class _Run(NamedTuple):
    """Processes started in the background, writing into ``out`` (their output in
    ``out/log.txt``)."""

    out: Path
    processes: list[subprocess.Popen]


def _start_launch(out: Path, n_processes: int, **env) -> _Run:
    """Starts the worker as ``n_processes`` processes through ``jaxgbt launch``."""
    with (out / "log.txt").open("w") as log:  # the child writes to its own copy
        process = subprocess.Popen([sys.executable, "-m", "jaxgbt", "launch", "--processes",
                                    str(n_processes), "--", sys.executable, WORKER, str(out)],
                                   env={**_env(), **env}, stdout=log, stderr=subprocess.STDOUT)
    return _Run(out, [process])


def _start_with_a_dying_process(out: Path) -> _Run:
    """Starts the worker as 2 processes without the launcher (which would stop the
    survivor itself); process 1 exits at once, process 0's stderr goes to the log."""
    port = str(free_port())
    with (out / "log.txt").open("w") as log:  # the children write to their own copies
        return _Run(out, [subprocess.Popen(
            [sys.executable, WORKER, str(out)],
            env={**_env(), worker.DIE_ENV: "1",
                 "JAXGBT_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
                 "JAXGBT_NUM_PROCESSES": "2", "JAXGBT_PROCESS_ID": str(i)},
            stdout=subprocess.DEVNULL, stderr=log if i == 0 else subprocess.DEVNULL)
            for i in (0, 1)])


def _finished(run: _Run) -> _Run:
    """Waits for the run's processes (killing those still alive past the timeout)."""
    try:
        for process in run.processes:
            process.wait(timeout=RUN_TIMEOUT_SECONDS)
    finally:
        _kill_the_rest(run)
    return run


def _kill_the_rest(run: _Run) -> None:
    for process in run.processes:
        if process.poll() is None:
            process.kill()
        process.wait()


def _succeeded(run: _Run) -> Path:
    _finished(run)
    assert run.processes[0].returncode == 0, (run.out / "log.txt").read_text()[-4000:]
    return run.out


@pytest.fixture(scope="module")
def started_runs(tmp_path_factory) -> dict[str, _Run]:
    """The three multi-process runs, started together so that their start-up, their
    waits for each other and the dying run's heartbeat timeout overlap."""
    runs = {"two": _start_launch(tmp_path_factory.mktemp("two_processes"), 2),
            "four": _start_launch(tmp_path_factory.mktemp("four_processes"), 4,
                                  **{worker.CASES_ENV: "plain"}),
            "dying": _start_with_a_dying_process(tmp_path_factory.mktemp("dying"))}
    yield runs
    for run in runs.values():  # a test that failed early may leave some running
        _kill_the_rest(run)


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


# Each waiting fixture asks for one_process_fits after started_runs: the one-process fits
# are computed here while the other processes run.
@pytest.fixture(scope="module")
def two_process_run(started_runs, one_process_fits) -> Path:
    return _succeeded(started_runs["two"])


@pytest.fixture(scope="module")
def four_process_run(started_runs, one_process_fits) -> Path:
    return _succeeded(started_runs["four"])


@pytest.fixture(scope="module")
def dying_run(started_runs) -> _Run:
    return _finished(started_runs["dying"])


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
def test_sketched_cut_points_agree_and_stay_near_the_exact_ones(two_process_run):
    X, _, weight, _ = worker.data()
    train = X[: worker.N_ROWS - 100].copy()
    train[:worker.SPLIT][::7, 2] = np.nan
    train[worker.SPLIT:][::7, 2] = np.nan
    weight = weight[: worker.N_ROWS - 100].astype(np.float64)
    first, second = (np.load(two_process_run / f"sketched_cuts_{p}.npy") for p in (0, 1))
    np.testing.assert_array_equal(first, second)
    exact = compute_thresholds(train, 8, weight.astype(np.float32))
    sketched_columns = 0
    for f in range(X.shape[1]):
        distinct = [np.unique(part[~np.isnan(part)]).size
                    for part in np.split(train[:, f], [worker.SPLIT])]
        if max(distinct) <= 16 * 8:  # summarised exactly by both processes
            np.testing.assert_array_equal(first[f], exact[f, :first.shape[1]])
            continue
        sketched_columns += 1
        present = ~np.isnan(train[:, f])
        column = train[present, f]
        got = _mass_below(column, weight[present], first[f][np.isfinite(first[f])])
        want = _mass_below(column, weight[present], exact[f][np.isfinite(exact[f])])
        # G = 16 x 8 runs per process: 1/G of the mass, and two of the heaviest values.
        heaviest = np.unique(column, return_inverse=True)[1]
        heaviest = np.bincount(heaviest, weights=weight[present]).max() / weight[present].sum()
        assert np.abs(got - want).max() <= 1 / 128 + 2 * heaviest
    assert sketched_columns > 10


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
        assert "query id 0 of group has rows in processes 0, 1" in message


@pytest.mark.slow
def test_four_processes_train_the_one_process_model(four_process_run, one_process_fits):
    models = [np.load(four_process_run / f"plain_{p}.npy") for p in range(4)]
    cuts = [np.load(four_process_run / f"cuts_{p}.npy") for p in range(4)]
    for model, cut in zip(models[1:], cuts[1:], strict=True):
        np.testing.assert_array_equal(model, models[0])
        np.testing.assert_array_equal(cut, cuts[0])
    np.testing.assert_allclose(models[0], one_process_fits["plain"][1], rtol=0, atol=1e-5)


@pytest.mark.slow
def test_a_stopped_fit_resumes_from_its_checkpoint_and_equals_the_whole_fit(two_process_run):
    runs = [np.load(two_process_run / f"checkpoint_{p}.npy") for p in (0, 1)]
    for whole, resumed in runs:
        np.testing.assert_array_equal(resumed, whole)  # bit for bit
    np.testing.assert_array_equal(runs[0], runs[1])
    for process in (0, 1):  # every process resumed after the first chunk of 16 rounds
        assert (two_process_run / f"resumed_{process}.txt").read_text() == "16"
    # Process 0 alone wrote its path, with the margins of both processes' 500 rows.
    assert not (two_process_run / "fit_1.ckpt").exists()
    with zipfile.ZipFile(two_process_run / "fit_0.ckpt") as archive:
        header = json.loads(archive.read("header.json"))
    assert (header["n_rows"], header["rounds_done"]) == (worker.N_ROWS - 100, 24)


@pytest.mark.slow
def test_a_checkpoint_of_other_rows_in_one_process_is_refused_by_every_process(
        two_process_run):
    messages = [(two_process_run / f"other_data_{p}.txt").read_text() for p in (0, 1)]
    for message in messages:
        assert "holds a checkpoint of a different fit" in message
    assert messages[1].startswith("distributed=True, on process 0: ")


@pytest.mark.slow
def test_a_model_continued_from_margins_equals_one_process_continuing_it(two_process_run):
    first, second = (np.load(two_process_run / f"continued_{p}.npy") for p in (0, 1))
    np.testing.assert_array_equal(first, second)
    X, y, _, _ = worker.data()
    train = np.arange(worker.N_ROWS - 100)
    held_out = np.arange(worker.N_ROWS - 100, worker.N_ROWS)
    margins = worker.margins(X)
    plain = jaxgbt.load(two_process_run / "plain.jgbt")
    alone = jaxgbt.fit("logistic", X[train], y[train], init_model=plain,
                       base_margin=margins[train], eval_set=[(X[held_out], y[held_out])],
                       eval_base_margin=[margins[held_out]], **worker.SMALL)
    np.testing.assert_allclose(first, alone.predict_raw(X, base_margin=margins),
                               rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.load(two_process_run / "history_0.npy"),
                               alone.history["valid_0:logloss"], rtol=1e-5)


@pytest.mark.slow
def test_sampled_rounds_agree_across_processes(two_process_run):
    first, second = (np.load(two_process_run / f"sampled_{p}.npy") for p in (0, 1))
    np.testing.assert_array_equal(first, second)
    assert np.isfinite(first).all() and first.std() > 0


@pytest.mark.slow
def test_a_dying_process_fails_the_other_with_a_clear_error(dying_run):
    survivor, dead = dying_run.processes
    survivor_err = (dying_run.out / "log.txt").read_text()
    assert dead.returncode == 3
    assert survivor.returncode != 0
    # Two reports race: the exchange's error (ours), and JAX's client aborting the process
    # once the coordination service declares the other dead; either may come first.
    assert ("could not exchange their data" in survivor_err
            or "JAX distributed service detected fatal errors" in survivor_err)


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
    # 32 bins: at most 16 x 32 distinct values per column are summarised exactly.
    expected = compute_thresholds(X, 32, weight)
    np.testing.assert_array_equal(merged_thresholds(X, weight, 32),
                                  trimmed(expected, bins_needed(expected, 32)))


def _mass_below(column, weight, cuts):
    """The share of the weight at or below each cut."""
    return np.array([weight[column <= cut].sum() for cut in cuts]) / weight.sum()


def test_sketched_halves_cut_within_one_run_of_the_exact_cuts():
    rng = np.random.default_rng(1)
    X = np.stack([rng.normal(size=3000), rng.exponential(size=3000),
                  np.round(rng.normal(size=3000), 1)], axis=1).astype(np.float32)
    X[::9, 0] = np.nan
    weight = rng.uniform(0.5, 2, 3000)
    n_bins, points = 16, 64  # 64 runs per half: far coarser than fit's 16 per bin
    halves = [_column_summaries(X[rows], weight[rows], points)
              for rows in np.split(np.arange(3000), [1200])]
    for feature, *_ in halves:  # columns 0 and 1 sketched, column 2 (~70 values) exact
        assert np.bincount(feature, minlength=3)[:2].max() <= 2 * points
    merged = thresholds_of_summaries(
        tuple(np.concatenate(parts) for parts in zip(*halves, strict=True)), 3, n_bins)
    exact = compute_thresholds(X, n_bins, weight.astype(np.float32))
    np.testing.assert_array_equal(merged[2], exact[2])
    for f in (0, 1):
        present = ~np.isnan(X[:, f])
        got = _mass_below(X[present, f], weight[present], merged[f][np.isfinite(merged[f])])
        want = _mass_below(X[present, f], weight[present], exact[f][np.isfinite(exact[f])])
        assert got.shape == want.shape
        # Off by about half a run of each half (1/128 of the total together) and the
        # gap to the next point; measured: at most 0.41 / 64.
        assert np.abs(got - want).max() <= 1 / points


@pytest.mark.slow
def test_sketched_cuts_keep_the_auc_of_exact_cuts():
    # One process holding 20,000 continuous rows: 32 bins sketch columns of more than
    # 512 distinct values. 30 trees are far from converged, where the AUC moves by up to
    # 0.01 with one training row more or less; experiments/sketched_cuts.py measures the
    # sketch at 200,000 and 1M rows and 400 trees (within 0.00022, docs/distributed.md).
    # The cuts themselves are checked tightly above.
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30_000, 6)).astype(np.float32)
    score = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] ** 2 - 0.5
    y = (rng.random(30_000) < 1 / (1 + np.exp(-score))).astype(np.float32)
    train, test = slice(0, 20_000), slice(20_000, None)
    kwargs = dict(n_trees=30, depth=4, n_bins=32, random_strength=0.0)
    exact = jaxgbt.fit("logistic", X[train], y[train], **kwargs)
    sketched = jaxgbt.fit("logistic", X[train], y[train], distributed=True, **kwargs)
    auc = [roc_auc_score(y[test], np.asarray(m.predict(X[test]))) for m in (exact, sketched)]
    assert abs(auc[0] - auc[1]) <= 0.01, auc


@pytest.mark.parametrize("kwargs, match", [
    (dict(distributed="yes"), "distributed must be True or False"),
    (dict(distributed=True, devices="all"), "does not take devices="),
    pytest.param(dict(loss="absolute_error", distributed=True),
                 "distributed=True: loss 'absolute_error' needs all rows on one device",
                 marks=two_devices),
])
def test_distributed_refuses_what_it_does_not_support(kwargs, match):
    X, y, _, _ = worker.data()
    loss = kwargs.pop("loss", "logistic")
    with pytest.raises((TypeError, ValueError), match=match):
        jaxgbt.fit(loss, X[:100], y[:100], n_trees=2, depth=2, n_bins=8, **kwargs)


def test_one_process_distributed_ranking_is_the_plain_fit():
    # One process with 2 devices: a ranking loss keeps its queries on the first one.
    X, y, _, _ = worker.data()
    relevance, group = worker.relevance(X)[:200], np.arange(200) // worker.QUERY_ROWS
    kwargs = dict(n_trees=4, depth=2, n_bins=16, group=group)
    plain = jaxgbt.fit("lambdarank_ndcg", X[:200], relevance, **kwargs)
    alone = jaxgbt.fit("lambdarank_ndcg", X[:200], relevance, distributed=True, **kwargs)
    np.testing.assert_allclose(alone.predict_raw(X[:200]), plain.predict_raw(X[:200]),
                               atol=1e-5)


def test_query_ids_of_one_process_pass_the_check():
    check_queries_apart(np.array([3, 3, 1, 1, 7]))


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
