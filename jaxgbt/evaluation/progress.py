"""What ``fit(..., verbose=1)`` shows while it trains, on stderr.

* stderr is a terminal: a tqdm bar of trees with the latest validation scores, redrawn
  after each compiled chunk of rounds; its final state (trees done, scores, the best
  round after early stopping) stays on screen when training ends.
* anything else (a CI log, a file, a notebook's captured output): plain lines, one at
  each chunk that completes another tenth of the trees, and one at the end, so a log
  gets at most about a dozen lines however many trees are trained.

Nothing needs configuring (no logging handler): ``verbose=0`` prints nothing.
"""

import sys
from typing import TextIO

from tqdm import tqdm

# Plain lines are printed at about every tenth of the trees.
PLAIN_LINES = 10


def scores_text(state) -> str:
    """The latest value of every history key of an ``EvalState``, ``set:metric=value``."""
    return ", ".join(f"{key}={values[-1]:.5g}" for key, values in state.history.items()
                     if values.size)


def stopped_text(state) -> str:
    """Where early stopping (or a callback) ended training, and the best round."""
    if state.watched is None or state.best_round is None:
        return f"stopped at round {state.rounds_done}"
    best = state.history[state.watched][state.best_round]
    return (f"stopped at round {state.rounds_done}; best round {state.best_round} "
            f"({state.watched}={best:.5g})")


class ProgressBar:
    """A tqdm bar on a terminal; ``leave=True`` keeps its last state after training,
    and a line below it says where early stopping ended training."""

    def __init__(self, n_trees: int, stream: TextIO):
        self.stream = stream
        self.bar = tqdm(total=n_trees, unit="tree", desc="jaxgbt", leave=True, file=stream,
                        dynamic_ncols=True)

    def update(self, state) -> None:
        if state.history:
            self.bar.set_postfix_str(scores_text(state), refresh=False)
        self.bar.update(state.rounds_done - self.bar.n)  # redraws (at most every 0.1 s)

    def close(self, state, stopped: bool) -> None:
        self.update(state)
        self.bar.close()
        if stopped:  # its own line: the bar's line is cut at the terminal's width
            print(f"jaxgbt: {stopped_text(state)}", file=self.stream, flush=True)


class PlainLines:
    """Lines ``jaxgbt: 48/200 trees, valid_0:logloss=0.51234`` at about every tenth of
    the trees, and a last one at the end."""

    def __init__(self, n_trees: int, stream: TextIO):
        self.n_trees, self.stream = n_trees, stream
        self.step = max(1, -(-n_trees // PLAIN_LINES))  # ceil: at most PLAIN_LINES lines
        self.next_line = self.step

    def _print(self, state, *extra: str) -> None:
        parts = [f"{state.rounds_done}/{self.n_trees} trees", scores_text(state), *extra]
        print("jaxgbt: " + ", ".join(filter(None, parts)), file=self.stream, flush=True)

    def update(self, state) -> None:
        if state.rounds_done >= self.next_line:
            self._print(state)
            self.next_line = (state.rounds_done // self.step + 1) * self.step

    def close(self, state, stopped: bool) -> None:
        self._print(state, *([stopped_text(state)] if stopped else []))


def progress_display(verbose: int, n_trees: int, stream: TextIO | None = None):
    """The display for ``verbose``: None for 0, else a bar on a terminal and plain lines
    elsewhere. ``stream`` defaults to ``sys.stderr`` as it is when called (so that a
    test's capture sees it)."""
    if not verbose:
        return None
    stream = sys.stderr if stream is None else stream
    is_terminal = getattr(stream, "isatty", lambda: False)()
    return (ProgressBar if is_terminal else PlainLines)(n_trees, stream)
