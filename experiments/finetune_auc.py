"""Fine-tuning a boosted model's leaves on a smooth AUC surrogate, scored on held-out rows.

Run: .venv/bin/python experiments/finetune_auc.py [--config configs/finetune_auc.toml]
     [--set key=value]
Per seed: split LightGBM's binary example (train + test files, 7,500 rows) into fit / valid /
test rows; boost a logistic model (early-stopped on valid); fine-tune it with
``jaxgbt.finetune_trace`` on each configured loss (early-stopped on valid), either on the rows
it was boosted on or on rows held back from boosting; print test AUC, log loss and the target
loss before and after, and the mean paired change over seeds. Writes results.json. Public
jaxgbt API only.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _runner import format_table, load_config, output_dir, timed, write_json

import jaxgbt
from jaxgbt.datasets import load_lightgbm_binary

log = logging.getLogger("finetune_auc")


def split(seed: int, n_test: int, n_valid: int):
    X_train, y_train, X_test, y_test = load_lightgbm_binary()
    X = np.concatenate([X_train, X_test])
    y = np.concatenate([y_train, y_test]).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(y))
    test, valid, fit = np.split(order, [n_test, n_test + n_valid])
    return (X[fit], y[fit]), (X[valid], y[valid]), (X[test], y[test])


def logistic_loss(y, f):
    return jnp.mean(jnp.logaddexp(0.0, f) - y * f)


def variant_setup(name: str, cfg: dict, X_fit):
    """(loss_fn, finetune keyword arguments) of one variant."""
    scale, weight = cfg["scale"], cfg["logloss_weight"]

    def auc(y, f):
        return jaxgbt.pairwise_auc_loss(y, f, scale=scale)

    def auc_scaled(y, f):
        # Margins in units of their own spread: multiplying them all by c > 1 no longer
        # lowers the loss, so only re-ranking does.
        return jaxgbt.pairwise_auc_loss(y, f / jnp.std(f), scale=scale)

    def logloss_auc(y, f):
        return logistic_loss(y, f) + weight * auc(y, f)

    if name == "auc":
        return auc, {}
    if name == "auc_scaled":
        return auc_scaled, {}
    if name == "logloss+auc":
        return logloss_auc, {}
    if name == "auc+thresholds":
        temperature = cfg["temperature"] * np.std(X_fit, axis=0)
        return auc, dict(what=("leaves", "thresholds"), temperature=temperature)
    raise ValueError(f"unknown variant {name!r} in the config; known: auc, auc_scaled, "
                     "logloss+auc, auc+thresholds")


def scores(model, loss_fn, X, y) -> dict:
    raw = model.predict_raw(X)
    return dict(auc=float(jaxgbt.metrics.auc(y, raw)),
                logloss=float(jaxgbt.metrics.logloss(y, jax.nn.sigmoid(raw))),
                target=float(loss_fn(jnp.asarray(y), raw)))


def boost(cfg: dict, seed: int, X, y, X_valid, y_valid):
    b = cfg["boost"]
    return jaxgbt.fit("logistic", X, y, n_trees=b["n_trees"], depth=b["depth"],
                      learning_rate=b["learning_rate"], l2=b["l2"], seed=seed,
                      eval_set=[(X_valid, y_valid)], eval_metric="logloss",
                      early_stopping_rounds=b["early_stopping_rounds"])


def run_seed(cfg: dict, seed: int) -> list[dict]:
    """Every (mode, variant) on one split.

    Modes: "fit_rows" fine-tunes on the rows the model was boosted on; "fresh_rows" boosts
    on all but n_fresh of them and fine-tunes on those n_fresh rows only.
    """
    (X_fit, y_fit), valid, (X_test, y_test) = split(seed, cfg["n_test"], cfg["n_valid"])
    full = boost(cfg, seed, X_fit, y_fit, *valid)
    full_auc = float(jaxgbt.metrics.auc(y_test, full.predict_raw(X_test)))
    f = cfg["finetune"]
    rows = []
    for mode in cfg["modes"]:
        if mode == "fit_rows":
            model, X_tune, y_tune = full, X_fit, y_fit
        elif mode == "fresh_rows":
            n = len(y_fit) - cfg["n_fresh"]
            model = boost(cfg, seed, X_fit[:n], y_fit[:n], *valid)
            X_tune, y_tune = X_fit[n:], y_fit[n:]
        else:
            raise ValueError(f"unknown mode {mode!r} in the config; known: fit_rows, fresh_rows")
        for name in f["variants"]:
            loss_fn, extra = variant_setup(name, f, X_tune)
            trace, seconds = timed(jaxgbt.finetune_trace, model, loss_fn, X_tune, y_tune,
                                   optimizer=optax.adam(f["adam_learning_rate"]),
                                   steps=f["steps"], eval_set=valid, patience=f["patience"],
                                   **extra)
            before = scores(model, loss_fn, X_test, y_test)
            after = scores(trace.model, loss_fn, X_test, y_test)
            rows.append(dict(seed=seed, mode=mode, variant=name,
                             best_round=int(model.best_round), best_step=trace.best_step,
                             seconds=seconds, auc_boosted_on_all_fit_rows=full_auc,
                             valid_before=float(trace.valid_loss[0]),
                             valid_after=float(np.nanmin(trace.valid_loss)),
                             **{f"{k}_before": v for k, v in before.items()},
                             **{f"{k}_after": v for k, v in after.items()}))
            r = rows[-1]
            log.info("seed %d %-10s %-15s step %3d  AUC %.4f -> %.4f  logloss %.4f -> %.4f  "
                     "target %.4f -> %.4f  (%.1f s)", seed, mode, name, r["best_step"],
                     r["auc_before"], r["auc_after"], r["logloss_before"], r["logloss_after"],
                     r["target_before"], r["target_after"], seconds)
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per (mode, variant): means over seeds, and the paired test changes' mean and sd."""
    out = []
    for mode, name in dict.fromkeys((r["mode"], r["variant"]) for r in rows):
        mine = [r for r in rows if (r["mode"], r["variant"]) == (mode, name)]
        entry = dict(mode=mode, variant=name, seeds=len(mine),
                     auc_boosted_on_all_fit_rows=float(np.mean(
                         [r["auc_boosted_on_all_fit_rows"] for r in mine])),
                     steps_kept=[r["best_step"] for r in mine])
        for key in ("auc", "logloss", "target"):
            change = np.array([r[f"{key}_after"] - r[f"{key}_before"] for r in mine])
            entry[f"{key}_before"] = float(np.mean([r[f"{key}_before"] for r in mine]))
            entry[f"{key}_after"] = float(np.mean([r[f"{key}_after"] for r in mine]))
            entry[f"{key}_change"] = float(change.mean())
            entry[f"{key}_change_sd"] = float(change.std(ddof=1)) if len(mine) > 1 else 0.0
        out.append(entry)
    return out


