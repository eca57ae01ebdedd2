"""Training speed at several git revisions: the same fits of each revision's jaxgbt, each in
a fresh process, in alternating order.

    python experiments/bench_revisions.py [--config configs/bench_revisions.toml]
        [--set 'revisions=["33e252e", "1f2e203", "HEAD"]'] [--set 'rows=[500000]']

Finds which commit made a fit slower (or faster) on the machine at hand: each revision's
``jaxgbt`` package is taken from git (``git archive REV jaxgbt``, the working tree and the
installed package left alone) into ``<output_dir>/snapshots/<commit>``, and a fresh Python
process imports it from there, fits the config's synthetic data (experiments/_synthetic.py,
the same rows for every revision) once cold and ``repeats`` times warm, and reports. The
revisions take turns, ``rounds`` times, in reversed order every other round, so that a
machine growing busier or quieter does not favour one of them. The persistent compilation
cache is off, so the first fit includes compilation.

Prints one row per process: the revision, its commit and subject, the first fit's seconds,
the best warm fit's seconds per tree, and a checksum of the model's margins on held-out rows
(equal checksums: the revisions fit the same model), then each revision's best over its
rounds. Writes results.json. The revisions must accept every setting in ``fit_settings``.

Where git cannot read the repository (the copy of the working tree on an accelerator
machine has no .git), take the snapshots beforehand with ``--set rounds=0`` (no fits) and
carry ``<output_dir>/snapshots``: its index.json maps each revision to its snapshot
(experiments/gpu_run.sh, ``STEPS=revisions REVISIONS=[...]``).
"""

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

# _runner is imported where it is used: it imports the working tree's jaxgbt, which the
# measuring process must not have loaded before the snapshot's.
ROOT = Path(__file__).resolve().parents[1]
COLUMNS = [("revision", "revision", ""), ("commit", "commit", ""), ("subject", "subject", ""),
           ("rows", "rows", ",d"), ("first fit s", "first_s", ".2f"),
           ("warm s/tree", "per_tree", ".4f"), ("margin checksum", "checksum", ".6g")]
SUBJECT_WIDTH = 60


def snapshot(revision: str, folder: Path) -> dict:
    """The commit ``revision`` names, its subject, and the folder holding its ``jaxgbt``
    package (extracted once per commit, without the bundled datasets of jaxgbt/_data).

    Where git cannot read the repository (a copy of the working tree without .git, as an
    accelerator machine may get), the revision is looked up in ``folder/index.json``,
    which each snapshot taken where git works adds to: take them there and carry
    ``folder`` along."""
    index_path = folder / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}

    def git(*args: str) -> bytes:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout

    try:
        commit = git("rev-parse", "--verify", f"{revision}^{{commit}}").decode().strip()
    except (OSError, subprocess.CalledProcessError) as error:
        if revision in index:
            return dict(index[revision], revision=revision, path=str(folder / index[revision]
                                                                     ["folder"]))
        raise RuntimeError(f"git cannot resolve revision {revision!r} here and "
                           f"{index_path} does not list it: take the snapshots where the "
                           "repository is and carry the folder") from error
    subject = git("log", "-1", "--format=%s", commit).decode().strip()
    if len(subject) > SUBJECT_WIDTH:
        subject = subject[:SUBJECT_WIDTH - 3] + "..."
    path = folder / commit[:12]
    if not (path / "jaxgbt" / "__init__.py").exists():
        path.mkdir(parents=True, exist_ok=True)
        with subprocess.Popen(["git", "archive", commit, "jaxgbt", ":(exclude)jaxgbt/_data"],
                              cwd=ROOT, stdout=subprocess.PIPE) as archive:
            with tarfile.open(fileobj=archive.stdout, mode="r|") as tar:
                tar.extractall(path, filter="data")
        if archive.returncode:
            raise RuntimeError(f"git archive {commit} jaxgbt failed")
    index[revision] = dict(commit=commit[:10], subject=subject, folder=path.name)
    index_path.write_text(json.dumps(index, indent=1))
    return dict(index[revision], revision=revision, path=str(path))


