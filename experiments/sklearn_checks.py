"""Seconds of scikit-learn's estimator checks (``check_estimator``) on jaxgbt's estimators.

Run: .venv/bin/python experiments/sklearn_checks.py [--config configs/sklearn_checks.toml]
Each check fits small data sets of new shapes, and JAX compiles the boosting program for
each new shape, so the time is mostly compilation; prints, per estimator, the checks
run, those failed (all expected, see docs/sklearn.md) and the seconds, in one process.
"""

import warnings

from _runner import load_config, output_dir, print_table, timed, write_json
from sklearn.utils.estimator_checks import check_estimator

import jaxgbt

COLUMNS = [("estimator", "estimator", ""), ("checks", "checks", "d"),
           ("failed", "failed", ""), ("seconds", "seconds", ".1f")]


def run(cfg) -> list[dict]:
    rows = []
    settings = dict(n_trees=cfg["n_trees"], depth=cfg["depth"], n_bins=cfg["n_bins"])
    for name in cfg["estimators"]:
        estimator = getattr(jaxgbt, name)(**settings)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results, seconds = timed(check_estimator, estimator, on_fail=None)
        failed = [r["check_name"] for r in results if r["status"] == "failed"]
        rows.append(dict(estimator=name, checks=len(results), failed=", ".join(failed) or "-",
                         seconds=seconds))
    print_table(rows, COLUMNS)
    return rows


if __name__ == "__main__":
    config = load_config("sklearn_checks", doc=__doc__)
    write_json(output_dir(config) / "results.json", run(config))
