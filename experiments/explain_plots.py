"""The pictures of docs/explain.md: a model of the Adult census data explained.

    python experiments/explain_plots.py [--quick] [--set key=value]

Fits a logistic model on ../shared/data/adult (its categorical columns as pandas
categories, so they are credited as one column each), with the test rows as the
validation set, and draws into `output_dir`: gain importance, permutation importance,
a SHAP summary and a dependence plot of test rows, tree 0, and the learning curve.
Prints the model's test AUC, its permutation importances and the largest additivity
error of the SHAP values.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from _runner import SHARED_DATA, load_config, output_dir  # noqa: E402

import jaxgbt  # noqa: E402


def adult():
    """(X_train, y_train, X_test, y_test): DataFrames with category columns, 0/1 labels."""
    tables = [pd.read_csv(SHARED_DATA / "adult" / name, skipinitialspace=True)
              for name in ("adult_train.csv", "adult_test.csv")]
    both = pd.concat(tables, ignore_index=True)
    y = (both.pop("income") == ">50K").to_numpy(np.float32)
    for name in both.columns:
        if not pd.api.types.is_numeric_dtype(both[name]):
            both[name] = both[name].astype("category")
    n_train = len(tables[0])
    return both[:n_train], y[:n_train], both[n_train:].reset_index(drop=True), y[n_train:]


def save(ax, folder, name):
    ax.figure.savefig(folder / name, dpi=110)
    plt.close(ax.figure)
    print(f"wrote {folder / name}")


def main(cfg):
    folder = output_dir(cfg)
    X, y, X_test, y_test = adult()
    model = jaxgbt.fit("logistic", X, y, n_trees=cfg["n_trees"], depth=cfg["depth"],
                       learning_rate=cfg["learning_rate"], seed=cfg["seed"],
                       eval_set=[(X_test, y_test)], eval_metric=["logloss", "auc"],
                       early_stopping_rounds=cfg["early_stopping_rounds"])
    auc = float(jaxgbt.metrics.auc(y_test, model.predict(X_test)))
    print(f"{model}, best round {int(model.best_round)}, test AUC {auc:.4f}")
    rows = X_test[:cfg["explained_rows"]]
    phi = np.asarray(model.shap_values(rows))
    error = np.abs(phi.sum(1) + float(model.expected_value) - np.asarray(model.predict_raw(rows)))
    print(f"largest |sum of SHAP values + expected value - margin|: {error.max():.2e}")
    result = jaxgbt.permutation_importance(model, X_test, y_test, metric="auc", n_repeats=5,
                                          seed=cfg["seed"])
    for j in np.argsort(result.importances_mean)[::-1]:
        print(f"  {result.feature_names[j]:16s} AUC drop {result.importances_mean[j]:.4f} "
              f"+- {result.importances_std[j]:.4f}")

    save(jaxgbt.plot.importance(model, "gain"), folder, "importance.png")
    ax = plt.subplots(figsize=(6, 4), layout="constrained")[1]
    order = np.argsort(result.importances_mean)
    ax.barh([result.feature_names[j] for j in order], result.importances_mean[order],
            xerr=result.importances_std[order], color="#1f77b4")
    ax.set_xlabel("drop in test AUC when the column is shuffled")
    ax.set_title("permutation importance (5 shuffles)")
    save(ax, folder, "permutation_importance.png")
    save(jaxgbt.plot.shap_summary(phi, rows), folder, "shap_summary.png")
    save(jaxgbt.plot.dependence(phi, rows, "age", color_by="hours_per_week"), folder,
         "dependence_age.png")
    save(jaxgbt.plot.tree(model, 0), folder, "tree.png")
    save(jaxgbt.plot.learning_curve(model), folder, "learning_curve.png")


if __name__ == "__main__":
    main(load_config("explain_plots", doc=__doc__))
