"""experiments/accuracy_suite.py's code path on a slice of one dataset: jaxgbt, one variant
of it and one anchor, the tables' columns, and bootstrap intervals that hold the point
difference. Not an accuracy check: a few shallow trees on 200 rows."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import experiment_modules

ANCHOR = next((library for library in ("lightgbm", "xgboost")
               if importlib.util.find_spec(library) is not None), None)

pytestmark = pytest.mark.skipif(ANCHOR is None, reason="neither lightgbm nor xgboost installed")


@pytest.fixture(scope="module")
def suite():
    """The experiment scripts' modules, importable as the scripts import each other."""
    with experiment_modules("accuracy_suite", "_anchors") as modules:
        yield modules


@pytest.fixture(scope="module")
def run(suite, tmp_path_factory):
    accuracy_suite, _ = suite
    cfg = accuracy_suite.load_config("accuracy_suite", argv=[
        "--set", "n_trees=4", "--set", "depth=2", "--set", "learning_rate=0.3",
        "--set", "split_seeds=[0, 1]", "--set", "n_resamples=40", "--set", "max_rows=200",
        "--set", "threads=1", "--set", 'datasets=["breast_cancer"]',
        "--set", f'anchors=["{ANCHOR}"]', "--set", "variants={l2_3 = {l2 = 3.0}}",
        "--set", 'run_variants=["l2_3"]'])
    cfg["output_dir"] = str(tmp_path_factory.mktemp("accuracy_suite"))
    return cfg, accuracy_suite.main(cfg)


def test_table_has_the_suite_columns_and_a_row_per_metric(run, suite):
    accuracy_suite, _ = suite
    _, out = run
    lines = out["table"].splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["dataset", "task", "rows x features", "metric", "jaxgbt",
                      accuracy_suite.ANCHOR_TITLES[ANCHOR], "best anchor",
                      "jaxgbt - best [95% CI]", "within noise?"]
    assert len(lines) == 2 + len(accuracy_suite.METRICS["binary"])
    assert [row["metric"] for row in out["rows"]] == ["AUC", "log loss"]
    assert {row["shape"] for row in out["rows"]} == {"200 x 30"}


def test_bootstrap_interval_holds_the_point_difference(run):
    _, out = run
    for row in out["rows"]:
        assert row["best_anchor"] == ANCHOR
        assert row["difference"] == pytest.approx(row["jaxgbt"] - row[ANCHOR])
        assert row["ci_low"] <= row["difference"] <= row["ci_high"]
        assert row["verdict"] in ("win", "tie", "loss")


def test_results_json_holds_each_split(run):
    cfg, _ = run
    saved = json.loads((Path(cfg["output_dir"]) / "results.json").read_text())
    splits = saved["results"]["breast_cancer"]["splits"]
    assert [split["seed"] for split in splits] == [0, 1]
    assert set(splits[0]["scores"]["auc"]) == {"jaxgbt", "jaxgbt l2_3", ANCHOR}


def test_variant_table_has_a_column_per_variant_and_a_summary_line(run):
    _, out = run
    table, summary = out["variants_table"].split("\n\n")
    lines = table.splitlines()
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    assert header == ["dataset", "metric", "jaxgbt defaults",
                      "l2_3: mean, - defaults [95% CI]", "l2_3 - best anchor [95% CI]"]
    assert len(lines) == 2 + 2
    assert summary.startswith("- l2_3 {'l2': 3.0}: better on ")
    assert "of 2 rows; against the best anchor better on " in summary


def test_variant_interval_holds_its_difference_to_the_defaults(run):
    _, out = run
    for row in out["rows"]:
        variant = row["variants"]["l2_3"]
        assert variant["difference"] == pytest.approx(variant["mean"] - row["jaxgbt"])
        assert variant["ci_low"] <= variant["difference"] <= variant["ci_high"]
        assert variant["verdict"] in ("win", "tie", "loss")
        assert variant["fit_s"] > 0
        against = variant["against_best"]
        assert against["difference"] == pytest.approx(variant["mean"] - row[ANCHOR])
        assert against["ci_low"] <= against["difference"] <= against["ci_high"]


