"""Accuracy suite: jaxgbt at its defaults against XGBoost, LightGBM, CatBoost and
scikit-learn's HistGradientBoosting on every real dataset, with bootstrap intervals.

Run: .venv/bin/python experiments/accuracy_suite.py [--quick] [--run-variants all]
     [--set key=value]

Each dataset of configs/accuracy_suite.toml (the real sets under ../shared/data and those
shipped with scikit-learn) is split at random into train and test once per split seed
(whole queries for ranking). On each split every library fits the task's loss with the
same budget (trees, depth, learning rate) and its defaults otherwise: jaxgbt as
``jaxgbt.fit(loss, X, y, n_trees=, depth=, learning_rate=)``, the anchors as
experiments/_anchors.py builds them. Categorical columns go to each library as its users
would pass them (jaxgbt ``categorical_features``, LightGBM ``categorical_feature``,
CatBoost ``cat_features``, XGBoost ``enable_categorical``, scikit-learn
``categorical_features``).

Every prediction is scored by jaxgbt.metrics: RMSE, Poisson deviance, AUC and log loss,
accuracy and multiclass log loss, NDCG@5, Harrell's C-index. A metric's value is its
mean over the split seeds. The best anchor is the one with the best mean; the difference
jaxgbt - best anchor gets a 95% interval from a paired bootstrap over test rows (queries
for ranking): the same resample of each split's test rows scores both models, and the
resampled differences are averaged over the splits. jaxgbt is within noise where the
interval holds 0 or lies on jaxgbt's better side. The interval is over test rows for
fixed models; models with randomness (jaxgbt's score noise, CatBoost's bootstrap and
noise) also vary with their seed, which ``model_seeds = k`` averages out: each model is
fitted k times per split, seeds ``seed`` to ``seed + k - 1``, and its scores are the
means of those fits' (each resample's alike). Prints one markdown table
(docs/accuracy.md) and writes it with every score to results.json.

Variants: the config's ``[variants]`` table names sets of ``jaxgbt.fit`` settings
(``l2_3 = {l2 = 3.0}``); those listed in ``run_variants`` (``--run-variants l2_3,poisson``,
``--run-variants all``) are fitted on the same splits as jaxgbt's defaults, and a second table
gives each one's mean and its paired difference to the defaults, with the same bootstrap
interval, plus a line per variant counting the rows it is better, level or worse on.
``--set anchors=[]`` leaves the anchors out (jaxgbt and its variants only);
``anchor_settings`` (a TOML table of tables) passes more constructor settings to an
anchor, e.g. ``--set 'anchor_settings={xgboost = {max_cat_to_onehot = 64}}'``.
"""

import itertools
import os
import time

import numpy as np
import pandas as pd
from _anchors import Model, anchor_model, categorical_columns, has_model, thread_limit
from _runner import (
    SHARED_DATA,
    format_table,
    load_config,
    output_dir,
    random_split,
    read_dataset,
    write_json,
)
from _scores import bootstrap_weights, percentile_interval, resampled_scores

import jaxgbt
from jaxgbt import metrics

# task -> jaxgbt's loss for it
LOSSES = {"binary": "logistic", "multiclass": "softmax", "regression": "squared_error",
          "poisson": "poisson", "rank": "lambdarank_ndcg", "survival": "cox"}
# task -> its test metrics (jaxgbt.metrics names)
METRICS = {"binary": ("auc", "logloss"), "multiclass": ("accuracy", "multi_logloss"),
           "regression": ("rmse",), "poisson": ("poisson_deviance",), "rank": ("ndcg@5",),
           "survival": ("concordance_index",)}
METRIC_TITLES = {"auc": "AUC", "logloss": "log loss", "accuracy": "accuracy",
                 "multi_logloss": "multi log loss", "rmse": "RMSE",
                 "poisson_deviance": "Poisson deviance", "ndcg@5": "NDCG@5",
                 "concordance_index": "C-index"}
ANCHOR_TITLES = {"xgboost": "XGBoost", "lightgbm": "LightGBM", "catboost": "CatBoost",
                 "sklearn-hgb": "sklearn HGB"}
# jaxgbt.fit settings that act only on categorical columns: a variant of these alone is the
# defaults' model on a set without categorical columns, so it is not fitted there
CATEGORICAL_SETTINGS = {"one_hot_max_size", "categorical_pairs", "statistic_orders",
                        "target_statistic", "one_hot_beside"}
VERDICT_WORDS = {"win": "better", "tie": "level", "loss": "worse"}


