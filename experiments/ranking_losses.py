"""Ranking losses compared: jaxgbt's built-in ranking losses (and LambdaRank without its
per-query scale) on LightGBM's ranking example and on ranking sets built from real data.

Run: .venv/bin/python experiments/ranking_losses.py [--quick] [--set key=value]

Datasets: ``lightgbm_rank`` (LightGBM's lambdarank example, as the accuracy suite reads
it) and the config's ``[built]`` sets: an accuracy-suite dataset's rows in a seeded random
order, cut into queries of consecutive rows, with graded relevance from the label (its
quantile grade, or a count capped). Every loss fits the same splits (by whole queries,
one per split seed) with the same budget and jaxgbt's defaults otherwise; each split's
test queries are resampled (paired bootstrap, the accuracy suite's), and each loss is
compared with the first of ``losses``: the mean metric over the splits, the difference
and its interval, "better"/"worse" where the interval lies on one side of 0. Prints one
markdown table (docs/objectives.md) and writes results.json.
"""

import time

import jax
import jax.numpy as jnp
import numpy as np
from _anchors import categorical_columns
from _runner import (
    ROOT,
    format_table,
    load_config,
    output_dir,
    random_split,
    read_dataset,
    write_json,
)
from _scores import bootstrap_weights, percentile_interval, resampled_scores

import jaxgbt
from jaxgbt.config_files import read_config


def lambdarank_ndcg_unscaled(y, f, mask):
    """LambdaRank without the query scale: pairwise logistic losses weighted by |delta
    NDCG| of swapping the pair in the ranking by f (held constant), the form jaxgbt's
    ``lambdarank_ndcg`` had before it took XGBoost's and LightGBM's scale."""
    score = jnp.where(mask, f, -jnp.inf)
    discount = 1.0 / jnp.log2(jnp.argsort(jnp.argsort(-score)) + 2.0)
    gain = jnp.where(mask, 2.0**y - 1.0, 0.0)
    ideal = jnp.sum(jnp.sort(gain)[::-1] / jnp.log2(jnp.arange(gain.shape[0]) + 2.0))
    weight = jnp.abs((gain[:, None] - gain[None, :]) * (discount[:, None] - discount[None, :]))
    pairs = mask[:, None] & mask[None, :] & (y[:, None] > y[None, :])
    weight = jax.lax.stop_gradient(jnp.where(pairs, weight, 0.0) / jnp.maximum(ideal, 1e-9))
    return jnp.sum(weight * jnp.logaddexp(0.0, -(f[:, None] - f[None, :])))


# name -> fit keyword arguments besides the data and budget
CUSTOM = {"lambdarank_ndcg_unscaled": dict(loss=lambdarank_ndcg_unscaled, hessian="exact")}


def built_dataset(spec: dict, suite: dict):
    """(X, relevance f32[N], query ids i32[N]) of a ``[built]`` set."""
    X, y, _ = read_dataset(suite["data"][spec["source"]])
    order = np.random.default_rng(spec["shuffle_seed"]).permutation(len(y))
    order = order[:spec.get("max_rows") or len(y)]
    X, y = X.iloc[order].reset_index(drop=True), y[order]
    if "grades" in spec:
        cuts = np.quantile(y, np.linspace(0, 1, spec["grades"] + 1)[1:-1])
        relevance = np.searchsorted(cuts, y, side="right")
    else:
        relevance = np.minimum(y, spec["cap"])
    queries = np.arange(len(y)) // spec["query_size"]
    return X, relevance.astype(np.float32), queries.astype(np.int32)


def fit_predict(name: str, X, y, group, test, train, cfg: dict) -> np.ndarray:
    kwargs = dict(CUSTOM.get(name, dict(loss=name)))
    cats = categorical_columns(X) or None
    model = jaxgbt.fit(kwargs.pop("loss"), X.iloc[train], y[train], group=group[train],
                       n_trees=cfg["n_trees"], depth=cfg["depth"],
                       learning_rate=cfg["learning_rate"], categorical_features=cats, **kwargs)
    return np.asarray(model.predict_raw(X.iloc[test]))


def run_dataset(X, y, group, cfg: dict) -> dict:
    """{loss: f64[R] scores averaged over the splits (the test sets, then resamples)}."""
    totals = {name: 0.0 for name in cfg["losses"]}
    for seed in cfg["split_seeds"]:
        train, test = random_split(len(y), seed, cfg["test_fraction"], group)
        weights = bootstrap_weights(len(test), cfg["n_resamples"], (seed, 1), group[test])
        for name in cfg["losses"]:
            prediction = fit_predict(name, X, y, group, test, train, cfg)
            totals[name] = totals[name] + resampled_scores(cfg["metric"], y[test], prediction,
                                                           weights, group[test])
    return {name: total / len(cfg["split_seeds"]) for name, total in totals.items()}


def rows_of(dataset: str, scores: dict, cfg: dict) -> list[dict]:
    reference = scores[cfg["losses"][0]]
    rows = []
    for name, values in scores.items():
        difference = values - reference
        low, high = percentile_interval(difference[1:], cfg["confidence"])
        verdict = "" if name == cfg["losses"][0] else (
            "better" if low > 0 else "worse" if high < 0 else "level")
        rows.append(dict(dataset=dataset, loss=name, score=values[0], difference=difference[0],
                         interval=f"[{low:+.4f}, {high:+.4f}]", verdict=verdict))
    return rows


def main(cfg: dict) -> None:
    suite = read_config(ROOT / "configs" / "accuracy_suite.toml")
    started, rows = time.perf_counter(), []
    for dataset in cfg["datasets"]:
        if dataset in cfg.get("built", {}):
            X, y, group = built_dataset(cfg["built"][dataset], suite)
        else:
            X, y, group = read_dataset(suite["data"][dataset])
        scores = run_dataset(X, y, group, cfg)
        rows += rows_of(dataset, scores, cfg)
        print(f"  {dataset}: " + ", ".join(f"{k} {v[0]:.4f}" for k, v in scores.items()),
              flush=True)
    metric = cfg["metric"]
    columns = [("dataset", "dataset", ""), ("loss", "loss", ""), (metric, "score", ".4f"),
               (f"- {cfg['losses'][0]}", "difference", "+.4f"),
               (f"{cfg['confidence']:.0%} interval", "interval", ""), ("verdict", "verdict", "")]
    print("\n" + format_table(rows, columns) + f"\n\n({len(cfg['split_seeds'])} splits, "
          f"{cfg['n_trees']} trees, {time.perf_counter() - started:.0f} s)")
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, rows=rows))


if __name__ == "__main__":
    main(load_config("ranking_losses", doc=__doc__))
