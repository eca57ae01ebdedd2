"""experiments/bench_revisions.py's snapshots of past revisions: the package taken from git
without touching the working tree, and found again where git cannot read the repository
(a copy of the tree without .git, as on an accelerator machine). The timing itself is a
benchmark, not run here."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import EXPERIMENTS, experiment_modules


def _in_git_repository() -> bool:
    if shutil.which("git") is None:
        return False
    done = subprocess.run(["git", "rev-parse", "--verify", "HEAD^{commit}"],
                          cwd=EXPERIMENTS.parent, capture_output=True)
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _in_git_repository(),
                                reason="needs the project's git repository")


@pytest.fixture(scope="module")
def bench_revisions():
    with experiment_modules("bench_revisions") as (module,):
        yield module


def test_a_snapshot_holds_the_revisions_package_and_is_found_again_without_git(
        bench_revisions, tmp_path, monkeypatch):
    folder = tmp_path / "snapshots"
    shot = bench_revisions.snapshot("HEAD", folder)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=bench_revisions.ROOT, check=True,
                            capture_output=True, text=True).stdout.strip()
    assert shot["commit"] == commit[:10]
    package = Path(shot["path"]) / "jaxgbt"
    committed = subprocess.run(["git", "show", f"{commit}:jaxgbt/__init__.py"],
                               cwd=bench_revisions.ROOT, check=True, capture_output=True).stdout
    assert (package / "__init__.py").read_bytes() == committed
    assert (package / "core" / "tree.py").exists()
    assert not (package / "_data").exists()  # the bundled datasets are left out
    assert json.loads((folder / "index.json").read_text())["HEAD"]["commit"] == commit[:10]

    # Without a repository, the revision comes from the index; an unknown one is an error.
    monkeypatch.setattr(bench_revisions, "ROOT", tmp_path)
    assert bench_revisions.snapshot("HEAD", folder) == shot
    with pytest.raises(RuntimeError, match="does not list it"):
        bench_revisions.snapshot("HEAD~1", folder)


def test_best_rows_keeps_each_revisions_fastest_round(bench_revisions):
    rows = [dict(revision="a", rows=10, first_s=3.0, per_tree=0.2),
            dict(revision="b", rows=10, first_s=2.0, per_tree=0.3),
            dict(revision="a", rows=10, first_s=4.0, per_tree=0.1),
            dict(revision="a", rows=20, first_s=5.0, per_tree=0.5)]
    best = bench_revisions.best_rows(rows)
    assert [(r["revision"], r["rows"], r["first_s"], r["per_tree"]) for r in best] == [
        ("a", 10, 3.0, 0.1), ("b", 10, 2.0, 0.3), ("a", 20, 5.0, 0.5)]
    assert rows[0]["per_tree"] == 0.2  # the rows passed in are not changed
