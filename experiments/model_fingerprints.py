"""Model fingerprints: the predictions of one fit per feature, saved to compare code versions.

Run: .venv/bin/python experiments/model_fingerprints.py --out out/fingerprints/new.npz
     [--compare out/fingerprints/old.npz]
Fits a small model for each training feature (growth policies, objectives, sampling,
constraints, categoricals, ordered boosting, warm starts, early stopping, sweeps, forests,
the differentiable path, save/load) on the bundled data and stores each one's predictions.
With --compare, prints which fingerprints differ bit for bit from another run's file: a
refactoring must leave every model the same. Public jaxgbt API only, so it runs on any
version of the package.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import jaxgbt  # noqa: E402
from jaxgbt.datasets import load_lightgbm_binary  # noqa: E402

N_ROWS, N_TREES, DEPTH = 1500, 20, 4


def _data():
    X, y, X_test, _ = load_lightgbm_binary()
    X, y = X[:N_ROWS].copy(), y[:N_ROWS]
    X[::7, 3] = np.nan  # missing values in one column
    return X, y, X_test[:200]


def _fits(X, y, X_test) -> dict:
    """name -> a thunk returning predictions (NumPy) of one model."""
    small = dict(n_trees=N_TREES, depth=DEPTH)
    target = X[:, 0] * 2.0 + np.nan_to_num(X[:, 3]) + 0.1 * y
    classes = (np.digitize(X[:, 5], np.quantile(X[:, 5], [1 / 3, 2 / 3]))).astype(np.float64)
    groups = np.repeat(np.arange(N_ROWS // 30), 30)
    grades = np.clip(np.floor(X[:, 1] * 2), 0, 4).astype(np.float64)

    def predict(model, raw=False):
        out = model.predict_raw(X_test) if raw else model.predict(X_test)
        return np.asarray(out)

    def custom_loss(y_i, f_i):
        return jnp.logaddexp(0.0, f_i) - y_i * f_i

    def categorical_fit():
        import pandas as pd

        frame = pd.DataFrame(X[:, :6], columns=[f"x{j}" for j in range(6)])
        frame["city"] = pd.Categorical(np.asarray(list("abcdefgh"))[(X[:, 6] * 3).astype(int) % 8])
        frame["flag"] = pd.Categorical(np.asarray(list("uv"))[(X[:, 7] > 1).astype(int)])
        test = frame.iloc[:200]
        return np.asarray(jaxgbt.fit("logistic", frame, y, **small).predict(test))

    def early_stopped():
        model = jaxgbt.fit("logistic", X[:1000], y[:1000], n_trees=60, depth=DEPTH,
                           eval_set=[(X[1000:], y[1000:])], eval_metric=["logloss", "auc"],
                           early_stopping_rounds=5)
        history = np.concatenate([np.asarray(v) for _, v in sorted(model.history.items())])
        return np.concatenate([predict(model), history, [int(model.best_round)]])

    def warm_started():
        first = jaxgbt.fit("logistic", X, y, **small)
        return predict(jaxgbt.fit("logistic", X, y, init_model=first, n_trees=10, depth=DEPTH))

    def saved_and_loaded():
        model = jaxgbt.fit("softmax", X, classes, **small)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "model.jgbt"
            model.save(path)
            return predict(jaxgbt.load(path))

    def swept():
        models = jaxgbt.fit_many("logistic", X, y, params={"learning_rate": [0.05, 0.2],
                                                           "seed": [0, 1]},
                                 subsample=0.8, **small)
        return np.stack([predict(models[i]) for i in range(2)])

    def cross_validated():
        result = jaxgbt.cv("logistic", X, y, n_folds=3, eval_metric=["logloss", "auc"], **small)
        means = [np.asarray(result.mean[k]) for k in sorted(result.mean)]
        return np.concatenate(means + [[int(result.best_round)]])

    def forest():
        model = jaxgbt.fit_forest(X, y, task="classification", n_trees=16, depth=DEPTH)
        return np.concatenate([np.asarray(model.model.predict(X_test)).ravel(),
                               [model.oob_score]])

    def soft_and_finetuned():
        model = jaxgbt.fit("logistic", X, y, **small)
        soft = jaxgbt.soft_predict_raw(model, jnp.asarray(np.nan_to_num(X_test)), 0.1)
        tuned = jaxgbt.finetune(model, lambda p, t: jnp.mean(optax.sigmoid_binary_cross_entropy(
            p, t)), X, y, optimizer=optax.adam(1e-3), steps=5)
        return np.concatenate([np.asarray(soft), predict(tuned, raw=True)])

    return {
        "logistic_oblivious": lambda: predict(jaxgbt.fit("logistic", X, y, **small)),
        "logistic_depthwise": lambda: predict(jaxgbt.fit("logistic", X, y, grow_policy="depthwise",
                                                         **small)),
        "squared_error": lambda: predict(jaxgbt.fit("squared_error", X, target, **small)),
        "custom_loss": lambda: predict(jaxgbt.fit(custom_loss, X, y, **small)),
        "softmax": lambda: predict(jaxgbt.fit("softmax", X, classes, **small)),
        "softmax_full_hessian": lambda: predict(jaxgbt.fit("softmax", X, classes, hessian="full",
                                                           **small)),
        "quantile": lambda: predict(jaxgbt.fit("quantile@0.9", X, target, **small)),
        "absolute_error_depthwise": lambda: predict(jaxgbt.fit(
            "absolute_error", X, target, grow_policy="depthwise", **small)),
        "poisson_weighted": lambda: predict(jaxgbt.fit(
            "poisson", X, grades, sample_weight=1.0 + np.abs(X[:, 2]), **small)),
        "lambdarank": lambda: predict(jaxgbt.fit("lambdarank_ndcg", X, grades, group=groups,
                                                 **small), raw=True),
        "constraints": lambda: predict(jaxgbt.fit(
            "squared_error", X, target, monotone_constraints={0: 1},
            interaction_constraints=[[0, 1, 2], [3, 4, 5, 6]], **small)),
        "constraints_depthwise": lambda: predict(jaxgbt.fit(
            "squared_error", X, target, monotone_constraints={0: 1}, grow_policy="depthwise",
            interaction_constraints=[[0, 1, 2], [3, 4, 5, 6]], **small)),
        "bernoulli_gathered": lambda: predict(jaxgbt.fit("logistic", X, y, subsample=0.5,
                                                         **small)),
        "bernoulli_colsample": lambda: predict(jaxgbt.fit(
            "logistic", X, y, subsample=0.8, colsample_bytree=0.7, colsample_bylevel=0.8,
            **small)),
        "depthwise_bynode": lambda: predict(jaxgbt.fit(
            "logistic", X, y, grow_policy="depthwise", colsample_bynode=0.5, **small)),
        "goss": lambda: predict(jaxgbt.fit("logistic", X, y, sampling="goss", **small)),
        "poisson_bootstrap": lambda: predict(jaxgbt.fit("logistic", X, y, sampling="poisson",
                                                        **small)),
        "ordered": lambda: predict(jaxgbt.fit("logistic", X, y, boosting="ordered", **small)),
        "schedule": lambda: predict(jaxgbt.fit(
            "logistic", X, y, learning_rate=optax.linear_schedule(0.3, 0.05, N_TREES), **small)),
        "all_devices": lambda: predict(jaxgbt.fit("logistic", X, y, devices="all", **small)),
        "categorical": categorical_fit,
        "early_stopping": early_stopped,
        "warm_start": warm_started,
        "save_load": saved_and_loaded,
        "fit_many": swept,
        "cv": cross_validated,
        "forest": forest,
        "soft_and_finetune": soft_and_finetuned,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the .npz")
    parser.add_argument("--compare", type=Path, help="another run's .npz to compare with")
    parser.add_argument("--only", nargs="*", help="fingerprint names to compute (default all)")
    args = parser.parse_args(argv)
    X, y, X_test = _data()
    fits = _fits(X, y, X_test)
    results = {}
    for name, thunk in fits.items():
        if args.only and name not in args.only:
            continue
        results[name] = np.asarray(thunk())
        print(f"{name:28s} shape {results[name].shape}", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.out, **results)
    if args.compare is None:
        return 0
    with np.load(args.compare) as other:
        differing = []
        for name, values in results.items():
            if name not in other:
                print(f"{name:28s} not in {args.compare}")
                continue
            same = (values.shape == other[name].shape
                    and values.tobytes() == other[name].tobytes())
            gap = (float(np.nanmax(np.abs(values - other[name])))
                   if values.shape == other[name].shape else float("nan"))
            print(f"{name:28s} {'bitwise equal' if same else f'DIFFERS (max |diff| {gap:.3g})'}")
            differing += [] if same else [name]
    print(f"{len(results) - len(differing)} of {len(results)} bitwise equal")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
