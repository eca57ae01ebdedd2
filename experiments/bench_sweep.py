"""K configurations at once: jaxgbt.fit_many against K sequential fits of LightGBM,
XGBoost and CatBoost, in the same run.

    python experiments/bench_sweep.py [--config configs/bench_sweep.toml]
        [--rows 100000 ...] [--members 16 ...] [--n-trees 100] [--anchor-fits 4]
        [--set key=value]

For every (rows, K): K configurations (learning rate and l2 drawn log-uniformly), the
same trees, depth and bins for every library. jaxgbt trains all K with one fit_many
call (a warm-up call with n_trees=1 compiles the program first: n_trees does not
recompile, and its time is reported as "warm-up s"); each anchor fits the K
configurations one after another. Times include binning for every library. Prints a
markdown table and writes ``results.json`` to the config's output_dir.
"""

import jax
import numpy as np
from _runner import load_config, output_dir, print_table, timed, write_json
from _scores import auc
from _synthetic import higgs_like

import jaxgbt


def configurations(cfg, n_members: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(cfg["seed"] + n_members)

    def log_uniform(low, high):
        return np.exp(rng.uniform(np.log(low), np.log(high), n_members)).astype(np.float32)

    return {"learning_rate": log_uniform(*cfg["learning_rate"]), "l2": log_uniform(*cfg["l2"])}


def fit_lightgbm(cfg, X, y, learning_rate, l2):
    import lightgbm

    model = lightgbm.LGBMClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                                    num_leaves=2 ** cfg["depth"] - 1, learning_rate=learning_rate,
                                    reg_lambda=l2, max_bin=cfg["n_bins"] - 1,
                                    n_jobs=cfg["threads"], verbose=-1)
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def fit_xgboost(cfg, X, y, learning_rate, l2):
    import xgboost

    model = xgboost.XGBClassifier(n_estimators=cfg["n_trees"], max_depth=cfg["depth"],
                                  learning_rate=learning_rate, reg_lambda=l2,
                                  max_bin=cfg["n_bins"], tree_method="hist", n_jobs=cfg["threads"])
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def fit_catboost(cfg, X, y, learning_rate, l2):
    import catboost

    model = catboost.CatBoostClassifier(iterations=cfg["n_trees"], depth=cfg["depth"],
                                        learning_rate=learning_rate, l2_leaf_reg=l2,
                                        border_count=cfg["n_bins"] - 1,
                                        thread_count=cfg["threads"], verbose=False,
                                        allow_writing_files=False)
    model.fit(X, y)
    return lambda X_: model.predict_proba(X_)[:, 1]


def fit_jaxgbt_one(cfg, X, y, learning_rate, l2):
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       n_bins=cfg["n_bins"], learning_rate=float(learning_rate), l2=float(l2))
    jax.block_until_ready(model.leaf_value)
    return lambda X_: np.asarray(model.predict(X_))


FITTERS = {"lightgbm": fit_lightgbm, "xgboost": fit_xgboost, "catboost": fit_catboost,
           "jaxgbt (sequential)": fit_jaxgbt_one}


def fit_many(cfg, X, y, params, n_trees):
    models = jaxgbt.fit_many("logistic", X, y, params=params, n_trees=n_trees,
                             depth=cfg["depth"], n_bins=cfg["n_bins"],
                             batch_size=cfg["batch_size"] or None)
    jax.block_until_ready(models.leaf_value)
    return models


def sequential(cfg, name, X, y, X_test, y_test, params, n_fits):
    """Seconds for all K fits (scaled from the first n_fits when n_fits < K), and the
    mean test AUC of the fits run."""
    n_members = len(params["l2"])
    n_fits = n_members if n_fits <= 0 else min(n_fits, n_members)
    seconds, aucs = 0.0, []
    for i in range(n_fits):
        predict, fit_s = timed(FITTERS[name], cfg, X, y, params["learning_rate"][i],
                               params["l2"][i])
        seconds += fit_s
        aucs.append(auc(y_test, predict(X_test)))
    return seconds * n_members / n_fits, float(np.mean(aucs)), n_fits