def with_categorical_pairs(X: pd.DataFrame, cat_names: list[str]) -> pd.DataFrame:
    """X with one more categorical column per pair of its categorical columns: the two
    labels joined (a missing label as the string "nan"), named "a*b"; a static form of
    CatBoost's combinations of categorical features."""
    X = X.copy()
    for a, b in itertools.combinations(cat_names, 2):
        X[f"{a}*{b}"] = pd.Categorical(X[a].astype(str) + "|" + X[b].astype(str))
    return X


def with_one_hot_beside(X: pd.DataFrame, cat_names: list[str], most: int) -> pd.DataFrame:
    """X with a 0/1 float column per category of each categorical column of at most
    ``most`` categories (by its dtype's categories), named "name=label", beside the
    categorical column itself, which keeps its own encoding."""
    X = X.copy()
    for name in cat_names:
        categories = X[name].cat.categories
        if len(categories) <= most:
            for label in categories:
                X[f"{name}={label}"] = (X[name] == label).to_numpy(np.float32)
    return X


def jaxgbt_model(task: str, cfg: dict, cat_names: list[str], settings=None) -> Model:
    """jaxgbt with its defaults but the budget and ``settings`` (more ``jaxgbt.fit``
    keyword arguments, a variant's); the categorical columns named. A variant's
    ``auto`` table fits with ``jaxgbt.fit_auto`` (its arguments), which chooses the
    trees and learning rate itself: the budget's depth only, unless the table lists
    ``depths`` to choose from. ``categorical_pairs = true`` is not a ``fit`` setting: it
    adds every pair of categorical columns as a column (``with_categorical_pairs``)
    before fitting and predicting; ``one_hot_beside = k`` adds 0/1 columns of the
    categories of columns of at most k categories beside them (``with_one_hot_beside``).
    With ``multi_strategy = "one_output_per_tree"`` a model of K classes fits K times the
    budget's trees, as many per class as the anchors grow (one per class a round)."""
    settings = dict(settings or {})
    auto = settings.pop("auto", None)
    pairs = settings.pop("categorical_pairs", False)
    beside = settings.pop("one_hot_beside", 0)
    depth = {} if auto is not None and "depths" in auto else {"depth": cfg["depth"]}
    columns = cat_names + [f"{a}*{b}" for a, b in itertools.combinations(cat_names, 2)
                           if pairs]

    def encoded(X):
        X = with_categorical_pairs(X, cat_names) if pairs else X
        return with_one_hot_beside(X, cat_names, beside) if beside else X

    def fit(X, y, group=None):
        common = dict(**depth, categorical_features=columns or None, group=group,
                      **settings)
        if auto is not None:
            return jaxgbt.fit_auto(LOSSES[task], encoded(X), y, seed=cfg["seed"], **auto,
                                   **common).model
        per_output = settings.get("multi_strategy") == "one_output_per_tree"
        n_trees = cfg["n_trees"] * (int(np.max(y)) + 1 if per_output else 1)
        return jaxgbt.fit(LOSSES[task], encoded(X), y, n_trees=n_trees,
                          learning_rate=cfg["learning_rate"], seed=cfg["seed"], **common)

    return Model(fit, lambda model, X: np.asarray(model.predict(encoded(X))))


def variant_names(cfg: dict) -> list[str]:
    """The variants to run: ``cfg["run_variants"]`` (names, or ``["all"]``) from
    ``cfg["variants"]``."""
    defined, chosen = cfg.get("variants", {}), list(cfg.get("run_variants", []))
    if chosen == ["all"]:
        return list(defined)
    unknown = [name for name in chosen if name not in defined]
    if unknown:
        raise SystemExit(f"run_variants: {unknown} not in the config's [variants] table "
                         f"({sorted(defined)}); add them there or pick from it.")
    return chosen


def variant_key(name: str) -> str:
    """A variant's name among the libraries of a split's scores."""
    return f"jaxgbt {name}"


def models(task: str, X: pd.DataFrame, cfg: dict) -> dict[str, Model]:
    """jaxgbt, its variants (``variant_names``) that can change its model on X, then each
    anchor of ``cfg["anchors"]`` that is installed and has the task, with its
    ``cfg["anchor_settings"]``."""
    cat_names = categorical_columns(X)
    out = {"jaxgbt": jaxgbt_model(task, cfg, cat_names)}
    for name in variant_names(cfg):
        settings = cfg["variants"][name]
        if cat_names or not set(settings) <= CATEGORICAL_SETTINGS:
            out[variant_key(name)] = jaxgbt_model(task, cfg, cat_names, settings)
    for library in cfg["anchors"]:
        if has_model(library, task):
            out[library] = anchor_model(library, task, cfg, cat_names,
                                        **cfg["anchor_settings"].get(library, {}))
    return out