def measure(package_root: str, cfg: dict, n_rows: int) -> dict:
    """Fits in this process with the ``jaxgbt`` under ``package_root`` (call it in a fresh
    process): the first fit's seconds, the best of ``repeats`` warm fits per tree, and the
    summed margins of the held-out rows."""
    # An editable install resolves `jaxgbt` through its own finder ahead of sys.path.
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if "editable" not in repr(finder).lower()]
    sys.path.insert(0, package_root)
    import jax
    import numpy as np
    from _synthetic import higgs_like

    import jaxgbt

    if not Path(jaxgbt.__file__).resolve().is_relative_to(Path(package_root).resolve()):
        raise RuntimeError(f"imported {jaxgbt.__file__}, not the snapshot in {package_root}")
    X, y = higgs_like(n_rows + cfg["test_rows"], cfg["seed"])
    X_train, y_train, X_test = X[:n_rows], y[:n_rows], X[n_rows:]
    devices = {"first": jax.devices()[:1], "all": "all", "default": None}[cfg["devices"]]
    seconds = []
    for _ in range(1 + cfg["repeats"]):
        start = time.perf_counter()
        model = jaxgbt.fit(cfg["loss"], X_train, y_train, n_trees=cfg["n_trees"],
                           depth=cfg["depth"], devices=devices, **cfg["fit_settings"])
        jax.block_until_ready(model.leaf_value)
        seconds.append(time.perf_counter() - start)
    margins = np.asarray(model.predict_raw(X_test), np.float64)
    return dict(first_s=seconds[0], per_tree=min(seconds[1:]) / cfg["n_trees"],
                checksum=float(margins.sum()), backend=jax.default_backend())


def fresh_process(package_root: str, cfg: dict, n_rows: int) -> dict:
    env = dict(os.environ, JAXGBT_COMPILATION_CACHE="0",
               XLA_FLAGS=os.environ.get("XLA_FLAGS", "")
               + f" --xla_force_host_platform_device_count={cfg['host_devices']}")
    done = subprocess.run([sys.executable, __file__, "--one",
                           json.dumps([package_root, cfg, n_rows])],
                          capture_output=True, text=True, env=env)
    if done.returncode:
        raise RuntimeError(f"the fit with {package_root} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def best_rows(results: list[dict]) -> list[dict]:
    """Per (revision, rows): the best first fit and warm s/tree over its rounds."""
    best = {}
    for row in results:
        key = (row["revision"], row["rows"])
        if key not in best:
            best[key] = dict(row)
        else:
            best[key]["first_s"] = min(best[key]["first_s"], row["first_s"])
            best[key]["per_tree"] = min(best[key]["per_tree"], row["per_tree"])
    return list(best.values())


def main(cfg: dict) -> list[dict]:
    from _runner import output_dir, print_table, write_json

    folder = output_dir(cfg)
    snapshots = [snapshot(revision, folder / "snapshots") for revision in cfg["revisions"]]
    print(f"{cfg['loss']}, {cfg['n_trees']} trees of depth {cfg['depth']}, devices "
          f"{cfg['devices']!r}, settings {cfg['fit_settings']}", flush=True)
    print_table([], COLUMNS)
    results = []
    for n_rows in cfg["rows"]:
        for round_index in range(cfg["rounds"]):
            for shot in snapshots if round_index % 2 == 0 else snapshots[::-1]:
                row = dict(shot, rows=n_rows, round=round_index,
                           **fresh_process(shot["path"], cfg, n_rows))
                results.append(row)
                print_table([row], COLUMNS, header=False)
    print("\nBest of each revision's rounds:")
    print_table(best_rows(results), COLUMNS)
    write_json(folder / "results.json", dict(config=cfg, results=results))
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(measure(*json.loads(sys.argv[2]))))
    else:
        from _runner import load_config

        main(load_config("bench_revisions", doc=__doc__))