def bench(cfg, n_rows, n_members):
    X, y = higgs_like(n_rows + cfg["test_rows"], cfg["seed"])
    X_train, y_train, X_test, y_test = X[:n_rows], y[:n_rows], X[n_rows:], y[n_rows:]
    params = configurations(cfg, n_members)
    # The warm-up compiles; a different n_trees does not compile again.
    _, warm_up = timed(fit_many, cfg, X_train, y_train, params, n_trees=1)
    models, seconds = timed(fit_many, cfg, X_train, y_train, params, n_trees=cfg["n_trees"])
    scores = np.asarray(jax.jit(jax.vmap(lambda m: m.predict(X_test)))(models))
    rows = [dict(library="jaxgbt fit_many", seconds=seconds, warm_up=warm_up, fits=n_members,
                 auc=float(np.mean([auc(y_test, s) for s in scores])))]
    print(f"  jaxgbt fit_many: {seconds:.1f} s for {n_members} models (warm-up {warm_up:.1f} s)",
          flush=True)
    names = list(cfg["anchors"])
    if cfg["sequential_fits"] >= 0:
        fit_jaxgbt_one(dict(cfg, n_trees=1), X_train, y_train, 0.1, 1.0)  # compile first
        names.insert(0, "jaxgbt (sequential)")
    for name in names:
        n_fits = cfg["sequential_fits"] if name.startswith("jaxgbt") else cfg["anchor_fits"]
        try:
            total, mean_auc, n_timed = sequential(cfg, name, X_train, y_train, X_test, y_test,
                                                  params, n_fits)
        except ImportError:
            print(f"{name} is not installed; skipped")
            continue
        rows.append(dict(library=name, seconds=total, warm_up=None, fits=n_timed, auc=mean_auc))
        print(f"  {name}: {total:.1f} s for {n_members} models ({n_timed} timed)", flush=True)
    return rows


def print_results(n_rows, n_members, rows, n_trees):
    anchors = [r["seconds"] for r in rows if not r["library"].startswith("jaxgbt")]
    fastest = min(anchors, default=float("nan"))
    print(f"\n{n_rows:,} rows, K = {n_members} configurations, {n_trees} trees each, "
          f"{jax.device_count()} {jax.default_backend()} device(s)")

    def marked(seconds_to_value, spec):
        """A cell marked "~" where the seconds were scaled up from fewer fits."""
        return lambda r: (("~" if r["fits"] < n_members else "")
                          + format(seconds_to_value(r["seconds"]), spec))

    print_table(rows, [("library", "library", ""),
                       ("seconds for K models", marked(lambda s: s, ".1f"), ""),
                       ("s per model", marked(lambda s: s / n_members, ".2f"), ""),
                       ("warm-up s", "warm_up", ".1f"), ("mean test AUC", "auc", ".4f"),
                       ("ratio to fastest anchor", marked(lambda s: s / fastest, ".2f"), "")])
    scaled = [f"{r['library']} ({r['fits']} of {n_members})" for r in rows
              if r["fits"] < n_members]
    if scaled:
        print(f"~ scaled to K fits from the first fits timed: {', '.join(scaled)}")


def main(cfg: dict) -> list[dict]:
    results = []
    for n_rows in cfg["rows"]:
        for n_members in cfg["members"]:
            rows = bench(cfg, n_rows, n_members)
            print_results(n_rows, n_members, rows, cfg["n_trees"])
            results.append(dict(rows=n_rows, members=n_members, n_trees=cfg["n_trees"],
                                results=rows))
    write_json(output_dir(cfg) / "results.json", results)
    return results


if __name__ == "__main__":
    main(load_config("bench_sweep", doc=__doc__, overrides={
        "rows": dict(type=int, nargs="+", help="replace the config's rows"),
        "members": dict(type=int, nargs="+", help="replace the config's K"),
        "n_trees": dict(type=int, help="replace the config's n_trees"),
        "anchor_fits": dict(type=int, help="replace the config's anchor_fits")}))