def subsample(X: pd.DataFrame, y: np.ndarray, group, max_rows: int, seed: int):
    """At most ``max_rows`` rows drawn at random (0: all), in their order; whole queries
    where there are queries (as many as fit in max_rows)."""
    if not max_rows or len(y) <= max_rows:
        return X, y, group
    if group is None:
        keep = np.sort(np.random.default_rng(seed).choice(len(y), max_rows, replace=False))
    else:
        order = np.random.default_rng(seed).permutation(np.unique(group))
        sizes = np.bincount(group)[order]
        keep = np.flatnonzero(np.isin(group, order[np.cumsum(sizes) <= max_rows]))
    return (X.iloc[keep].reset_index(drop=True), y[keep],
            None if group is None else group[keep])


def run_split(task: str, data, seed: int, cfg: dict) -> dict:
    """One split: {"fit_s": {library: seconds}, metric: {library: f64[R] resampled scores,
    the first the test set itself}}. With ``model_seeds`` k > 1, every model is fitted k
    times, with the random seeds ``cfg["seed"]`` to ``cfg["seed"] + k - 1``, and its
    scores (each resample's) and fit seconds are the means over those fits."""
    X, y, group = data
    train, test = random_split(len(y), seed, cfg["test_fraction"], group)
    test_group = None if group is None else group[test]
    # Resamples drawn from a stream of their own, (seed, 1), not the split's.
    weights = bootstrap_weights(len(test), cfg["n_resamples"], (seed, 1), test_group)
    fits: dict[str, list] = {}
    scores: dict[str, dict[str, list]] = {metric: {} for metric in METRICS[task]}
    model_seeds = range(cfg["seed"], cfg["seed"] + cfg.get("model_seeds", 1))
    with thread_limit(cfg["threads"]):
        for model_seed in model_seeds:
            for library, model in models(task, X, {**cfg, "seed": model_seed}).items():
                start = time.perf_counter()
                try:
                    fitted = model.fit(X.iloc[train], y[train],
                                       None if group is None else group[train])
                except ValueError as error:
                    if library in ("jaxgbt", *cfg["anchors"]):
                        raise
                    # a variant jaxgbt refuses for this task (e.g. ordered boosting of a
                    # ranking loss): raised before anything is traced, its cells stay empty
                    print(f"  {library} refused on this task: {error}", flush=True)
                    continue
                fits.setdefault(library, []).append(time.perf_counter() - start)
                prediction = model.predict(fitted, X.iloc[test])
                for metric in METRICS[task]:
                    scores[metric].setdefault(library, []).append(resampled_scores(
                        metric, y[test], prediction, weights, test_group))
    return {"fit_s": {library: float(np.mean(seconds)) for library, seconds in fits.items()},
            **{metric: {library: np.mean(runs, axis=0) for library, runs in by_library.items()}
               for metric, by_library in scores.items()}}


def paired_difference(scores, reference, higher: bool, confidence: float) -> dict:
    """The difference of two models' scores, each f64[R] (the test set, then its resamples
    averaged over the splits), at the test set, its central ``confidence`` bootstrap
    interval, and the verdict: "win" (the interval lies on ``scores``' better side),
    "loss" (on its worse side) or "tie"."""
    difference = scores - reference
    low, high = percentile_interval(difference[1:], confidence)
    better = low > 0 if higher else high < 0
    worse = high < 0 if higher else low > 0
    return dict(difference=difference[0], ci_low=low, ci_high=high,
                verdict="win" if better else "loss" if worse else "tie")