def change(key: str):
    """A summary cell: "before->after (mean change ± its sd)" of one test score."""
    return lambda t: (f"{t[f'{key}_before']:.4f}->{t[f'{key}_after']:.4f} "
                      f"({t[f'{key}_change']:+.4f} ± {t[f'{key}_change_sd']:.4f})")


def main(cfg: dict) -> dict:
    out = output_dir(cfg)
    rows = [row for seed in cfg["seeds"] for row in run_seed(cfg, seed)]
    table = summary(rows)
    log.info("\nheld-out test rows, mean over %d seeds (change = after - before, sd over seeds)",
             len(cfg["seeds"]))
    log.info(format_table(table, [("mode", "mode", ""), ("variant", "variant", ""),
                                  ("test AUC", change("auc"), ""),
                                  ("test logloss", change("logloss"), ""),
                                  ("test target loss", change("target"), ""),
                                  ("steps kept", "steps_kept", "")]))
    log.info("boosted on all fit rows (no fine-tuning): test AUC %.4f",
             table[0]["auc_boosted_on_all_fit_rows"])
    results = dict(config=cfg, summary=table, runs=rows)
    write_json(out / "results.json", results)
    return results


if __name__ == "__main__":
    logging.basicConfig(format="%(message)s")
    log.setLevel(logging.INFO)
    main(load_config("finetune_auc", doc=__doc__))