def test_unknown_variant_name_and_model_seeds_below_1_are_refused(suite):
    accuracy_suite, _ = suite
    with pytest.raises(SystemExit, match=r"model_seeds = 0: give the number of fits"):
        accuracy_suite.main({"model_seeds": 0, "datasets": ["iris"]})
    with pytest.raises(SystemExit, match="not in the config's"):
        accuracy_suite.variant_names({"variants": {"l2_3": {"l2": 3.0}},
                                      "run_variants": ["l2_5"]})


def test_bootstrap_weights_resample_rows_or_whole_queries(suite):
    import _scores
    weights = _scores.bootstrap_weights(6, 5, seed=0)
    assert weights.shape == (5, 6) and np.all(weights[0] == 1)
    assert np.all(weights.sum(axis=1) == 6)
    group = np.array([0, 0, 1, 1, 1, 2])
    by_query = _scores.bootstrap_weights(6, 5, seed=0, group=group)
    assert np.all(by_query[:, 0] == by_query[:, 1]) and np.all(by_query[:, 2] == by_query[:, 4])


def test_anchor_settings_reach_the_anchor(suite):
    accuracy_suite, _ = suite
    cfg = accuracy_suite.load_config("accuracy_suite", argv=[
        "--set", "n_trees=2", "--set", "depth=2", "--set", "threads=1",
        "--set", f'anchors=["{ANCHOR}"]', "--set",
        f"anchor_settings={{{ANCHOR} = {{max_cat_to_onehot = 64}}}}"])
    X = pd.DataFrame({"x": np.arange(40.0), "c": pd.Categorical(["a", "b", "c", "d"] * 10)})
    y = np.arange(40) % 2
    model = accuracy_suite.models("binary", X, cfg)[ANCHOR]
    assert model.fit(X, y).get_params()["max_cat_to_onehot"] == 64


def test_one_hot_beside_adds_a_column_per_category_of_small_columns(suite):
    accuracy_suite, _ = suite
    X = pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0],
                      "small": pd.Categorical(["a", "b", None, "a"]),
                      "large": pd.Categorical(list("pqrs"))})
    wide = accuracy_suite.with_one_hot_beside(X, ["small", "large"], most=3)
    assert list(wide.columns) == ["x", "small", "large", "small=a", "small=b"]
    assert wide["small=a"].tolist() == [1.0, 0.0, 0.0, 1.0]  # a missing label: all 0
    assert wide["small=b"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert list(X.columns) == ["x", "small", "large"]  # the caller's frame is kept


def test_model_seeds_average_each_models_scores_over_its_seeds(suite, monkeypatch):
    # Every model is fitted once per model seed; a split's scores (test set and each
    # resample) are the means of those fits' scores, as if averaged by hand over runs
    # of one seed each.
    accuracy_suite, anchors = suite
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x": rng.normal(size=60)})
    y = (X["x"].to_numpy() + rng.normal(size=60) > 0).astype(np.float32)

    def seeded_models(task, X, cfg):
        # predictions that depend on the seed the model is built with
        seed = cfg["seed"]
        return {"jaxgbt": anchors.Model(
            lambda X, y, group: seed,
            lambda fitted, X: 1 / (1 + np.exp(-(fitted + 1) * X["x"].to_numpy())))}

    monkeypatch.setattr(accuracy_suite, "models", seeded_models)
    cfg = dict(test_fraction=0.25, n_resamples=20, threads=1, anchors=[])
    one = [accuracy_suite.run_split("binary", (X, y, None), 3, dict(cfg, seed=s))
           for s in (5, 6)]
    both = accuracy_suite.run_split("binary", (X, y, None), 3, dict(cfg, seed=5, model_seeds=2))
    for metric in ("auc", "logloss"):
        np.testing.assert_allclose(both[metric]["jaxgbt"],
                                   (one[0][metric]["jaxgbt"] + one[1][metric]["jaxgbt"]) / 2)
    assert one[0]["logloss"]["jaxgbt"][0] != one[1]["logloss"]["jaxgbt"][0]