def summary_rows(name: str, spec: dict, data, splits: list[dict], cfg: dict) -> list[dict]:
    """One table row per metric: each library's mean over the splits, the best anchor, the
    difference jaxgbt - best anchor and its 95% paired bootstrap interval, the verdict;
    under "variants", each variant's mean, difference to jaxgbt's defaults, interval and
    verdict, its fit seconds summed over the splits, and where anchors ran, under
    "against_best", its difference to the best anchor with interval and verdict."""
    X, y, _ = data
    task, rows = spec["task"], []
    n_cat = len(categorical_columns(X))
    shape = f"{len(y)} x {X.shape[1]}" + (f" ({n_cat} categorical)" if n_cat else "")
    for metric in METRICS[task]:
        higher = metrics.higher_is_better(metric)
        libraries = splits[0][metric]
        mean = {lib: np.mean([split[metric][lib] for split in splits], axis=0)
                for lib in libraries}  # f64[R] each: resamples averaged over the splits
        anchors = [lib for lib in libraries if lib in cfg["anchors"]]
        row = dict(dataset=name, task=task, shape=shape, metric=METRIC_TITLES[metric],
                   higher_is_better=higher,
                   **{lib: mean[lib][0] for lib in ("jaxgbt", *anchors)},
                   jaxgbt_fit_s=sum(split["fit_s"]["jaxgbt"] for split in splits))
        best = None
        if anchors:
            best = (max if higher else min)(anchors, key=lambda lib: mean[lib][0])
            row.update(best_anchor=best, **paired_difference(mean["jaxgbt"], mean[best],
                                                             higher, cfg["confidence"]))
        row["variants"] = {
            variant: dict(mean=mean[key][0], fit_s=sum(split["fit_s"][key] for split in splits),
                          **paired_difference(mean[key], mean["jaxgbt"], higher,
                                              cfg["confidence"]),
                          **({} if best is None else {"against_best": paired_difference(
                              mean[key], mean[best], higher, cfg["confidence"])}))
            for variant in variant_names(cfg) if (key := variant_key(variant)) in libraries}
        rows.append(row)
    return rows


def table(rows: list[dict], anchors: list[str], confidence: float, digits: int = 4) -> str:
    """The markdown table of ``summary_rows`` rows."""
    def score(key):
        return lambda row: None if row.get(key) is None else f"{row[key]:.{digits}f}"

    def difference(row):
        if "difference" not in row:
            return None
        return (f"{row['difference']:+.{digits}f} "
                f"[{row['ci_low']:+.{digits}f}, {row['ci_high']:+.{digits}f}]")

    def within(row):
        if "verdict" not in row:
            return None
        return {"win": "yes (better)", "tie": "yes", "loss": "no"}[row["verdict"]]

    return format_table(rows, [
        ("dataset", "dataset", ""), ("task", "task", ""), ("rows x features", "shape", ""),
        ("metric", lambda r: f"{r['metric']} ({'higher' if r['higher_is_better'] else 'lower'}"
                             " is better)", ""),
        ("jaxgbt", score("jaxgbt"), ""),
        *((ANCHOR_TITLES[a], score(a), "") for a in anchors),
        ("best anchor", lambda r: ANCHOR_TITLES.get(r.get("best_anchor")), ""),
        (f"jaxgbt - best [{confidence:.0%} CI]", difference, ""),
        ("within noise?", within, "")])


def variant_table(rows: list[dict], variants: list[str], confidence: float,
                  digits: int = 4) -> str:
    """The markdown table of each variant against jaxgbt's defaults, a row per (dataset,
    metric) of ``summary_rows``: the defaults' mean, then per variant its mean, its
    difference to the defaults with the ``confidence`` interval, and better / level /
    worse (an empty cell: not run on that set); where anchors ran, a second column per
    variant: its difference to the best anchor, the same way."""
    def cell(variant, with_mean=True, key=None):
        def text(row):
            v = row["variants"].get(variant)
            if v is not None and key is not None:
                v = v.get(key)
            if v is None:
                return None
            mean = f"{v['mean']:.{digits}f}: " if with_mean else ""
            return (f"{mean}{v['difference']:+.{digits}f} "
                    f"[{v['ci_low']:+.{digits}f}, {v['ci_high']:+.{digits}f}] "
                    f"{VERDICT_WORDS[v['verdict']]}")
        return text

    against_anchors = any("best_anchor" in row for row in rows)
    columns = []
    for variant in variants:
        columns.append((f"{variant}: mean, - defaults [{confidence:.0%} CI]", cell(variant),
                        ""))
        if against_anchors:
            columns.append((f"{variant} - best anchor [{confidence:.0%} CI]",
                            cell(variant, False, "against_best"), ""))
    return format_table(rows, [
        ("dataset", "dataset", ""),
        ("metric", lambda r: f"{r['metric']} ({'higher' if r['higher_is_better'] else 'lower'}"
                             " is better)", ""),
        ("jaxgbt defaults", lambda r: f"{r['jaxgbt']:.{digits}f}", ""),
        *columns])


