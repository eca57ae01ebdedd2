"""What verbose=1 shows (jaxgbt.evaluation.progress): a bar that stays on a terminal,
plain lines elsewhere, nothing at verbose=0."""

import io
import re

import numpy as np
import pytest
from conftest import SMALL, make_binary

import jaxgbt
from jaxgbt.evaluation.evaluator import EvalState
from jaxgbt.evaluation.progress import PlainLines, ProgressBar, progress_display


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _state(rounds_done: int, best_round=None) -> EvalState:
    curve = np.linspace(0.7, 0.5, rounds_done)
    return EvalState(rounds_done, {"valid_0:logloss": curve}, best_round, "valid_0:logloss")


def test_verbose_picks_a_bar_on_a_terminal_and_lines_elsewhere():
    assert progress_display(0, 100, Terminal()) is None
    assert isinstance(progress_display(1, 100, Terminal()), ProgressBar)
    assert isinstance(progress_display(1, 100, io.StringIO()), PlainLines)


def test_the_bar_keeps_its_last_line_with_the_scores():
    stream = Terminal()
    bar = progress_display(1, 48, stream)
    for done in (16, 32):
        bar.update(_state(done))
    bar.close(_state(48), stopped=False)
    last = stream.getvalue().split("\r")[-1]  # what stays on screen
    assert "48/48" in last and "valid_0:logloss=0.5" in last
    assert last.endswith("\n")  # left in place (leave=True), not erased


def test_plain_lines_come_at_each_tenth_and_at_the_end():
    stream = io.StringIO()
    lines = progress_display(1, 200, stream)
    for done in range(16, 200, 16):
        lines.update(_state(done))
    lines.close(_state(200), stopped=False)
    printed = stream.getvalue().splitlines()
    # a line per chunk that completes another 20 trees (200 / 10), and the last
    assert [int(re.match(r"jaxgbt: (\d+)/200 trees", line)[1]) for line in printed] == [
        32, 48, 64, 80, 112, 128, 144, 160, 192, 200]
    assert printed[-1] == "jaxgbt: 200/200 trees, valid_0:logloss=0.5"


def test_plain_lines_say_where_training_stopped():
    stream = io.StringIO()
    lines = progress_display(1, 1000, stream)
    lines.close(_state(64, best_round=10), stopped=True)
    assert stream.getvalue() == ("jaxgbt: 64/1000 trees, valid_0:logloss=0.5, stopped at "
                                 "round 64; best round 10 (valid_0:logloss=0.66825)\n")


def test_the_bar_says_where_training_stopped_on_a_line_of_its_own():
    stream = Terminal()
    bar = progress_display(1, 1000, stream)
    bar.close(_state(64, best_round=10), stopped=True)
    assert stream.getvalue().endswith(
        "\njaxgbt: stopped at round 64; best round 10 (valid_0:logloss=0.66825)\n")


@pytest.fixture(scope="module")
def binary():
    X, y = make_binary(seed=7)
    return X[:192], y[:192], X[192:], y[192:]


@pytest.mark.parametrize("verbose", [0, 1])
def test_fit_prints_progress_only_when_verbose(binary, verbose, capfd):
    X, y, X_val, y_val = binary
    jaxgbt.fit("logistic", X, y, eval_set=[(X_val, y_val)], verbose=verbose,
               **dict(SMALL, n_trees=32))
    out, err = capfd.readouterr()
    assert out == ""
    if verbose:  # stderr is captured, not a terminal: plain lines
        assert re.fullmatch(r"jaxgbt: 16/32 trees, valid_0:logloss=[0-9.]+\n"
                            r"jaxgbt: 32/32 trees, valid_0:logloss=[0-9.]+\n", err), err
    else:
        assert err == ""
