"""How much the quantile sketch of ``fit(distributed=True)`` moves a model: test AUC of
fits across processes against one process's fit on all rows.

    python experiments/sketched_cuts.py [--config configs/sketched_cuts.toml]
        [--quick] [--set key=value]

For each (rows, seed) case, HIGGS-like rows (experiments/_synthetic.py, 28 features of
which 25 are continuous) are fitted four ways, all with the same settings:

  one process     ``fit("logistic", X, y)`` on all rows. Up to 200,000 rows it cuts
                  every row (exact cuts); above, a random sample of 200,000 rows
                  (``binning.MAX_BINNING_ROWS``), which is what a user gets.
  one row fewer   the same without the first training row: how far the test AUC moves
                  when the data moves by one row, the floor below which a difference
                  says nothing about the cuts.
  sketched, 1     ``fit(..., distributed=True)`` in this process alone: every column of
                  more than 16 distinct values per bin is summarised by the weighted
                  quantile sketch, then cut (no other process to merge with).
  sketched, P     P processes started by ``jaxgbt launch``, each holding 1/P of the rows,
                  ``fit(..., distributed=True)``: every process sketches its rows, the
                  sketches are merged, and the model is trained across the processes.

Printed per case: each model's test AUC, its difference to the one-process
model with a paired bootstrap interval over the test rows, and the largest difference
in raw predictions. Public jaxgbt API only.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _runner import load_config, output_dir, print_table, write_json
from _scores import auc, bootstrap_weights, percentile_interval, resampled_scores
from _synthetic import higgs_like

WORKER_FLAG = "--worker"


def fit_kwargs(cfg: dict) -> dict:
    return dict(n_trees=cfg["n_trees"], depth=cfg["depth"], n_bins=cfg["n_bins"],
                learning_rate=cfg["learning_rate"])


def worker(job_path: Path) -> None:
    """One launched process: fits on its share of the rows; process 0 saves the model."""
    import jax

    import jaxgbt

    jaxgbt.distributed.initialize()
    job = json.loads(job_path.read_text())
    X, y = higgs_like(job["rows"], job["seed"])
    mine = np.array_split(np.arange(len(y)), jax.process_count())[jax.process_index()]
    model = jaxgbt.fit("logistic", X[mine], y[mine], distributed=True, **fit_kwargs(job))
    if jax.process_index() == 0:
        model.save(job["model_path"])


def launched_model(cfg: dict, rows: int, seed: int, folder: Path):
    """The model that `processes` launched processes train on `rows` rows of `seed`."""
    import jaxgbt

    job_path, model_path = folder / "job.json", folder / "model.jgbt"
    job_path.write_text(json.dumps(dict(cfg, rows=rows, seed=seed, model_path=str(model_path))))
    command = [sys.executable, "-m", "jaxgbt", "launch", "--processes", str(cfg["processes"]),
               "--", sys.executable, __file__, WORKER_FLAG, str(job_path)]
    subprocess.run(command, check=True, timeout=cfg["run_timeout_s"])
    return jaxgbt.load(model_path)


def compare(cfg: dict, rows: int, seed: int, folder: Path) -> list[dict]:
    """One dataset: the three models' AUCs and their differences to the one-process fit."""
    import jaxgbt

    X, y = higgs_like(rows, seed)
    X_test, y_test = higgs_like(cfg["test_rows"], seed + 1000)
    models = {"one process": jaxgbt.fit("logistic", X, y, **fit_kwargs(cfg)),
              "one row fewer": jaxgbt.fit("logistic", X[1:], y[1:], **fit_kwargs(cfg)),
              "sketched, 1 process": jaxgbt.fit("logistic", X, y, distributed=True,
                                                **fit_kwargs(cfg)),
              f"sketched, {cfg['processes']} processes": launched_model(cfg, rows, seed, folder)}
    raw = {name: np.asarray(model.predict_raw(X_test), np.float64)
           for name, model in models.items()}
    weights = bootstrap_weights(len(y_test), cfg["n_resamples"], seed)
    resampled = {name: resampled_scores("auc", y_test, margin, weights)
                 for name, margin in raw.items()}
    reference = "one process"
    out = []
    for name, margin in raw.items():
        low, high = percentile_interval(resampled[name] - resampled[reference])
        out.append(dict(rows=rows, seed=seed, model=name, auc=auc(y_test, margin),
                        auc_difference=auc(y_test, margin) - auc(y_test, raw[reference]),
                        low=low, high=high,
                        max_raw_difference=float(np.abs(margin - raw[reference]).max())))
    return out


def main() -> None:
    cfg = load_config("sketched_cuts", doc=__doc__)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for rows, seed in cfg["cases"]:
            results += compare(cfg, rows, seed, Path(folder))
            print(f"rows {rows:,} seed {seed} done", file=sys.stderr, flush=True)
    print(f"\nHIGGS-like data, 28 features; logistic, {cfg['n_trees']} trees of depth "
          f"{cfg['depth']}, {cfg['n_bins']} bins; {cfg['test_rows']:,} test rows; AUC "
          f"difference to the one-process fit with its {cfg['n_resamples']}-resample "
          "95% interval:")
    print_table(results, [("rows", "rows", ","), ("seed", "seed", "d"), ("model", "model", ""),
                          ("test AUC", "auc", ".5f"), ("AUC diff", "auc_difference", "+.5f"),
                          ("low", "low", "+.5f"), ("high", "high", "+.5f"),
                          ("max |raw diff|", "max_raw_difference", ".3f")])
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, rows=results))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == WORKER_FLAG:
        worker(Path(sys.argv[2]))
    else:
        main()