def variant_summary(rows: list[dict], variants: list[str], settings: dict) -> str:
    """One line per variant: its settings, how many rows it is better, level or worse on,
    and its fit seconds against the defaults' on the same sets."""
    lines = []
    for variant in variants:
        ran = [row for row in rows if variant in row["variants"]]
        counts = {verdict: sum(row["variants"][variant]["verdict"] == verdict for row in ran)
                  for verdict in VERDICT_WORDS}
        # a dataset's fit seconds once, from its first metric's row
        firsts = [row for i, row in enumerate(ran)
                  if i == 0 or (ran[i - 1]["dataset"] != row["dataset"])]
        fit_s = sum(row["variants"][variant]["fit_s"] for row in firsts)
        default_s = sum(row["jaxgbt_fit_s"] for row in firsts)
        against = [row["variants"][variant]["against_best"] for row in ran
                   if "against_best" in row["variants"][variant]]
        anchors = "" if not against else "; against the best anchor " + ", ".join(
            f"{VERDICT_WORDS[verdict]} on {sum(a['verdict'] == verdict for a in against)}"
            for verdict in VERDICT_WORDS) + f" of {len(against)}"
        lines.append(f"- {variant} {settings[variant]}: better on {counts['win']}, level on "
                     f"{counts['tie']}, worse on {counts['loss']} of {len(ran)} rows{anchors}; "
                     f"fits {fit_s:.0f} s against the defaults' {default_s:.0f} s on those "
                     "sets")
    return "\n".join(lines)


def run_dataset(name: str, spec: dict, cfg: dict):
    """(data, the splits' scores and fit seconds, table rows), or None without its files."""
    data = read_dataset(spec)
    if data is None:
        return None
    data = subsample(*data, spec.get("max_rows", cfg["max_rows"]), cfg["seed"])
    splits = []
    for seed in cfg["split_seeds"]:
        start = time.perf_counter()
        splits.append(run_split(spec["task"], data, seed, cfg))
        first = METRICS[spec["task"]][0]
        print(f"  {name} split {seed} ({time.perf_counter() - start:.0f} s): "
              + ", ".join(f"{lib} {scores[0]:.4f}" for lib, scores in splits[-1][first].items()),
              flush=True)
    return data, splits, summary_rows(name, spec, data, splits, cfg)


def main(cfg: dict) -> dict:
    model_seeds = cfg.get("model_seeds", 1)
    if isinstance(model_seeds, bool) or not isinstance(model_seeds, int) or model_seeds < 1:
        raise SystemExit(f"model_seeds = {model_seeds!r}: give the number of fits of each "
                         "model per split, an integer >= 1 (1 fits each once).")
    rows, results, started = [], {}, time.perf_counter()
    for name in cfg["datasets"]:
        spec = cfg["data"][name]
        outcome = run_dataset(name, spec, cfg)
        # A set's programs serve no other set (shapes differ); kept, a run of every set
        # with a few variants used up the process's memory maps (jaxgbt.clear_caches).
        jaxgbt.clear_caches()
        if outcome is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped", flush=True)
            continue
        (X, y, _), splits, dataset_rows = outcome
        rows += dataset_rows
        results[name] = dict(
            task=spec["task"], rows=len(y), features=X.shape[1],
            categorical=categorical_columns(X), summary=dataset_rows,
            splits=[dict(seed=seed, fit_s=split["fit_s"],
                         scores={metric: {lib: values[0] for lib, values in split[metric].items()}
                                 for metric in METRICS[spec["task"]]})
                    for seed, split in zip(cfg["split_seeds"], splits, strict=True)])
    markdown = table(rows, cfg["anchors"], cfg["confidence"])
    variants = variant_names(cfg)
    variants_markdown = (variant_table(rows, variants, cfg["confidence"]) + "\n\n"
                         + variant_summary(rows, variants, cfg["variants"])) if variants else ""
    load = os.getloadavg()[0]
    print(f"\n{markdown}\n\n" + (f"{variants_markdown}\n\n" if variants else "")
          + f"({len(cfg['split_seeds'])} split seeds, "
          + (f"{cfg['model_seeds']} model seeds each, " if cfg.get("model_seeds", 1) > 1 else "")
          + f"{cfg['n_trees']} trees, {cfg['n_resamples']} bootstrap resamples; "
          f"{time.perf_counter() - started:.0f} s, load average {load:.1f} at the end)",
          flush=True)
    write_json(output_dir(cfg) / "results.json",
               dict(config=cfg, table=markdown, variants_table=variants_markdown,
                    results=results))
    return dict(table=markdown, variants_table=variants_markdown, rows=rows, results=results)


if __name__ == "__main__":
    # OpenMP threads that wait by sleeping, read when LightGBM, XGBoost and scikit-learn
    # load (lazily, after this): on cores shared with other work, spinning waits made their
    # 2-thread fits up to 10 times slower. Scores do not depend on it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    main(load_config("accuracy_suite", doc=__doc__, overrides={"run_variants": dict(
        type=lambda names: names.split(","), metavar="NAME,NAME",
        help="variants of the config's [variants] table to fit beside jaxgbt's defaults "
             "(comma-separated), or all")}))
